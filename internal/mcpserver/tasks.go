package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/toolsapi"
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

// taskStore remembers which tasks each requestor created: a task is only
// visible to the session (and user) that created it.
type taskStore struct {
	mu      sync.Mutex
	owner   map[string]string    // task id -> owner key
	created map[string]time.Time // task id -> creation
	byOwner map[string][]string
}

func newTaskStore() *taskStore {
	return &taskStore{owner: map[string]string{}, created: map[string]time.Time{}, byOwner: map[string][]string{}}
}

func (t *taskStore) add(owner, id string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.owner[id]; ok && prev == owner {
		return t.created[id]
	}
	now := time.Now().UTC()
	t.owner[id], t.created[id] = owner, now
	t.byOwner[owner] = append(t.byOwner[owner], id)
	return now
}

func (t *taskStore) get(owner, id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owner[id] != owner {
		return time.Time{}, false
	}
	return t.created[id], true
}

func (t *taskStore) list(owner string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.byOwner[owner]...)
}

// taskMethods are the requests the Tasks layer answers itself.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true}

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

// handleTask answers one intercepted request for owner (session and user).
func (s *Server) handleTask(ctx context.Context, owner, user string, req *jsonrpc.Request) *jsonrpc.Response {
	res, err := s.task(ctx, owner, user, req)
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

func (s *Server) task(ctx context.Context, owner, user string, req *jsonrpc.Request) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
	}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid params: %v", err)
		}
	}
	if req.Method == "tasks/list" {
		ids := s.tasks.list(owner)
		tasks := make([]Task, 0, len(ids))
		for _, id := range ids {
			created, _ := s.tasks.get(owner, id)
			res, err := s.svc.Execution(ctx, id)
			if err != nil {
				continue // expired from Temporal's retention
			}
			tasks = append(tasks, s.taskOf(res, created))
		}
		sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].CreatedAt > tasks[j].CreatedAt })
		return map[string]any{"tasks": tasks}, nil
	}
	if req.Method == "tools/call" {
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
		created := s.tasks.add(owner, res.ID)
		return map[string]any{"task": s.taskOf(res, created)}, nil
	}
	created, ok := s.tasks.get(owner, p.TaskID)
	if p.TaskID == "" || !ok {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown task %q", p.TaskID)
	}
	switch req.Method {
	case "tasks/get":
		res, err := s.svc.Execution(ctx, p.TaskID)
		if err != nil {
			return nil, taskLookupError(p.TaskID, err)
		}
		return s.taskOf(res, created), nil
	case "tasks/cancel":
		res, err := s.svc.Execution(ctx, p.TaskID)
		if err != nil {
			return nil, taskLookupError(p.TaskID, err)
		}
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
	"list":     map[string]any{},
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
