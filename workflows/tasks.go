package workflows

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
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

// taskState is one task of the turn: working, idle (a resumable task
// between calls) or settled.
type taskState struct {
	protocol.TaskInfo
	resumable bool
	// state is a resumable task's, as its last call saved it.
	state json.RawMessage
	// used orders tasks by their last call (the [Tasks] note's idle list).
	used int
	// current is the call it works on; queued the calls waiting for it;
	// joined the calls that joined the current call's work (a subagent's
	// call to a working child joins its turn: subagent_join.go).
	current *taskCall
	queued  []*taskCall
	joined  []*taskCall
}

// taskCall is one call a task serves.
type taskCall struct {
	c      pendingCall // the call as its work runs (its receipt stays with the step)
	ctx    workflow.Context
	cancel workflow.CancelFunc
	// cancelled: its work never reports back; done: its work returned;
	// joining: it joined the current call's work (subagent_join.go).
	cancelled, done, joining bool
}

// heldTask is an idle resumable task as the session keeps it between
// turns (turnInput.Tasks, turnOutput.Tasks), in order of last use.
type heldTask struct {
	TaskID string `json:"taskId"`
	Tool   string `json:"tool"`
	// Kind is "agent" for a subagent's task (changeSubagents); empty: a
	// tool's.
	Kind  string          `json:"kind,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
}

// maxHeldTasks bounds the idle resumable tasks a session keeps; the least
// recently used go first.
const maxHeldTasks = 100

// taskKindAgent is the kind of a subagent's task.
const taskKindAgent = "agent"

// taskIdle is the status of a resumable task between calls.
const taskIdle = protocol.TaskIdle

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
		t.taskCalls = t.changeOn(ctx, changeTaskCalls)
	}
	return t.taskCalls
}

// isTask reports whether the call runs as a task.
func (t *turn) isTask(c *pendingCall) bool { return t.taskCalls && c.plan.Task != nil }

// loadHeldTasks puts the session's idle resumable tasks in the turn.
func (t *turn) loadHeldTasks() {
	for _, h := range t.in.Tasks {
		t.taskUse++
		kind := "tool"
		if h.Kind != "" {
			kind = h.Kind
		}
		t.taskList = append(t.taskList, &taskState{TaskInfo: protocol.TaskInfo{TaskID: h.TaskID, Name: h.Tool, Kind: kind, Status: taskIdle},
			resumable: true, state: h.State, used: t.taskUse})
	}
}

// heldTasks are the resumable tasks the session keeps after the turn.
func (t *turn) heldTasks() []heldTask {
	var held []*taskState
	for _, ts := range t.taskList {
		if ts.resumable {
			held = append(held, ts)
		}
	}
	slices.SortStableFunc(held, func(a, b *taskState) int { return a.used - b.used })
	if len(held) > maxHeldTasks {
		held = held[len(held)-maxHeldTasks:]
	}
	out := make([]heldTask, len(held))
	for i, ts := range held {
		out[i] = heldTask{TaskID: ts.TaskID, Tool: ts.Name, State: ts.state}
		if ts.Kind == taskKindAgent {
			out[i].Kind = taskKindAgent
		}
	}
	return out
}

// startTask starts a task call the gate and its person let through: a new
// task, or a further call of a resumable task (its taskId). The call's
// result is the receipt; the work goes on in a coroutine of its own.
func (t *turn) startTask(ctx workflow.Context, c *pendingCall) {
	p, tool := c.plan.Task, c.plan.Call.Name
	var ts *taskState
	if p.Resumable && p.TaskID != "" {
		if ts = t.taskByID(p.TaskID); ts == nil || !ts.resumable || ts.Name != tool {
			c.out = taskRefusal(protocol.CodeUnknownTask, fmt.Sprintf(`No task "%s" is available to %s: it may have ended or belong to another tool. Start a new one by calling %s without taskId.`, p.TaskID, tool, tool))
			return
		}
	}
	if working := t.workingTasks(); (ts == nil || ts.Status != protocol.TaskWorking) && len(working) >= tools.MaxWorkingTasks {
		c.out = taskRefusal(protocol.CodeTooManyTasks, fmt.Sprintf("%d tasks are already working (%s). Wait with %s or stop one with %s, then try again.",
			tools.MaxWorkingTasks, strings.Join(working, ", "), tools.TaskWaitName, tools.TaskCancelName))
		return
	}
	var receipt string
	if ts == nil {
		kind := "tool"
		if c.plan.Kind == string(tools.KindAgent) {
			kind = taskKindAgent // a subagent's (subagent.go)
		}
		ts = &taskState{TaskInfo: protocol.TaskInfo{TaskID: t.newTaskID(c), Name: tool, Kind: kind}, resumable: p.Resumable}
		t.taskList = append(t.taskList, ts)
		receipt = fmt.Sprintf("Started task %s. Its result will arrive in a <task_result> message.", ts.TaskID)
		if ts.resumable {
			receipt += fmt.Sprintf(" To send it another message, call %s again with taskId %s.", tool, ts.TaskID)
		}
	} else {
		receipt = fmt.Sprintf("Sent to task %s. Its reply will arrive in a <task_result> message.", ts.TaskID)
	}
	t.log.emit(ctx, protocol.TaskStarted, protocol.TaskStartedData{CallID: c.plan.Call.ID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: t.in.TurnID})
	c.out = work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(receipt)}

	call := &taskCall{c: *c}
	call.c.taskID = ts.TaskID
	call.ctx, call.cancel = workflow.WithCancel(ctx)
	if ts.Status == protocol.TaskWorking {
		if !t.joinCall(ctx, ts, call) {
			ts.queued = append(ts.queued, call) // a resumable task serves one call at a time
		}
	} else {
		t.beginCall(ts, call)
	}
	workflow.Go(call.ctx, func(ctx workflow.Context) {
		if err := workflow.Await(ctx, func() bool { return ts.current == call || call.joining || call.cancelled }); err != nil || call.cancelled {
			return
		}
		out := t.runTask(ctx, &call.c, ts)
		call.done = true
		if call.cancelled || ctx.Err() != nil {
			return // cancelled: whoever cancelled it settled it; it never reports back
		}
		t.settleTask(ctx, ts, call, out)
	})
}

// beginCall makes call the one ts works on.
func (t *turn) beginCall(ts *taskState, call *taskCall) {
	t.taskUse++
	ts.current, ts.used = call, t.taskUse
	ts.Status, ts.CallID, ts.TurnID = protocol.TaskWorking, call.c.plan.Call.ID, t.in.TurnID
	call.c.taskState = ts.state
}

// nextCall ends ts's current call: the next queued call begins, or ts is
// idle (resumable) or settled with status.
func (t *turn) nextCall(ts *taskState, status string) {
	ts.current = nil
	if !ts.resumable {
		ts.Status = status
		return
	}
	ts.Status = taskIdle
	if len(ts.queued) > 0 {
		next := ts.queued[0]
		ts.queued = ts.queued[1:]
		t.beginCall(ts, next)
	}
}

// runTask runs a task call's work to its outcome, bounded by its deadline.
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

// settleTask records a task call's outcome (task.settled) and queues its
// result for the model; a resumable task keeps the state the call saved.
func (t *turn) settleTask(ctx workflow.Context, ts *taskState, call *taskCall, out work.ToolOutcome) {
	d := protocol.TaskSettledData{CallID: call.c.plan.Call.ID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: t.in.TurnID}
	res := taskResult{id: ts.TaskID, tool: ts.Name}
	if out.Status == protocol.StatusCompleted {
		d.Status, d.Output = protocol.TaskCompleted, out.Output
		res.status, res.body = protocol.TaskCompleted, outputText(out.Output)
		if out.TaskState != nil {
			ts.state = out.TaskState
		}
	} else {
		msg := "the task failed"
		if out.Error != nil {
			msg = out.Error.Message
		}
		d.Status, d.Error = protocol.TaskFailed, &protocol.TaskError{Message: msg}
		res.status, res.body = protocol.TaskFailed, msg
	}
	t.endCall(ts, call, d.Status)
	t.taskResults = append(t.taskResults, res)
	countToolCall(ctx, ts.Name, "task-"+d.Status)
	t.log.emit(ctx, protocol.TaskSettled, d)
}

// cancelTask stops a working task's current call (task.settled cancelled,
// reason why), and with all its calls (a turn's end) the queued ones too;
// the work never reports back. A resumable task becomes idle and keeps
// its state.
func (t *turn) cancelTask(ctx workflow.Context, ts *taskState, reason string, all bool) {
	// The calls that joined the current one share its work: they stop too.
	calls := append([]*taskCall{ts.current}, ts.joined...)
	ts.joined = nil
	if all {
		calls = append(calls, ts.queued...)
		ts.queued = nil
	}
	for _, call := range calls {
		call.cancelled = true
		call.cancel()
		t.log.emit(ctx, protocol.TaskSettled, protocol.TaskSettledData{
			CallID: call.c.plan.Call.ID, Kind: ts.Kind, Name: ts.Name, TaskID: ts.TaskID, TurnID: t.in.TurnID,
			Status: protocol.TaskCancelled, Cancel: &protocol.TaskCancel{Reason: reason},
		})
	}
	t.nextCall(ts, protocol.TaskCancelled)
}

// endTasks cancels the working tasks of a turn that ends (cancelled or
// failed) and gives their work taskGrace to unwind.
func (t *turn) endTasks(ctx workflow.Context, reason string) {
	if !t.taskCalls || len(t.workingTasks()) == 0 {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var calls []*taskCall
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking {
			calls = append(append(calls, ts.current), ts.joined...)
			t.cancelTask(dctx, ts, reason, true)
		}
	}
	_, _ = workflow.AwaitWithTimeout(dctx, taskGrace, func() bool {
		for _, call := range calls {
			if !call.done {
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
	if t.lastNote == "" && len(t.workingTasks()) == 0 && len(t.idleTasks()) == 0 {
		return
	}
	if note := t.tasksNote(); note != t.lastNote {
		t.lastNote = note
		t.conv.add(model.Message{Role: model.RoleUser, Kind: model.KindContextState, Text: note})
	}
}

// tasksNote is eve's [Tasks] note: the working tasks, and the 10 most
// recently used idle resumable tasks.
func (t *turn) tasksNote() string {
	lines := []string{"[Tasks]", "<tasks>"}
	for _, ts := range t.taskList {
		if ts.Status == protocol.TaskWorking {
			lines = append(lines, fmt.Sprintf(`<task id="%s" tool="%s" status="working"/>`, escapeAttribute(ts.TaskID), escapeAttribute(ts.Name)))
		}
	}
	lines = append(lines, "</tasks>")
	if idle := t.idleTasks(); len(idle) > 0 {
		lines = append(lines, "<idle>")
		for _, ts := range idle {
			lines = append(lines, fmt.Sprintf(`<task id="%s" tool="%s"/>`, escapeAttribute(ts.TaskID), escapeAttribute(ts.Name)))
		}
		lines = append(lines, "</idle>")
	}
	return strings.Join(lines, "\n")
}

// idleTasks are the 10 most recently used idle resumable tasks, most
// recent first.
func (t *turn) idleTasks() []*taskState {
	var idle []*taskState
	for _, ts := range t.taskList {
		if ts.resumable && ts.Status == taskIdle {
			idle = append(idle, ts)
		}
	}
	slices.SortStableFunc(idle, func(a, b *taskState) int { return b.used - a.used })
	if len(idle) > 10 {
		idle = idle[:10]
	}
	return idle
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
	t.cancelTask(ctx, ts, protocol.TaskCancelTaskCancel, false)
	if ts.resumable {
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(fmt.Sprintf("Stopped %s's current work; it won't report back. To give it new work, call %s again with taskId %s.", ts.TaskID, ts.Name, ts.TaskID))}
	}
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

// heldTaskInfos lists the session's idle resumable tasks (the state
// query's SessionSummary.Tasks).
func heldTaskInfos(held []heldTask) []protocol.TaskInfo {
	if len(held) == 0 {
		return nil
	}
	out := make([]protocol.TaskInfo, len(held))
	for i, h := range held {
		kind := "tool"
		if h.Kind != "" {
			kind = h.Kind
		}
		out[i] = protocol.TaskInfo{TaskID: h.TaskID, Name: h.Tool, Kind: kind, Status: taskIdle}
	}
	return out
}

// registerTaskCancel installs the task cancel Update
// (signals.UpdateTaskCancel, changeTaskCancelUpdate): someone outside the
// conversation (a person in the console, an app) stops one working task.
// Its validator refuses a task the turn does not have or that does not
// work, recording nothing. The task's call settles cancelled
// (cancel.reason task_cancel) and its work never reports back; the model
// reads, at its next step boundary, a failed <task_result> saying the
// task was stopped from outside, so a turn held for it goes on.
func (t *turn) registerTaskCancel(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateTaskCancel,
		func(ctx workflow.Context, req signals.TaskCancelRequest) (signals.TaskCancelResult, error) {
			if err := t.checkTaskCancel(req); err != nil {
				return signals.TaskCancelResult{}, err
			}
			workflow.GetVersion(ctx, changeTaskCancelUpdate, workflow.DefaultVersion, 1)
			ts := t.taskByID(req.TaskID)
			res := signals.TaskCancelResult{TaskID: ts.TaskID, CallID: ts.CallID, TurnID: t.in.TurnID, Resumable: ts.resumable}
			t.cancelTask(ctx, ts, protocol.TaskCancelTaskCancel, false)
			body := fmt.Sprintf("%s was stopped from outside this conversation (a cancel through eve's API); its work has no result.", ts.TaskID)
			if ts.resumable {
				body = fmt.Sprintf("%s's current work was stopped from outside this conversation (a cancel through eve's API); it has no result. To give it new work, call %s again with taskId %s.", ts.TaskID, ts.Name, ts.TaskID)
			}
			t.taskResults = append(t.taskResults, taskResult{id: ts.TaskID, tool: ts.Name, status: protocol.TaskFailed, body: body})
			countToolCall(ctx, ts.Name, "task-"+protocol.TaskCancelled)
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req signals.TaskCancelRequest) error {
			return t.checkTaskCancel(req)
		}})
}

// checkTaskCancel refuses a cancel of a task the turn does not have, or
// that does not work.
func (t *turn) checkTaskCancel(req signals.TaskCancelRequest) error {
	ts := t.taskByID(req.TaskID)
	switch {
	case ts == nil:
		return temporal.NewApplicationError(fmt.Sprintf("no task %q in turn %s", req.TaskID, t.in.TurnID), signals.ErrTypeUnknownTask)
	case ts.Status != protocol.TaskWorking || t.closing:
		return temporal.NewApplicationError(fmt.Sprintf("task %s is %s: it has no work to stop", ts.TaskID, ts.Status), signals.ErrTypeTaskNotWorking)
	}
	return nil
}
