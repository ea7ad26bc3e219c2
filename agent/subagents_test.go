package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// Each declared subagent is a model-facing tool of its name: its
// description and eve's serve sentence, input {message, taskId?}, a
// resumable task of kind agent; the host runs it on its own task queue.
func TestSubagents(t *testing.T) {
	m, err := scripted.Parse([]byte("name: t\ndefault: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	critic := &agent.Agent{Name: "critic", Description: "Reviews a draft.", Model: m}
	writer := &agent.Agent{Name: "writer", Description: "Writes a draft.", Model: m, Subagents: []*agent.Agent{critic}}
	root := &agent.Agent{Name: "root", Model: m, Subagents: []*agent.Agent{writer}}

	reg, err := agent.Tools(root)
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := reg.Get("writer")
	if !ok {
		t.Fatal("no writer tool")
	}
	if tool.Kind() != tools.KindAgent || tool.Task == nil || !tool.Task.Resumable {
		t.Errorf("writer: kind %s, task %+v", tool.Kind(), tool.Task)
	}
	d := tool.ModelDescriptor()
	if want := "Writes a draft. To send this task more input, call this tool again with its taskId; without taskId, each call starts a new task."; d.Description != want {
		t.Errorf("description %q", d.Description)
	}
	var s struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(d.InputSchema, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Properties["taskId"]; !ok || s.Properties["message"] == nil || !cmp.Equal(s.Required, []string{"message"}) {
		t.Errorf("input schema %s", d.InputSchema)
	}

	var queues []string
	for _, q := range agent.Queues(root, "tq") {
		queues = append(queues, q.TaskQueue+"="+q.Agent.Name)
	}
	if diff := cmp.Diff([]string{"tq=root", "tq/writer=writer", "tq/writer/critic=critic"}, queues); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}

	for _, c := range []struct {
		name string
		subs []*agent.Agent
		want string
	}{
		{"no description", []*agent.Agent{{Name: "x", Model: m}}, "Description is required"},
		{"two of a name", []*agent.Agent{critic, critic}, "another subagent has that name"},
		{"a built-in's name", []*agent.Agent{{Name: "ask_question", Description: "d", Model: m}}, "has that name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.Tools(&agent.Agent{Name: "root", Model: m, Subagents: c.subs})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}

// AgentTool: eve's built-in "agent" tool delegates to a copy of the agent
// that cannot delegate again (no agent tool, no subagents), served on the
// queue <tq>/agent; root-only.
func TestAgentTool(t *testing.T) {
	m, err := scripted.Parse([]byte("name: t\ndefault: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	own := tools.NewRegistry()
	if err := own.Register(tools.Func("lookup", "Looks up.", func(*tools.Context, struct{}) (string, error) { return "", nil })); err != nil {
		t.Fatal(err)
	}
	critic := &agent.Agent{Name: "critic", Description: "Reviews a draft.", Model: m}
	root := &agent.Agent{Name: "root", Model: m, System: "Be kind.", Tools: own, MaxSteps: 7, AgentTool: true, Subagents: []*agent.Agent{critic}}

	reg, err := agent.Tools(root)
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := reg.Get("agent")
	if !ok {
		t.Fatal("no agent tool")
	}
	d := tool.ModelDescriptor()
	if want := agent.AgentToolDescription + " To send this task more input, call this tool again with its taskId; without taskId, each call starts a new task."; d.Description != want {
		t.Errorf("description %q", d.Description)
	}
	if tool.Kind() != tools.KindAgent || tool.Subagent == nil || tool.Subagent.Agent != "agent" || tool.Subagent.Description != "" {
		t.Errorf("agent tool: kind %s, subagent %+v", tool.Kind(), tool.Subagent)
	}

	type queue struct {
		Queue, Name, System string
		AgentTool           bool
		Subagents, MaxSteps int
		Tools               []string
	}
	var got []queue
	for _, q := range agent.Queues(root, "tq") {
		r, err := agent.Tools(q.Agent)
		if err != nil {
			t.Fatalf("%s: %v", q.TaskQueue, err)
		}
		var names []string
		for _, x := range r.List() {
			names = append(names, x.Name)
		}
		got = append(got, queue{q.TaskQueue, q.Agent.Name, q.Agent.System, q.Agent.AgentTool, len(q.Agent.Subagents), q.Agent.MaxSteps, names})
	}
	want := []queue{
		{"tq", "root", "Be kind.", true, 1, 7, []string{"agent", "critic", "lookup", "ask_question"}},
		// The copy: the same prompt, tools and settings, no way to delegate.
		{"tq/agent", "agent", "Be kind.", false, 0, 7, []string{"lookup", "ask_question"}},
		{"tq/critic", "critic", "", false, 0, 0, []string{"ask_question"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if root.Name != "root" || !root.AgentTool || len(root.Subagents) != 1 {
		t.Errorf("the copy changed the root: %+v", root)
	}

	for _, c := range []struct {
		name string
		a    *agent.Agent
		want string
	}{
		{"a subagent with it", &agent.Agent{Name: "root", Model: m, Subagents: []*agent.Agent{{Name: "w", Description: "d", Model: m, AgentTool: true}}}, "AgentTool is root-only"},
		{"a subagent named agent", &agent.Agent{Name: "root", Model: m, Subagents: []*agent.Agent{{Name: "agent", Description: "d", Model: m}}}, "reserved for eve's built-in agent tool"},
		{"a tool named agent", &agent.Agent{Name: "root", Model: m, AgentTool: true, Tools: func() *tools.Registry {
			r := tools.NewRegistry()
			_ = r.Register(tools.Func("agent", "Mine.", func(*tools.Context, struct{}) (string, error) { return "", nil }))
			return r
		}()}, `a tool is named "agent"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.Tools(c.a)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}

// A CodeOnly subagent (eve's tool: false) is no tool of its parent's: a
// tool of the parent may take its name (one that wraps it), and it still
// runs on its own queue for code to delegate to.
func TestCodeOnlySubagent(t *testing.T) {
	m, err := scripted.Parse([]byte("name: t\ndefault: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	wrap := tools.Func("reviewer", "Wraps the reviewer.", func(*tools.Context, struct{}) (string, error) { return "", nil })
	for _, c := range []struct {
		name      string
		sub       *agent.Agent
		own       []*tools.Tool
		wantTool  string // the kind of the tool named reviewer; "" none
		wantErr   string
		wantQueue bool
	}{
		{name: "hidden", sub: &agent.Agent{Name: "reviewer", Description: "Reviews.", Model: m, CodeOnly: true}, wantQueue: true},
		{name: "wrapped by a tool of its name", sub: &agent.Agent{Name: "reviewer", Description: "Reviews.", Model: m, CodeOnly: true},
			own: []*tools.Tool{wrap}, wantTool: string(tools.KindAuthored), wantQueue: true},
		{name: "visible", sub: &agent.Agent{Name: "reviewer", Description: "Reviews.", Model: m}, wantTool: string(tools.KindAgent), wantQueue: true},
		{name: "visible beside a tool of its name", sub: &agent.Agent{Name: "reviewer", Description: "Reviews.", Model: m},
			own: []*tools.Tool{wrap}, wantErr: "has that name"},
		{name: "hidden without a description", sub: &agent.Agent{Name: "reviewer", Model: m, CodeOnly: true}, wantErr: "Description is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			if err := reg.Register(c.own...); err != nil {
				t.Fatal(err)
			}
			root := &agent.Agent{Name: "root", Model: m, Tools: reg, Subagents: []*agent.Agent{c.sub}}
			got, err := agent.Tools(root)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kind := ""
			if tl, ok := got.Get("reviewer"); ok {
				kind = string(tl.Kind())
			}
			if kind != c.wantTool {
				t.Errorf("tool reviewer of kind %q, want %q", kind, c.wantTool)
			}
			qs := agent.Queues(root, "tq")
			if has := len(qs) == 2 && qs[1].TaskQueue == "tq/reviewer"; has != c.wantQueue {
				t.Errorf("queues %+v", qs)
			}
		})
	}
}
