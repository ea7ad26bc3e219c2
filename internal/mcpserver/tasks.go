package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// CodeTaskStoreFull is the JSON-RPC error code of a task-augmented
// tools/call refused because the server holds Options.MaxTasks tasks that
// are all still working (an implementation-defined server error).
const CodeTaskStoreFull = -32000

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
// visible to the session (and user) that created it. It holds at most max
// tasks: when full, it forgets finished tasks first (oldest first), and
// refuses a new task while every task it holds is still working. A
// session's tasks go when the session ends (HTTP: expiry or DELETE; stdio:
// the connection closes).
type taskStore struct {
	mu       sync.Mutex
	max      int
	tasks    map[string]*taskEntry // by task id
	byOwner  map[string][]string
	reserved int
}

type taskEntry struct {
	owner    string
	created  time.Time
	finished bool // a terminal status was seen
}

// errTaskStoreFull is the JSON-RPC error of a task-augmented call the
// store has no room for. Nothing ran.
func errTaskStoreFull(max int) error {
	return rpcError(CodeTaskStoreFull, "too many tasks: this server holds at most %d and all are working; wait for some to finish (tasks/result) or cancel them (tasks/cancel), then retry", max)
}

func newTaskStore(max int) *taskStore {
	return &taskStore{max: max, tasks: map[string]*taskEntry{}, byOwner: map[string][]string{}}
}

// reserve makes room for one new task before its execution starts: it
// evicts the oldest finished task when full, and fails when none is
// finished. finished, when not nil, is asked (without the lock) about the
// oldest tasks not yet seen finished — a client may never have polled
// them — at most a few per call. Call release or add afterwards.
func (t *taskStore) reserve(finished func(id string) bool) error {
	const refresh = 16
	var candidates []string
	for round := 0; ; round++ {
		t.mu.Lock()
		if len(t.tasks)+t.reserved < t.max {
			t.reserved++
			t.mu.Unlock()
			return nil
		}
		if id := t.oldest(func(e *taskEntry) bool { return e.finished }); id != "" {
			t.remove(id)
			t.reserved++
			t.mu.Unlock()
			return nil
		}
		if round > 0 || finished == nil {
			t.mu.Unlock()
			return errTaskStoreFull(t.max)
		}
		candidates = t.byAge()
		if len(candidates) > refresh {
			candidates = candidates[:refresh]
		}
		t.mu.Unlock()
		for _, id := range candidates {
			if finished(id) {
				t.observe(id, true)
			}
		}
	}
}

func (t *taskStore) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved > 0 {
		t.reserved--
	}
}

// add records a task after reserve (a repeat of the same task by the same
// owner — an idempotent execution joined again — keeps its first record).
func (t *taskStore) add(owner, id string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved > 0 {
		t.reserved--
	}
	if e, ok := t.tasks[id]; ok && e.owner == owner {
		return e.created
	} else if ok {
		t.remove(id)
	}
	now := time.Now().UTC()
	t.tasks[id] = &taskEntry{owner: owner, created: now}
	t.byOwner[owner] = append(t.byOwner[owner], id)
	return now
}

// observe notes a task's status as seen by the layer.
func (t *taskStore) observe(id string, finished bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.tasks[id]; e != nil && finished {
		e.finished = true
	}
}

func (t *taskStore) get(owner, id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.tasks[id]
	if e == nil || e.owner != owner {
		return time.Time{}, false
	}
	return e.created, true
}

func (t *taskStore) list(owner string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.byOwner[owner]...)
}

func (t *taskStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.tasks)
}

// dropOwners forgets the tasks of every owner key with this prefix.
func (t *taskStore) dropOwners(prefix string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for owner, ids := range t.byOwner {
		if strings.HasPrefix(owner, prefix) {
			for _, id := range ids {
				delete(t.tasks, id)
			}
			delete(t.byOwner, owner)
		}
	}
}

// remove forgets one task; the caller holds the lock.
func (t *taskStore) remove(id string) {
	e := t.tasks[id]
	if e == nil {
		return
	}
	delete(t.tasks, id)
	ids := t.byOwner[e.owner]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(t.byOwner, e.owner)
	} else {
		t.byOwner[e.owner] = ids
	}
}

// oldest returns the oldest task matching ok; the caller holds the lock.
func (t *taskStore) oldest(ok func(*taskEntry) bool) string {
	var id string
	var at time.Time
	for k, e := range t.tasks {
		if ok(e) && (id == "" || e.created.Before(at) || e.created.Equal(at) && k < id) {
			id, at = k, e.created
		}
	}
	return id
}

// byAge lists the tasks not seen finished, oldest first; the caller holds the lock.
func (t *taskStore) byAge() []string {
	ids := make([]string, 0, len(t.tasks))
	for k, e := range t.tasks {
		if !e.finished {
			ids = append(ids, k)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := t.tasks[ids[i]], t.tasks[ids[j]]
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created)
		}
		return ids[i] < ids[j]
	})
	return ids
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

// handleTask answers one intercepted request for owner (session and
// user); negotiated says whether the client announced Tasks.
func (s *Server) handleTask(ctx context.Context, owner, user string, negotiated bool, req *jsonrpc.Request) *jsonrpc.Response {
	res, err := s.task(ctx, owner, user, negotiated, req)
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

func (s *Server) task(ctx context.Context, owner, user string, negotiated bool, req *jsonrpc.Request) (any, error) {
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
		if err := s.tasks.reserve(func(id string) bool {
			res, err := s.svc.Execution(ctx, id)
			if err != nil {
				var apiErr *toolsapi.Error
				return errors.As(err, &apiErr) && apiErr.Status == 404 // gone from Temporal
			}
			return res.Status.Terminal()
		}); err != nil {
			return nil, err
		}
		res, err := s.svc.Execute(ctx, e.canonical, catalog.ExecuteToolOptions{UserID: user, Input: p.Arguments, Mode: catalog.ModeAsync})
		if err != nil {
			s.tasks.release()
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
		s.tasks.observe(p.TaskID, res.Status.Terminal())
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
	s.tasks.observe(res.ID, res.Status.Terminal())
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
