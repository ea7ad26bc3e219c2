package api

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/tools"
)

func TestInfoSubagents(t *testing.T) {
	reg := func(names ...string) *tools.Registry {
		r := tools.NewRegistry()
		for _, n := range names {
			if err := r.Register(tools.Func(n, "does "+n, func(*tools.Context, struct{}) (string, error) { return "", nil })); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	researcher := &agent.Agent{Name: "researcher", Description: "Researches.", System: "Be brief.", Tools: reg("lookup_sources", "fetch_paper")}
	mid := &agent.Agent{Name: "mid", Description: "Delegates further.", Subagents: []*agent.Agent{researcher}}
	writer := &agent.Agent{Name: "writer", Description: "Writes."}

	entry := func(name, desc, path, node, parent string, instructions, tools int) map[string]any {
		logical := "subagents/" + name
		owner := map[string]any{"kind": "application"}
		e := map[string]any{
			"binding": map[string]any{
				"backing":     map[string]any{"kind": "programmatic", "moduleId": "go:" + logical, "registryId": "eve-temporal", "revision": "0.5.0"},
				"logicalPath": logical, "owner": owner,
			},
			"logicalPath": logical, "owner": owner, "sourceId": logical, "sourceKind": "module",
			"name": name, "entryPath": path, "rootPath": path, "nodeId": node, "parentNodeId": parent,
			"summary": map[string]any{"channels": 0.0, "connections": 0.0, "hooks": 0.0, "instructions": float64(instructions),
				"memories": 0.0, "schedules": 0.0, "skills": 0.0, "tools": float64(tools)},
		}
		if desc != "" {
			e["description"] = desc
		}
		return e
	}
	for _, c := range []struct {
		name string
		a    *agent.Agent
		want map[string]any
	}{
		{"none", &agent.Agent{Name: "root"},
			map[string]any{"local": []any{}, "total": 0.0}},
		{"one", &agent.Agent{Name: "root", Subagents: []*agent.Agent{researcher}},
			map[string]any{"total": 1.0, "local": []any{
				entry("researcher", "Researches.", "subagents/researcher", "subagents/researcher", "__root__", 1, 2),
			}}},
		// Nested subagents follow their parent, which their node id names
		// (eve's "<parent>::subagents/<name>").
		{"nested", &agent.Agent{Name: "root", Subagents: []*agent.Agent{mid, writer}},
			map[string]any{"total": 3.0, "local": []any{
				entry("mid", "Delegates further.", "subagents/mid", "subagents/mid", "__root__", 0, 0),
				entry("researcher", "Researches.", "subagents/mid/subagents/researcher", "subagents/mid::subagents/researcher", "subagents/mid", 1, 2),
				entry("writer", "Writes.", "subagents/writer", "subagents/writer", "__root__", 0, 0),
			}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestServer(t, func(o *Options) { o.Info = AgentInfo(c.a) })
			b, err := json.Marshal(s.infoBody())
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got["subagents"]); diff != "" {
				t.Errorf("subagents (-want +got):\n%s", diff)
			}
		})
	}
}
