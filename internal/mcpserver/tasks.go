package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/executions"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/signals"
)

// MCP Tasks (2025-11-25) statuses.
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// relatedTaskMeta links a tasks/result answer to its task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// Task is MCP's task object; its id is the execution's.
type Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL and PollInterval are milliseconds.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// taskMethods are the requests the Tasks layer answers itself.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true}

// ownedTask reads the execution behind a task for user: a task is the
// execution of the user that created it, readable from any session and any
// eve instance (Temporal holds it); another user's is unknown.
func (s *Server) ownedTask(ctx context.Context, user, id string) (executions.State, signals.ExecutionOutput, error) {
	st, out, err := s.svc.Describe(ctx, id)
	if err != nil {
		return st, out, taskLookupError(id, err)
	}
	if !executions.SamePrincipal(st.Owner(), s.svc.UserOf(user)) {
		return executions.State{}, signals.ExecutionOutput{}, rpcError(jsonrpc.CodeInvalidParams, "unknown task %q", id)
	}
	return st, out, nil
}

// intercepts reports whether the Tasks layer answers req: tasks/* and
// task-augmented tools/call.
func intercepts(req *jsonrpc.Request) bool {
	if !req.IsCall() {
		return false
	}
	if taskMethods[req.Method] {
		return true
	}
	if req.Method != "tools/call" {
		return false
	}
	var p struct {
		Task json.RawMessage `json:"task"`
	}
	return json.Unmarshal(req.Params, &p) == nil && len(p.Task) > 0 && string(p.Task) != "null"
}

func rpcError(code int64, format string, args ...any) error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// handleTask answers one intercepted request for owner (session and
// user); negotiated says whether the client announced Tasks.
func (s *Server) handleTask(ctx context.Context, user string, negotiated bool, req *jsonrpc.Request) *jsonrpc.Response {
	res, err := s.task(ctx, user, negotiated, req)
	resp := &jsonrpc.Response{ID: req.ID}
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp.Error = we
		return resp
	}
	b, err := json.Marshal(res)
	if err != nil {
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		return resp
	}
	resp.Result = b
	return resp
}

func (s *Server) task(ctx context.Context, user string, negotiated bool, req *jsonrpc.Request) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Task      json.RawMessage `json:"task"`
	}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid params: %v", err)
		}
	}
	if req.Method == "tasks/list" {
		return nil, rpcError(jsonrpc.CodeMethodNotFound, "tasks/list is not offered: every task is a durable execution, found by its id from any eve instance; eve keeps no per-process list of tasks")
	}
	if req.Method == "tools/call" {
		if err := checkTaskParam(p.Task); err != nil {
			return nil, err
		}
		if !negotiated {
			return nil, errTasksNotNegotiated()
		}
		e := s.entries[p.Name]
		if e == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown tool %q", p.Name)
		}
		res, err := s.svc.Execute(ctx, e.canonical, catalog.ExecuteToolOptions{UserID: user, Input: p.Arguments, Mode: catalog.ModeAsync})
		if err != nil {
			var apiErr *toolsapi.Error
			if errors.As(err, &apiErr) && apiErr.Status < 500 {
				return nil, rpcError(jsonrpc.CodeInvalidParams, "%s", apiErr.Message)
			}
			return nil, err
		}
		st, _, err := s.ownedTask(ctx, user, res.ID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"task": s.taskOf(res, st.StartedAt)}, nil
	}
	if p.TaskID == "" {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown task %q", p.TaskID)
	}
	st, _, err := s.ownedTask(ctx, user, p.TaskID)
	if err != nil {
		return nil, err
	}
	created := st.StartedAt
	switch req.Method {
	case "tasks/get":
		return s.taskOf(st.Result, created), nil
	case "tasks/cancel":
		res := st.Result
		if res.Status.Terminal() {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "cannot cancel task %s: it is already %s", p.TaskID, taskStatus(res.Status))
		}
		if res, err = s.svc.Cancel(ctx, p.TaskID); err != nil {
			return nil, err
		}
		t := s.taskOf(res, created)
		if !res.Status.Terminal() {
			t.Status, t.StatusMessage = TaskCancelled, "cancellation requested"
		}
		return t, nil
	default: // tasks/result: wait for the end, answer the call's result
		res, err := s.svc.Wait(ctx, p.TaskID, 0)
		if err != nil {
			return nil, taskLookupError(p.TaskID, err)
		}
		out, err := callResult(res, nil)
		if err != nil {
			return nil, err
		}
		out.Meta = mcp.Meta{relatedTaskMeta: map[string]string{"taskId": p.TaskID}}
		return out, nil
	}
}

// checkTaskParam refuses a params.task that is not a task's metadata: an
// object whose ttl, if set, is a number of milliseconds (MCP 2025-11-25
// TaskMetadata).
func checkTaskParam(raw json.RawMessage) error {
	var tm struct {
		TTL *float64 `json:"ttl"`
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &tm) != nil || (tm.TTL != nil && *tm.TTL < 0) {
		return rpcError(jsonrpc.CodeInvalidParams, "invalid params: task must be an object, {} or {\"ttl\": <milliseconds>}, not %s", truncate(string(t), 64))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errTasksNotNegotiated refuses a task-augmented tools/call in a session
// whose client did not announce Tasks.
//
// The spec (MCP 2025-11-25, Tasks, "Capabilities" and "Behavior
// Requirements") ties task augmentation of tools/call to the receiver's
// capability: eve declares tasks.requests.tools.call in every initialize
// result, and a client's own capabilities.tasks covers only the requests a
// server sends it. Its rule to process a request normally, ignoring its
// task, binds receivers that do not declare the capability, so it does not
// apply; the spec leaves receivers in control of which requests run as
// tasks. eve offers tasks (and lists async tools) only to clients that
// announce Tasks, so it refuses here rather than run the call plainly: a
// refusal starts nothing. -32601 is the code the spec gives a task
// augmentation a tool does not support.
func errTasksNotNegotiated() error {
	return rpcError(jsonrpc.CodeMethodNotFound, "task-augmented tools/call is offered only to clients that announce MCP Tasks: send capabilities.tasks (or capabilities.experimental.tasks, or the extension %s) in initialize, or call the tool without params.task", TasksExtension)
}

// initAnnouncesTasks reports whether initialize params announce Tasks.
func initAnnouncesTasks(params json.RawMessage) bool {
	var p struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	return json.Unmarshal(params, &p) == nil && capsHaveTasks(p.Capabilities)
}

// requestAnnouncesTasks reports whether a request of the sessionless
// protocol (2026-07-28) announces Tasks in its own client capabilities.
func requestAnnouncesTasks(params json.RawMessage) bool {
	var p struct {
		Meta struct {
			Caps map[string]any `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && capsHaveTasks(p.Meta.Caps)
}

func taskLookupError(id string, err error) error {
	var apiErr *toolsapi.Error
	if errors.As(err, &apiErr) && apiErr.Status == 404 {
		return rpcError(jsonrpc.CodeInvalidParams, "unknown task %q", id)
	}
	return err
}

func taskStatus(st catalog.ExecutionStatus) string {
	switch st {
	case catalog.StatusSucceeded:
		return TaskCompleted
	case catalog.StatusFailed, catalog.StatusTimedOut:
		return TaskFailed
	case catalog.StatusCanceled:
		return TaskCancelled
	}
	return TaskWorking
}

func (s *Server) taskOf(res catalog.ExecutionResult, created time.Time) Task {
	ttl := s.opts.TaskTTL.Milliseconds()
	t := Task{
		TaskID:        res.ID,
		Status:        taskStatus(res.Status),
		CreatedAt:     created.Format(time.RFC3339Nano),
		LastUpdatedAt: time.Now().UTC().Format(time.RFC3339Nano),
		TTL:           &ttl,
		PollInterval:  s.opts.PollInterval.Milliseconds(),
	}
	if res.Error != nil {
		t.StatusMessage = res.Error.Error()
	} else if !res.Status.Terminal() {
		t.StatusMessage = string(res.Status)
	}
	return t
}

// tasksCapability is what the server adds to its capabilities.
var tasksCapability = map[string]any{
	"cancel":   map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// patchInitResult adds the tasks capability to an initialize or
// server/discover result.
func patchInitResult(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var caps map[string]any
	if c, ok := m["capabilities"]; ok && json.Unmarshal(c, &caps) != nil {
		return raw
	}
	if caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = tasksCapability
	b, err := json.Marshal(caps)
	if err != nil {
		return raw
	}
	m["capabilities"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// normalizeInit carries a standard capabilities.tasks of an initialize
// request over into capabilities.experimental.tasks, which the Go SDK
// keeps (it drops fields it does not know), so tools/list sees it.
func normalizeInit(params json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return params
	}
	var caps map[string]any
	if json.Unmarshal(m["capabilities"], &caps) != nil || caps == nil || caps["tasks"] == nil {
		return params
	}
	ex, _ := caps["experimental"].(map[string]any)
	if ex == nil {
		ex = map[string]any{}
	}
	if ex["tasks"] == nil {
		ex["tasks"] = caps["tasks"]
	}
	caps["experimental"] = ex
	b, err := json.Marshal(caps)
	if err != nil {
		return params
	}
	m["capabilities"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return out
}

// isInitMethod names requests whose result carries server capabilities.
func isInitMethod(method string) bool { return method == "initialize" || method == "server/discover" }
