package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Info describes the agent behind the server for GET /eve/v1/info. The API
// server does not run the agent (workers do), so this is what its operator
// says about it; AgentInfo builds it from an agent definition.
type Info struct {
	AgentName   string
	Description string
	// ModelID and ModelProvider describe the model (e.g. "demo", "scripted").
	ModelID       string
	ModelProvider string
	// Production selects mode "production" (default "development").
	Production bool
	Tools      []ToolInfo
	// Subagents are the agent's subagents at any depth, each before its
	// own (eve's subagents.local: one flat list, each naming its parent).
	Subagents []SubagentInfo
}

// SubagentInfo is one subagent of Info.
type SubagentInfo struct {
	Name        string
	Description string
	// Path is where the subagent sits from the root agent:
	// "subagents/<name>", nested as "subagents/<a>/subagents/<b>" (eve's
	// directory layout), and ParentPath its parent's ("" for the root).
	Path, ParentPath string
	// Tools counts the subagent's own tools, Instructions its system
	// prompts (0 or 1).
	Tools, Instructions int
}

// ToolInfo is one tool of Info.
type ToolInfo struct {
	Name             string
	Description      string
	InputSchema      json.RawMessage
	OutputSchema     json.RawMessage
	HasExecute       bool
	RequiresApproval bool
}

// AgentInfo describes an agent definition.
func AgentInfo(a *agent.Agent) Info {
	info := Info{AgentName: a.Name}
	if a.Model != nil {
		info.ModelID = a.Model.ID()
	}
	if a.Tools != nil {
		for _, t := range a.Tools.List() {
			info.Tools = append(info.Tools, ToolInfo{
				Name: t.Name, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
				HasExecute:       t.Execute != nil,
				RequiresApproval: t.Approval.Kind() != approval.KindNever,
			})
		}
	}
	info.Subagents = subagentInfos(a, "")
	return info
}

// subagentInfos lists a's subagents, each followed by its own.
func subagentInfos(a *agent.Agent, parent string) []SubagentInfo {
	var out []SubagentInfo
	for _, sub := range a.Subagents {
		if sub == nil {
			continue
		}
		path := "subagents/" + sub.Name
		if parent != "" {
			path = parent + "/" + path
		}
		si := SubagentInfo{Name: sub.Name, Description: sub.Description, Path: path, ParentPath: parent}
		if sub.Tools != nil {
			si.Tools = len(sub.Tools.List())
		}
		if sub.System != "" {
			si.Instructions = 1
		}
		out = append(out, si)
		out = append(out, subagentInfos(sub, path)...)
	}
	return out
}

// health: GET /eve/v1/health. 200 {ok, status:"ready", workflowId} when
// Temporal answers; 503 otherwise (eve's client accepts only the 200 shape).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if _, err := s.opts.Sessions.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "Temporal is not answering: "+err.Error())
		return
	}
	httpjson.Write(w, http.StatusOK, protocol.Health{OK: true, Status: "ready", WorkflowID: signals.SessionWorkflow})
}

// info: GET /eve/v1/info, AgentInfoResultSchema version 5 (strict).
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, s.infoBody())
}

type jsonObj = map[string]any

func (s *Server) infoBody() jsonObj {
	in := s.opts.Info
	name := in.AgentName
	if name == "" {
		name = "agent"
	}
	owner := jsonObj{"kind": "application"}
	moduleSource := func(id, path string) jsonObj {
		return jsonObj{
			"binding": jsonObj{
				"backing": jsonObj{
					"kind": "programmatic", "moduleId": "go:" + path,
					"registryId": "eve-temporal", "revision": signals.Version,
				},
				"logicalPath": path,
				"owner":       owner,
			},
			"logicalPath": path,
			"owner":       owner,
			"sourceId":    id,
			"sourceKind":  "module",
		}
	}
	provider := in.ModelProvider
	if provider == "" {
		provider = "unknown"
	}
	agentObj := moduleSource("agent:"+name, "agent/"+name)
	agentObj = jsonObj{
		"agentRoot": ".",
		"appRoot":   ".",
		"config":    agentObj,
		"model":     jsonObj{"id": in.ModelID, "routing": jsonObj{"kind": "external", "provider": provider}},
		"name":      name,
		"nodeId":    name,
	}
	if in.Description != "" {
		agentObj["description"] = in.Description
	}
	tools := []jsonObj{}
	for _, t := range in.Tools {
		tool := moduleSource("tool:"+t.Name, "tools/"+t.Name)
		tool["name"] = t.Name
		tool["description"] = t.Description
		tool["hasAuth"] = false
		tool["hasExecute"] = t.HasExecute
		tool["hasModelOutputProjection"] = false
		tool["hasOutputSchema"] = len(t.OutputSchema) > 0
		tool["inputSchema"] = rawOrEmpty(t.InputSchema)
		if len(t.OutputSchema) > 0 {
			tool["outputSchema"] = json.RawMessage(t.OutputSchema)
		}
		tool["requiresApproval"] = t.RequiresApproval
		tools = append(tools, tool)
	}
	subagents := []jsonObj{}
	for _, sa := range in.Subagents {
		subagents = append(subagents, subagentEntry(sa, moduleSource))
	}
	sandbox := moduleSource("sandbox:none", "sandbox")
	sandbox["revisionHash"] = signals.Version
	mode := "development"
	if in.Production {
		mode = "production"
	}
	return jsonObj{
		"agent":         agentObj,
		"capabilities":  jsonObj{"devRoutes": false},
		"channels":      jsonObj{"routes": []any{}, "shadowed": []any{}},
		"composition":   jsonObj{"disabled": []any{}, "shadowed": []any{}},
		"connections":   []any{},
		"diagnostics":   jsonObj{"discoveryErrors": 0, "discoveryWarnings": 0},
		"hooks":         []any{},
		"instructions":  jsonObj{"dynamic": []any{}, "static": []any{}},
		"kernelEffects": []any{},
		"kind":          "eve-agent-info",
		"memories":      []any{},
		"mode":          mode,
		"remoteAgents":  jsonObj{"entries": []any{}, "total": 0},
		"sandbox":       sandbox,
		"schedules":     []any{},
		"skills":        jsonObj{"dynamic": []any{}, "static": []any{}},
		"subagents":     jsonObj{"local": subagents, "total": len(subagents)},
		"tools":         jsonObj{"dynamic": []any{}, "static": tools},
		"version":       5,
		"workspace":     jsonObj{"resourceRoot": nil, "rootEntries": []any{}},
	}
}

// rootNodeID is eve's node id of the root agent (ROOT_COMPILED_AGENT_NODE_ID).
const rootNodeID = "__root__"

// nodeID is eve's node id of the subagent at path: its logical path under
// the root, each level after the first joined with "::"
// (createCompiledSubagentNodeId).
func nodeID(path string) string {
	if path == "" {
		return rootNodeID
	}
	return strings.ReplaceAll(path, "/subagents/", "::subagents/")
}

// subagentEntry is one entry of subagents.local, eve's shape: the subagent's
// source (its logical path relative to its parent's root, as eve's
// subagents/<name> directory), name, description, node ids, paths and the
// summary of what it declares.
func subagentEntry(sa SubagentInfo, moduleSource func(id, path string) jsonObj) jsonObj {
	logical := "subagents/" + sa.Name
	e := moduleSource(logical, logical)
	e["name"] = sa.Name
	if sa.Description != "" {
		e["description"] = sa.Description
	}
	e["entryPath"] = sa.Path
	e["rootPath"] = sa.Path
	e["nodeId"] = nodeID(sa.Path)
	e["parentNodeId"] = nodeID(sa.ParentPath)
	e["summary"] = jsonObj{"channels": 0, "connections": 0, "hooks": 0, "instructions": sa.Instructions,
		"memories": 0, "schedules": 0, "skills": 0, "tools": sa.Tools}
	return e
}

func rawOrEmpty(raw json.RawMessage) any {
	if len(raw) == 0 {
		return jsonObj{"type": "object", "properties": jsonObj{}}
	}
	return raw
}
