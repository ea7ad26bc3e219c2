package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// A remote tool the server runs as a task (MCP Tasks, SEP-1686) is a call
// whose activity waits for the task: tools/call with a task answers at
// once with the task's id, recorded in the call's heartbeat (a
// checkpoint); then tasks/get is polled at the server's pollInterval until
// the task ends, and tasks/result gives the tool's result. A worker that
// dies meanwhile loses nothing: the call's next attempt reads the
// checkpoint and goes on polling the same task in the same MCP session.
// A task that asks for input (input_required) has its elicitation asked
// of the session's person, through tasks/result. Cancelling the turn
// cancels the task on the server (tasks/cancel): while it waits, the
// call asks Temporal every taskCancelCheck whether it was cancelled
// (watchCancel), so the server hears of it within about a second.

// Task support a remote tool declares (execution.taskSupport).
const (
	taskForbidden = "forbidden"
	taskOptional  = "optional"
	taskRequired  = "required"
)

// TaskHeartbeatTimeout is the heartbeat timeout of a call that waits for
// a remote task: a worker lost meanwhile is noticed after it, and the
// call goes on from another worker. Cancelling the turn reaches the call
// sooner: see taskCancelCheck.
const TaskHeartbeatTimeout = 20 * time.Second

// While a call waits for a remote task it heartbeats at once (past
// Temporal's throttling, which holds heartbeats for 80% of
// TaskHeartbeatTimeout) every taskCancelCheck, and every
// slowTaskCancelCheck once the task has run for slowTaskAfter: a
// cancelled turn ends the call, and tasks/cancel reaches the server,
// within about that long. Each check is a request to Temporal (on
// Temporal Cloud a billed action), hence the slower pace for a task
// that runs for hours.
const (
	taskCancelCheck     = time.Second
	slowTaskCancelCheck = 10 * time.Second
)

// taskRetry lets a call waiting for a task go on after a lost attempt;
// the call itself is never repeated unless the tool is idempotent (see
// callMCPTask).
var taskRetry = tools.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10}

// Poll intervals: the server's pollInterval, at least minTaskPoll, and at
// least slowTaskPoll once a task has run for slowTaskAfter, so a task
// that runs for hours costs a request every half minute.
const (
	minTaskPoll   = 500 * time.Millisecond
	slowTaskPoll  = 30 * time.Second
	slowTaskAfter = 5 * time.Minute
)

// taskCheckpoint is the heartbeat of a call that waits for a task. Its
// progress is what the call reports (the task's status message); MCPTask
// is where the task is.
type taskCheckpoint struct {
	protocol.Progress
	MCPTask *remoteTask `json:"mcpTask,omitempty"`
}

// remoteTask locates a task: the MCP session it lives in (a server's
// session id, not a credential: every request still carries the
// connection's token) and its id.
type remoteTask struct {
	Session string `json:"session,omitempty"`
	TaskID  string `json:"taskId,omitempty"`
	// Version is the revision whose tasks these are: modernVersion for
	// the stateless extension's, "" for 2025-11-25.
	Version string `json:"version,omitempty"`
}

// mcpTaskInfo is a task as tasks/get and CreateTaskResult describe it,
// in 2025-11-25 and in the 2026-07-28 extension (which names the poll
// interval pollIntervalMs, and carries the result, the error and the
// input a task waits for in tasks/get).
type mcpTaskInfo struct {
	TaskID         string                      `json:"taskId"`
	Status         string                      `json:"status"`
	StatusMessage  string                      `json:"statusMessage,omitempty"`
	PollInterval   int64                       `json:"pollInterval,omitempty"` // milliseconds
	PollIntervalMs int64                       `json:"pollIntervalMs,omitempty"`
	ResultType     string                      `json:"resultType,omitempty"`
	Result         json.RawMessage             `json:"result,omitempty"`
	Error          *rpcError                   `json:"error,omitempty"`
	InputRequests  map[string]taskInputRequest `json:"inputRequests,omitempty"`
}

// taskInputRequest is a request a 2026-07-28 task waits for an answer to.
type taskInputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (t mcpTaskInfo) poll() time.Duration {
	return time.Duration(max(t.PollInterval, t.PollIntervalMs)) * time.Millisecond
}

func (t mcpTaskInfo) terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// rpcCaller sends one request and returns its result: the raw HTTP
// client, or a stdio process's muxConn.
type rpcCaller interface {
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// errNotRepeated refuses a second attempt of a call that may have
// started a task the server never named to eve.
func errNotRepeated(remote string) error {
	return tools.NonRetryable(fmt.Errorf("call %s was interrupted before the server's task was recorded, and may have reached the server: "+
		"it is not repeated, since the tool is not idempotent (set Connection.Retry[%q] if a repeat is safe)", remote, remote))
}

// callMCPTask calls a remote tool as a task and waits for its end.
func (r *runtime) callMCPTask(ctx *tools.Context, c *Connection, remote string, idempotent, modern bool, input json.RawMessage) (any, error) {
	if c.MCP.URL == "" {
		return r.callStdioTask(ctx, c, remote, idempotent, input)
	}
	p, err := c.principal(ctx.Session)
	if err != nil {
		return nil, tools.NonRetryable(err)
	}
	rc := r.rpc(ctx, c, p)
	var cp taskCheckpoint
	switch {
	case ctx.LastHeartbeat(&cp) && cp.MCPTask != nil && cp.MCPTask.TaskID != "":
		rc.session, rc.modern = cp.MCPTask.Session, cp.MCPTask.Version == modernVersion
		// This attempt's heartbeats carry the checkpoint on, for the next.
		ctx.Checkpoint(cp)
	case ctx.Attempt > 1 && !idempotent:
		return nil, errNotRepeated(remote)
	default:
		// Nothing heartbeats before the task's id is recorded: the first
		// heartbeat of an attempt reaches Temporal at once (later ones are
		// throttled), and the id must be there before the call goes on.
		notified := rc.notified
		rc.notified = nil
		rc.modern = modern
		if !modern { // a stateless server has no session to open
			if _, err := rc.initialize(ctx, clientCapabilities()); err != nil {
				return nil, fmt.Errorf("connect to the MCP server: %w", err)
			}
		}
		task, result, err := r.startTask(ctx, rc, remote, input)
		if err != nil || task == nil { // task nil: the server answered at once
			rc.close(context.WithoutCancel(ctx))
			return startResult(remote, result, err)
		}
		cp = taskCheckpoint{MCPTask: &remoteTask{Session: rc.session, TaskID: task.TaskID}}
		if modern {
			cp.MCPTask.Version = modernVersion
		}
		cp.Message = task.StatusMessage
		ctx.Checkpoint(cp)
		rc.notified = notified
	}
	out, err := r.finishTask(ctx, rc, remote, cp)
	if !followedLater(ctx, err) {
		// The session is done with; one a later attempt follows the task
		// in stays open (closing it ends the task on some servers).
		rc.close(context.WithoutCancel(ctx))
	}
	return out, err
}

// followedLater reports whether a later attempt goes on following the
// task: the worker stops, or the attempt failed and may be retried.
func followedLater(ctx *tools.Context, err error) bool {
	if ctx.Err() != nil {
		return ctx.WorkerStopping()
	}
	return err != nil && !tools.IsNonRetryable(err)
}

// callStdioTask runs a task on a stdio server, on a process the call
// holds until the task ends. The process ends with its worker, and the
// task with it: a later attempt cannot follow it.
func (r *runtime) callStdioTask(ctx *tools.Context, c *Connection, remote string, idempotent bool, input json.RawMessage) (any, error) {
	var cp taskCheckpoint
	switch {
	case ctx.LastHeartbeat(&cp) && cp.MCPTask != nil && cp.MCPTask.TaskID != "":
		return nil, tools.NonRetryable(fmt.Errorf("task %s of %s ran in a stdio server process that ended with its worker: the task is lost "+
			"(over streamable HTTP a task outlives the worker)", cp.MCPTask.TaskID, remote))
	case ctx.Attempt > 1 && !idempotent:
		return nil, errNotRepeated(remote)
	}
	proc, release, err := r.stdioSession(ctx, c, ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	task, result, err := r.startTask(ctx, proc.mux, remote, input)
	if err != nil || task == nil {
		return startResult(remote, result, err)
	}
	cp = taskCheckpoint{MCPTask: &remoteTask{TaskID: task.TaskID}}
	cp.Message = task.StatusMessage
	ctx.Checkpoint(cp)
	return r.finishTask(ctx, proc.mux, remote, cp)
}

func startResult(remote string, result json.RawMessage, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return toolResult(remote, result)
}

// finishTask waits for the task's end; a cancelled call cancels it.
func (r *runtime) finishTask(ctx *tools.Context, rc rpcCaller, remote string, cp taskCheckpoint) (any, error) {
	stop := watchCancel(ctx)
	result, err := r.awaitTask(ctx, rc, cp)
	stop()
	if ctx.Err() != nil && ctx.WorkerStopping() {
		// The call goes on from another worker; the task goes on too.
		return nil, fmt.Errorf("the worker stops while task %s of %s runs: the call follows it from another worker", cp.MCPTask.TaskID, remote)
	}
	// A request cut short by the cancel may wrap it or not (a stream
	// read): the context says.
	if err != nil && errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, errQuestionCancelled) {
		// The turn was cancelled (or the call timed out): so is the task.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = rc.call(cctx, "tasks/cancel", map[string]any{"taskId": cp.MCPTask.TaskID})
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, tools.NonRetryable(err)
	}
	if err != nil {
		if errors.Is(err, errSessionGone) || errors.Is(err, errProcessEnded) {
			return nil, tools.NonRetryable(fmt.Errorf("the task of %s is lost: %w", remote, err))
		}
		return nil, err
	}
	return toolResult(remote, result)
}

// watchCancel heartbeats at once every taskCancelCheck (then
// slowTaskCancelCheck) until stop, so that the call's context ends
// within about that long of a cancelled turn, even while a request to
// the server (tasks/get, a long tasks/result) is in flight.
func watchCancel(ctx *tools.Context) (stop func()) {
	done := make(chan struct{})
	go func() {
		started := time.Now()
		for {
			every := taskCancelCheck
			if time.Since(started) > slowTaskAfter {
				every = slowTaskCancelCheck
			}
			t := time.NewTimer(every)
			select {
			case <-done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				ctx.HeartbeatNow()
			}
		}
	}()
	return func() { close(done) }
}

// startTask sends tools/call with a task. A server may answer with the
// result itself instead; then task is nil.
func (r *runtime) startTask(ctx *tools.Context, rc rpcCaller, remote string, input json.RawMessage) (*mcpTaskInfo, json.RawMessage, error) {
	params := map[string]any{"name": remote, "arguments": input}
	if !isModern(rc) {
		// 2025-11-25 asks for a task; the extension runs one when the
		// tool declares it.
		params["task"] = map[string]any{"ttl": time.Until(deadlineOf(ctx)).Milliseconds()}
		params["_meta"] = map[string]any{"progressToken": ctx.IdempotencyKey}
	}
	res, err := rc.call(ctx, "tools/call", params)
	if err != nil {
		var re *rpcError
		if errors.As(err, &re) {
			return nil, nil, remoteError("call %s: the server refused it: %v", remote, re)
		}
		return nil, nil, fmt.Errorf("call %s: %w", remote, err)
	}
	var created struct {
		Task *mcpTaskInfo `json:"task"`
		mcpTaskInfo
	}
	if err := json.Unmarshal(res, &created); err != nil {
		return nil, nil, fmt.Errorf("call %s: %w", remote, err)
	}
	switch {
	case created.Task != nil && created.Task.TaskID != "":
		return created.Task, nil, nil
	case created.ResultType == "task" && created.TaskID != "": // the extension's
		return &created.mcpTaskInfo, nil, nil
	}
	return nil, res, nil
}

// awaitTask polls the task until it ends and returns tasks/result's
// answer. A task waiting for input is served through tasks/result, whose
// stream carries the server's elicitation.
func (r *runtime) awaitTask(ctx *tools.Context, rc rpcCaller, cp taskCheckpoint) (json.RawMessage, error) {
	id := cp.MCPTask.TaskID
	started := time.Now()
	answered := map[string]bool{}
	for {
		res, err := rc.call(ctx, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			return nil, fmt.Errorf("follow task %s: %w", id, err)
		}
		var t mcpTaskInfo
		if err := json.Unmarshal(res, &t); err != nil {
			return nil, fmt.Errorf("follow task %s: %w", id, err)
		}
		if t.StatusMessage != cp.Message {
			cp.Message = t.StatusMessage
			ctx.Checkpoint(cp)
		} else {
			ctx.Heartbeat()
		}
		switch {
		case t.Status == "cancelled":
			return nil, remoteError("the server cancelled task %s: %s", id, t.StatusMessage)
		case isModern(rc) && t.Status == "completed":
			return t.Result, nil
		case isModern(rc) && t.Status == "failed":
			msg := t.StatusMessage
			if t.Error != nil {
				msg = t.Error.Message
			}
			return nil, remoteError("task %s failed: %s", id, msg)
		case isModern(rc) && t.Status == "input_required":
			if err := answerTaskInput(ctx, rc.(*rpcClient), id, t.InputRequests, answered); err != nil {
				return nil, err
			}
		case t.terminal() || t.Status == "input_required":
			return r.taskResult(ctx, rc, id)
		}
		wait := max(t.poll(), minTaskPoll)
		if time.Since(started) > slowTaskAfter {
			wait = max(wait, slowTaskPoll)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func isModern(rc rpcCaller) bool {
	c, ok := rc.(*rpcClient)
	return ok && c.modern
}

// answerTaskInput asks the session's person what a 2026-07-28 task waits
// for (elicitations) and sends the answers with tasks/update; a request
// answered already is not asked again while the server catches up.
func answerTaskInput(ctx *tools.Context, rc *rpcClient, id string, reqs map[string]taskInputRequest, answered map[string]bool) error {
	responses := map[string]any{}
	for rid, req := range reqs {
		if answered[rid] {
			continue
		}
		if req.Method != "elicitation/create" {
			return remoteError("task %s waits for %s, which eve does not answer", id, req.Method)
		}
		res, err := rc.serve(ctx, req.Method, req.Params)
		if err != nil {
			return err
		}
		responses[rid] = res
	}
	if len(responses) == 0 {
		return nil
	}
	if _, err := rc.call(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": responses}); err != nil {
		return fmt.Errorf("answer task %s: %w", id, err)
	}
	for rid := range responses {
		answered[rid] = true
	}
	return nil
}

// taskResult reads tasks/result, which waits for the task's end; it
// heartbeats meanwhile, so the call stays alive (and learns of a
// cancelled turn) however long a person takes to answer.
func (r *runtime) taskResult(ctx *tools.Context, rc rpcCaller, id string) (json.RawMessage, error) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(TaskHeartbeatTimeout / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				ctx.Heartbeat()
			}
		}
	}()
	res, err := rc.call(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil {
		var re *rpcError
		if errors.As(err, &re) {
			return nil, remoteError("task %s failed: %v", id, re)
		}
		return nil, fmt.Errorf("the result of task %s: %w", id, err)
	}
	return res, nil
}

// toolResult is a CallToolResult as the call's output, or the remote
// error the model reads.
func toolResult(remote string, raw json.RawMessage) (any, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decode the result of %s: %w", remote, err)
	}
	if res.IsError {
		return nil, remoteError("the server answered with an error: %s", textOf(res.Content))
	}
	b, err := json.Marshal(&res)
	if err != nil {
		return nil, fmt.Errorf("encode the result of %s: %w", remote, err)
	}
	return json.RawMessage(b), nil
}

// deadlineOf is when the call's activity times out (a day from now
// outside one, for the ttl a server is asked to keep the task).
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(tools.DefaultDeadline)
}

// clientCapabilities is what eve declares to a server over the raw
// client, as callCapabilities does over the go-sdk's.
func clientCapabilities() map[string]any {
	return map[string]any{"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}}}
}

// rpc is a raw client of c for one call or discovery, with p's
// credential. Within a call, the server's elicitations ask the session's
// person and its progress keeps the call alive.
func (r *runtime) rpc(ctx *tools.Context, c *Connection, p *auth.Principal) *rpcClient {
	rc := &rpcClient{url: c.MCP.URL, hc: r.httpClient(c, p)}
	if ctx == nil {
		return rc
	}
	rc.notified = func(method string, _ json.RawMessage) {
		if method == "notifications/progress" || method == "notifications/tasks/status" {
			ctx.Heartbeat()
		}
	}
	rc.serve = func(_ context.Context, method string, params json.RawMessage) (any, error) {
		if method != "elicitation/create" {
			return nil, &rpcError{Code: -32601, Message: "eve does not answer " + method}
		}
		var ep mcp.ElicitParams
		if err := json.Unmarshal(params, &ep); err != nil {
			return nil, &rpcError{Code: -32602, Message: "elicitation/create: " + err.Error()}
		}
		res, err := elicit(ctx, c, &mcp.ElicitRequest{Params: &ep})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	return rc
}
