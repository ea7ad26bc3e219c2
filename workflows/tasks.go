package workflows

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Tasks (eve 0.80's tools/tasks.md, changeTaskCalls): a call of a task tool
// (tools.AsTask) returns a receipt at once and its work runs on in a
// coroutine of the turn workflow that the step loop does not await: the
// tool's activity (or delegated job) is scheduled by the turn, so Temporal
// runs it exactly once and a worker crash only moves it to another worker.
// A settled task's result waits in taskResults and reaches the model at
// the next step boundary, as one task.result message of <task_result>
// blocks. No turn ends while a task works: a model that ends early parks
// the turn (turn.waiting{on:"tasks"}) until a result or its caller's
// steering message arrives, then is called again in the same turn.

// taskGrace is how long a turn that ends with working tasks (cancelled or
// failed) waits for their work to unwind, as eve does.
const taskGrace = 30 * time.Second

// taskState is one task of the turn.
type taskState struct {
	protocol.TaskInfo
	cancel workflow.CancelFunc
	// done: its work returned (settled, or unwound after a cancel).
	done bool
}

// taskResult is a settled task's result the model has not read yet.
type taskResult struct {
	id, tool, status, body string
}

// taskIDAlphabet is eve's (no i, l, o, u).
const taskIDAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// taskID is the tool's name and six characters derived from the session,
// turn and call: a replay, or a retried workflow task, makes the same id.
func taskID(sessionID, turnID, callID, tool string, attempt int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%d", sessionID, turnID, callID, attempt)))
	b := make([]byte, 6)
	for i := range b {
		b[i] = taskIDAlphabet[sum[i]%32]
	}
	return tool + "-" + string(b)
}

// newTaskID is the call's task id, unique in the turn.
func (t *turn) newTaskID(c *pendingCall) string {
	for attempt := 0; ; attempt++ {
		id := taskID(t.in.SessionID, t.in.TurnID, c.plan.Call.ID, c.plan.Call.Name, attempt)
		if t.taskByID(id) == nil {
			return id
		}
	}
}

func (t *turn) taskByID(id string) *taskState {
	for _, ts := range t.taskList {
		if ts.TaskID == id {
			return ts
		}
	}
	return nil
}

// workingTasks are the ids of the tasks that work, in the order they started.
func (t *turn) workingTasks() []string {
	var ids []string
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking {
			ids = append(ids, ts.TaskID)
		}
	}
	return ids
}

// registerTaskQuery lists the turn's tasks (signals.QueryTurnTasks).
func (t *turn) registerTaskQuery(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, signals.QueryTurnTasks, func() ([]protocol.TaskInfo, error) {
		out := make([]protocol.TaskInfo, len(t.taskList))
		for i, ts := range t.taskList {
			out[i] = ts.TaskInfo
		}
		return out, nil
	})
}

// tasksOn decides, at the turn's first task call or task-tool call,
// whether the turn runs tasks (changeTaskCalls); a turn without either
// records no marker.
func (t *turn) tasksOn(ctx workflow.Context) bool {
	if !t.tasksDecided {
		t.tasksDecided = true
		t.taskCalls = workflow.GetVersion(ctx, changeTaskCalls, workflow.DefaultVersion, 1) >= 1
	}
	return t.taskCalls
}

// isTask reports whether the call runs as a task.
func (t *turn) isTask(c *pendingCall) bool { return t.taskCalls && c.plan.Task != nil }

// startTask starts the work of a task call the gate and its person let
// through and sets the call's result to the receipt; its work goes on in
// a coroutine of its own.
func (t *turn) startTask(ctx workflow.Context, c *pendingCall) {
	if working := t.workingTasks(); len(working) >= tools.MaxWorkingTasks {
		c.out = taskRefusal(protocol.CodeTooManyTasks, fmt.Sprintf("%d tasks are already working (%s). Wait with %s or stop one with %s, then try again.",
			tools.MaxWorkingTasks, strings.Join(working, ", "), tools.TaskWaitName, tools.TaskCancelName))
		return
	}
	ts := &taskState{TaskInfo: protocol.TaskInfo{
		TaskID: t.newTaskID(c), CallID: c.plan.Call.ID, TurnID: t.in.TurnID,
		Name: c.plan.Call.Name, Kind: "tool", Status: protocol.TaskWorking,
	}}
	tctx, cancel := workflow.WithCancel(ctx)
	ts.cancel = cancel
	t.taskList = append(t.taskList, ts)
	t.log.emit(ctx, protocol.TaskStarted, protocol.TaskStartedData{CallID: ts.CallID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: ts.TurnID})
	c.out = work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(fmt.Sprintf("Started task %s. Its result will arrive in a <task_result> message.", ts.TaskID))}

	run := *c // the task's own call: c keeps the receipt
	workflow.Go(tctx, func(ctx workflow.Context) {
		out := t.runTask(ctx, &run, ts)
		ts.done = true
		if ts.Status != protocol.TaskWorking || ctx.Err() != nil {
			return // cancelled: whoever cancelled it settled it; it never reports back
		}
		t.settleTask(ctx, ts, out)
	})
}

// runTask runs a task's work to its outcome, bounded by its deadline.
func (t *turn) runTask(ctx workflow.Context, c *pendingCall, ts *taskState) work.ToolOutcome {
	d := c.plan.Task.Deadline
	if d <= 0 {
		t.execute(ctx, c)
		return c.out
	}
	ectx, cancelWork := workflow.WithCancel(ctx)
	done := false
	workflow.Go(ectx, func(ctx workflow.Context) {
		t.execute(ctx, c)
		done = true
	})
	ok, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return done })
	switch {
	case ok:
		return c.out
	case err != nil:
		return cancelledOutcome(c.tool)
	}
	cancelWork()
	return work.FailedOutcome(protocol.CodeTaskDeadlineExceeded,
		fmt.Sprintf("task %s passed its deadline (%s) and was stopped; it has no result. Start it again if it is still needed.", ts.TaskID, d))
}

// settleTask records a task's outcome (task.settled) and queues its result
// for the model.
func (t *turn) settleTask(ctx workflow.Context, ts *taskState, out work.ToolOutcome) {
	d := protocol.TaskSettledData{CallID: ts.CallID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: ts.TurnID}
	res := taskResult{id: ts.TaskID, tool: ts.Name}
	if out.Status == protocol.StatusCompleted {
		d.Status, d.Output = protocol.TaskCompleted, out.Output
		res.status, res.body = protocol.TaskCompleted, outputText(out.Output)
	} else {
		msg := "the task failed"
		if out.Error != nil {
			msg = out.Error.Message
		}
		d.Status, d.Error = protocol.TaskFailed, &protocol.TaskError{Message: msg}
		res.status, res.body = protocol.TaskFailed, msg
	}
	ts.Status = d.Status
	t.taskResults = append(t.taskResults, res)
	countToolCall(ctx, ts.Name, "task-"+d.Status)
	t.log.emit(ctx, protocol.TaskSettled, d)
}

// cancelTask stops a working task's work (task.settled cancelled, reason
// why); its work never reports back.
func (t *turn) cancelTask(ctx workflow.Context, ts *taskState, reason string) {
	ts.Status = protocol.TaskCancelled
	ts.cancel()
	t.log.emit(ctx, protocol.TaskSettled, protocol.TaskSettledData{
		CallID: ts.CallID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: ts.TurnID,
		Status: protocol.TaskCancelled, Cancel: &protocol.TaskCancel{Reason: reason},
	})
}

// endTasks cancels the working tasks of a turn that ends (cancelled or
// failed) and gives their work taskGrace to unwind.
func (t *turn) endTasks(ctx workflow.Context, reason string) {
	if !t.taskCalls || len(t.workingTasks()) == 0 {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking {
			t.cancelTask(dctx, ts, reason)
		}
	}
	_, _ = workflow.AwaitWithTimeout(dctx, taskGrace, func() bool {
		for _, ts := range t.taskList {
			if !ts.done {
				return false
			}
		}
		return true
	})
}

// deliverTasks appends, at a step boundary, the results that arrived
// (one task.result message) and the [Tasks] note when it changed.
func (t *turn) deliverTasks() {
	if !t.taskCalls {
		return
	}
	if len(t.taskResults) > 0 {
		t.conv.add(model.Message{Role: model.RoleUser, Kind: model.KindTaskResult, Text: renderTaskResults(t.taskResults)})
		t.taskResults = nil
	}
	working := t.workingTasks()
	if t.lastNote == "" && len(working) == 0 {
		return
	}
	if note := t.tasksNote(); note != t.lastNote {
		t.lastNote = note
		t.conv.add(model.Message{Role: model.RoleUser, Kind: model.KindContextState, Text: note})
	}
}

// tasksNote is eve's [Tasks] note: the working tasks.
func (t *turn) tasksNote() string {
	lines := []string{"[Tasks]", "<tasks>"}
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking {
			lines = append(lines, fmt.Sprintf(`<task id="%s" tool="%s" status="working"/>`, escapeAttribute(ts.TaskID), escapeAttribute(ts.Name)))
		}
	}
	return strings.Join(append(lines, "</tasks>"), "\n")
}

// holdForTasks is the turn rule: the model ended its turn while tasks
// work (or with results it has not read), so the turn parks until a
// result or its caller's steering message arrives. It reports false when
// the turn was cancelled meanwhile.
func (t *turn) holdForTasks(ctx workflow.Context) bool {
	if len(t.taskResults) > 0 {
		return true
	}
	setStatus(ctx, t.cfg, t.in.SessionID, statusWaitingTasks, t.workingTools())
	t.turnWaiting(ctx, "tasks")
	err := workflow.Await(ctx, func() bool { return len(t.taskResults) > 0 || len(t.steering) > 0 })
	setStatus(ctx, t.cfg, t.in.SessionID, statusRunning, nil)
	return err == nil
}

// mustHold reports whether the turn rule holds a turn whose model ended.
func (t *turn) mustHold() bool {
	return t.taskCalls && (len(t.workingTasks()) > 0 || len(t.taskResults) > 0)
}

// workingTools names the tools of the working tasks.
func (t *turn) workingTools() []string {
	var names []string
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking && !contains(names, ts.Name) {
			names = append(names, ts.Name)
		}
	}
	return names
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// taskControl answers a call of eve__task_wait or eve__task_cancel.
func (t *turn) taskControl(ctx workflow.Context, c *pendingCall) {
	if c.plan.Call.Name == tools.TaskWaitName {
		c.out = t.taskWait(ctx, c)
		return
	}
	c.out = t.taskCancel(ctx, c)
}

// taskWait parks the call until a task has a result, a message steers the
// turn, or timeoutSeconds pass (eve__task_wait).
func (t *turn) taskWait(ctx workflow.Context, c *pendingCall) work.ToolOutcome {
	var in struct {
		TimeoutSeconds *int `json:"timeoutSeconds"`
	}
	if err := json.Unmarshal(c.plan.Call.Input, &in); err != nil || (in.TimeoutSeconds != nil && *in.TimeoutSeconds < 1) {
		return work.FailedOutcome(protocol.CodeToolInputInvalid, fmt.Sprintf("invalid input for tool %s: timeoutSeconds must be a whole number of at least 1. Call it again with input that matches its input schema.", tools.TaskWaitName))
	}
	start := workflow.Now(ctx)
	steered := len(t.steering)
	ready := func() bool {
		return len(t.taskResults) > 0 || len(t.steering) > steered || len(t.workingTasks()) == 0
	}
	timedOut := false
	if !ready() {
		setStatus(ctx, t.cfg, t.in.SessionID, statusWaitingTasks, t.workingTools())
		t.turnWaiting(ctx, "tasks")
		var err error
		if in.TimeoutSeconds != nil {
			var ok bool
			ok, err = workflow.AwaitWithTimeout(ctx, time.Duration(*in.TimeoutSeconds)*time.Second, ready)
			timedOut = !ok && err == nil
		} else {
			err = workflow.Await(ctx, ready)
		}
		if err != nil {
			return cancelledOutcome(c.tool)
		}
		setStatus(ctx, t.cfg, t.in.SessionID, statusRunning, nil)
	}
	elapsed := workflow.Now(ctx).Sub(start)
	working := t.workingTasks()
	var text string
	switch {
	case len(t.taskResults) > 0 || len(working) == 0:
		text = settledWaitText(t.taskResults, working)
	case timedOut:
		text = fmt.Sprintf("Stopped waiting after %s; %s. %s", formatDuration(elapsed), countWorking(len(working)), resultsArriveLater(len(working)))
	default:
		text = fmt.Sprintf("A new message arrived, so the wait ended after %s; %s. Read the message, answer it if it asks you something, and decide whether it changes this work: %s",
			formatDuration(elapsed), countWorking(len(working)), interruptChoices(len(working)))
	}
	return work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(text)}
}

// taskCancel stops one task's work (eve__task_cancel).
func (t *turn) taskCancel(ctx workflow.Context, c *pendingCall) work.ToolOutcome {
	var in struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(c.plan.Call.Input, &in)
	ts := t.taskByID(in.TaskID)
	if ts == nil {
		return taskRefusal(protocol.CodeUnknownTask, fmt.Sprintf(`No task "%s" is in this session. Copy an id from a "Started task" receipt or the [Tasks] note.`, in.TaskID))
	}
	if ts.Status != protocol.TaskWorking {
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(ts.TaskID + " had no work to stop.")}
	}
	t.cancelTask(ctx, ts, protocol.TaskCancelTaskCancel)
	return work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(fmt.Sprintf("Stopped %s; it won't report back.", ts.TaskID))}
}

// taskRefusal is eve's error result of a task call: {code, message}.
func taskRefusal(code, msg string) work.ToolOutcome {
	return work.ToolOutcome{Status: protocol.StatusFailed, Output: mustJSON(map[string]string{"code": code, "message": msg}),
		Error: &protocol.ActionError{Code: code, Message: msg}}
}

// eve 0.80's texts (dist/src/execution/tasks/render.js).

func settledWaitText(settled []taskResult, working []string) string {
	if len(settled) == 0 && len(working) == 0 {
		return "No tasks are working."
	}
	var parts []string
	if len(settled) > 0 {
		items := make([]string, len(settled))
		for i, r := range settled {
			items[i] = r.id + " " + r.status
		}
		follows := "its result follows"
		if len(settled) > 1 {
			follows = "their results follow"
		}
		parts = append(parts, joinList(items)+"; "+follows+".")
	}
	if len(working) > 0 {
		parts = append(parts, capitalize(countWorking(len(working)))+": "+strings.Join(working, ", ")+".")
	}
	return strings.Join(parts, " ")
}

func countWorking(n int) string {
	if n == 1 {
		return "1 task is still working"
	}
	return fmt.Sprintf("%d tasks are still working", n)
}

func resultsArriveLater(n int) string {
	if n == 1 {
		return "Its result arrives before your turn ends; wait again only if you need it now."
	}
	return "Their results arrive before your turn ends; wait again only if you need them now."
}

func interruptChoices(n int) string {
	keep := "keep the tasks"
	if n == 1 {
		keep = "keep the task"
	}
	return keep + ", call an agent again with its taskId to correct it, or stop a task with " + tools.TaskCancelName + "."
}

func joinList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// formatDuration is eve's: "850ms", "1m 5s".
func formatDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1000 {
		return fmt.Sprintf("%dms", max(ms, 0))
	}
	s := (ms + 500) / 1000
	h, m, sec := s/3600, s%3600/60, s%60
	var parts []string
	if h > 0 {
		parts = append(parts, fmt.Sprintf("%dh", h))
	}
	if m > 0 {
		parts = append(parts, fmt.Sprintf("%dm", m))
	}
	if sec > 0 {
		parts = append(parts, fmt.Sprintf("%ds", sec))
	}
	return strings.Join(parts, " ")
}

// taskResultBudget is what one task.result message holds: 50 KB and 2,000
// lines, then the text is cut and marked [truncated].
const (
	taskResultBytes = 51200
	taskResultLines = 2000
)

// renderTaskResults is eve's task.result message: one <task_result> block
// per result, sharing one budget.
func renderTaskResults(results []taskResult) string {
	bytes, lines := taskResultBytes, taskResultLines
	blocks := make([]string, len(results))
	for i, r := range results {
		body := strings.ReplaceAll(r.body, "</task_result", `<\/task_result`)
		var kept []string
		for _, line := range strings.Split(body, "\n") {
			size := len(line) + 1
			if lines == 0 || size > bytes {
				kept = append(kept, "[truncated]")
				lines, bytes = 0, 0
				break
			}
			kept = append(kept, line)
			lines--
			bytes -= size
		}
		blocks[i] = fmt.Sprintf(`<task_result id="%s" tool="%s" status="%s">%s</task_result>`,
			escapeAttribute(r.id), escapeAttribute(r.tool), r.status, strings.Join(kept, "\n"))
	}
	return strings.Join(blocks, "\n")
}

func escapeAttribute(s string) string {
	return strings.NewReplacer("&", "&amp;", `"`, "&quot;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// outputText is what the model reads of a completed task's output: a
// string as itself, anything else as JSON.
func outputText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	if len(out) == 0 {
		return "null"
	}
	return string(out)
}
