package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// One pipeline takes a tool call to its outcome, in turns and in tools API
// executions alike: the gate (gateCall) refuses it, puts it to a person,
// or lets it run; a call a person settles waits for them; a call that runs
// executes (execute). An execution is a turn in which nobody can be asked:
// there, a call the gate puts to a person is refused.

// stage is where the gate sends a call.
type stage int

const (
	stageRun     stage = iota // runs now
	stageAsk                  // waits for a person's approval
	stageAnswer               // a client tool: waits for a person's answer
	stageUnknown              // refused: there is no such tool
	stageInvalid              // refused: the input breaks the tool's schema
	stageDenied               // refused: a policy denied it
)

// refused reports whether the gate settled the call: it never runs.
func (s stage) refused() bool { return s >= stageUnknown }

// pendingCall is one tool call on its way from the model's step to its
// outcome.
type pendingCall struct {
	plan work.CallPlan
	// tool names the tool in outcomes: the call's name in a turn, the
	// catalog's in an execution.
	tool  string
	stage stage
	// reason says why: the policy's reason (ask, denied) or the input
	// error (invalid).
	reason string
	// req is the request a person settles (ask, answer).
	req *request
	out work.ToolOutcome
	// stub is the rule that settled the call instead of its tool (nil: none).
	stub *protocol.ActionStub
	// control: a call of eve__task_wait or eve__task_cancel, which the
	// turn answers itself (tasks.go).
	control bool
	// taskID and taskState: the task a task call's work serves, and a
	// resumable task's state before the call.
	taskID    string
	taskState json.RawMessage
	// done: out is final and recorded.
	done bool
}

// gateCall decides where a call goes, in this order: an unknown tool or
// input that breaks its schema is refused; a client tool waits for a
// person's answer; otherwise the approval policy decides (approval.Decide):
// denied, ask a person, or run. approvedOnce says whether the session
// approved the tool once, custom is what its custom policy answered
// (evaluatePolicy). It is pure: turns and executions both call it.
func gateCall(p work.CallPlan, tool string, approvedOnce bool, custom approval.Status) *pendingCall {
	c := &pendingCall{plan: p, tool: tool}
	switch {
	case !p.Known:
		c.stage = stageUnknown
	case p.InputError != "":
		c.stage, c.reason = stageInvalid, p.InputError
	case kindOf(p).AsksPerson:
		c.stage = stageAnswer
	default:
		switch st := approval.Decide(p.Approval, approvedOnce, custom); st.Type {
		case approval.Denied:
			c.stage, c.reason = stageDenied, st.Reason
		case approval.UserApproval:
			c.stage, c.reason = stageAsk, st.Reason
		default:
			c.stage = stageRun
		}
	}
	return c
}

// needsPolicy reports whether the gate needs the call's custom policy or
// automatic review (approval.Auto).
func needsPolicy(p work.CallPlan) bool {
	return p.Known && p.InputError == "" && (p.Approval == approval.KindCustom || p.Approval == approval.KindAuto)
}

// reviewed reports whether the gate may evaluate p's policy.
func reviewed(ctx workflow.Context, p work.CallPlan) bool {
	return p.Approval != approval.KindAuto || workflow.GetVersion(ctx, changeAuto, workflow.DefaultVersion, 1) >= 1
}

// evaluatePolicy runs a custom approval policy in a local activity. A
// failure leaves an invalid status, which approval.Decide fails closed.
func evaluatePolicy(ctx workflow.Context, in work.ApprovalInput) workflow.Future {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: work.PolicyTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	return workflow.ExecuteLocalActivity(lctx, work.EvaluateApprovalName, in)
}

// callHost is the workflow a call executes in: a turn, or an execution.
type callHost interface {
	// toolInput is the input of the call's activity.
	toolInput(c *pendingCall) work.ExecuteToolInput
	// openAction holds a delegated call's action before its job can know
	// it, so the workflow's handlers answer for it; closed runs when the
	// action has settled.
	openAction(ctx workflow.Context, a *actionState) (closed func())
}

// kindOf is the table row of the call's tool kind (tools.Kind.Info).
func kindOf(p work.CallPlan) tools.KindInfo { return tools.Kind(p.Kind).Info() }

// runner runs a call of one tool kind that the gate let through, to its
// outcome. A kind whose result is a person's answer (tools.KindClient) has
// none: its outcome is the answer (await).
type runner func(ctx workflow.Context, h callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome

var runners = map[tools.Kind]runner{
	tools.KindAuthored:  runAuthored,
	tools.KindDelegated: runDelegated,
	tools.KindWorkflow:  runWorkflow,
	tools.KindNexus:     runNexus,
	tools.KindAgent:     runAgent,
}

// execute runs a call the gate let through with its kind's runner.
func execute(ctx workflow.Context, h callHost, c *pendingCall) work.ToolOutcome {
	if ctx.Err() != nil {
		return cancelledOutcome(c.tool)
	}
	run, ok := runners[tools.Kind(c.plan.Kind)]
	if !ok {
		return work.FailedOutcome(codeNotExecutable, fmt.Sprintf("tool %s (kind %q) has no runner: it cannot be executed", c.tool, c.plan.Kind))
	}
	return run(ctx, h, c, h.toolInput(c))
}

// runAuthored runs an authored tool's activity with the plan's options.
func runAuthored(ctx workflow.Context, _ callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome {
	var out work.ToolOutcome
	if err := toolActivity(ctx, c.plan, in).Get(ctx, &out); err != nil {
		if ctx.Err() != nil {
			return cancelledOutcome(c.tool)
		}
		return activityFailure(c.tool, err)
	}
	return out
}

// runDelegated starts a delegated tool's job and waits until it completes,
// its deadline passes or the workflow is cancelled.
func runDelegated(ctx workflow.Context, h callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome {
	p := c.plan
	wid := workflow.GetInfo(ctx).WorkflowExecution.ID
	in.ActionID = signals.ActionID(wid, p.Call.ID)
	in.Deadline = workflow.Now(ctx).Add(p.Deadline)
	a := newActionState(p, in)
	closed := h.openAction(ctx, a)
	tr, reports := h.(taskReporter)
	if reports {
		tr.taskStarted(ctx, c, in.ActionID)
	}
	out := awaitAction(ctx, a, p, in)
	closed()
	if reports {
		tr.taskSettled(ctx, c, in.ActionID, out, ctx.Err() != nil)
	}
	return out
}

// taskReporter is a host that reports delegated jobs as eve's tasks.
type taskReporter interface {
	taskStarted(ctx workflow.Context, c *pendingCall, taskID string)
	taskSettled(ctx workflow.Context, c *pendingCall, taskID string, out work.ToolOutcome, cancelled bool)
}

func (t *turn) taskStarted(ctx workflow.Context, c *pendingCall, taskID string) {
	if !t.tasks || t.isTask(c) { // a task reports itself (tasks.go)
		return
	}
	t.log.emit(ctx, protocol.TaskStarted, protocol.TaskStartedData{CallID: c.plan.Call.ID, Kind: "tool", Name: c.plan.Call.Name, TaskID: taskID, TurnID: t.in.TurnID})
}

func (t *turn) taskSettled(ctx workflow.Context, c *pendingCall, taskID string, out work.ToolOutcome, cancelled bool) {
	if !t.tasks || t.isTask(c) {
		return
	}
	d := protocol.TaskSettledData{CallID: c.plan.Call.ID, Kind: "tool", Name: c.plan.Call.Name, TaskID: taskID, TurnID: t.in.TurnID}
	switch {
	case cancelled:
		d.Status, d.Cancel = protocol.TaskCancelled, &protocol.TaskCancel{Reason: protocol.TaskCancelTurnCancelled}
	case out.Status == protocol.StatusCompleted:
		d.Status, d.Output = protocol.TaskCompleted, out.Output
	default:
		d.Status, d.Error = protocol.TaskFailed, &protocol.TaskError{Message: "the task failed"}
		if out.Error != nil {
			d.Error.Message = out.Error.Message
		}
	}
	t.log.emit(ctx, protocol.TaskSettled, d)
}

// toolActivity schedules an authored tool's activity with the plan's
// options (local or regular, timeouts, retries).
func toolActivity(ctx workflow.Context, p work.CallPlan, in work.ExecuteToolInput) workflow.Future {
	retry := &temporal.RetryPolicy{
		InitialInterval:        p.Retry.InitialInterval,
		BackoffCoefficient:     p.Retry.BackoffCoefficient,
		MaximumInterval:        p.Retry.MaximumInterval,
		MaximumAttempts:        p.Retry.MaximumAttempts,
		NonRetryableErrorTypes: []string{work.ErrTypeBadConfig},
	}
	if p.Local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: p.Timeout, RetryPolicy: retry})
		return workflow.ExecuteLocalActivity(lctx, work.ExecuteToolName, in)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          signals.ToolActivityID(in.CallID),
		StartToCloseTimeout: p.Timeout,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		RetryPolicy:         retry,
		// A task's cancelled work unwinds before the call settles (the
		// turn gives it taskGrace).
		WaitForCancellation: p.Task != nil,
	})
	return workflow.ExecuteActivity(actx, work.ExecuteToolName, in)
}

// The turn's side of the pipeline: a step's calls.

// gate decides every call of a step. Custom policies run first,
// concurrently; then each call is refused (and gets its result at once),
// put to a person (its request goes on the board), or let through.
func (t *turn) gate(ctx workflow.Context, stepIdx int, plans []work.CallPlan) []*pendingCall {
	custom := evaluatePolicies(ctx, t.board, plans, t.dynamicFor)
	now := workflow.Now(ctx)
	calls := make([]*pendingCall, len(plans))
	for i, p := range plans {
		if (p.Task != nil || tools.IsTaskControl(p.Call.Name)) && t.tasksOn(ctx) && p.Task == nil {
			// eve__task_wait, eve__task_cancel: the turn answers them.
			calls[i] = &pendingCall{plan: p, tool: p.Call.Name, stage: stageRun, control: true}
			continue
		}
		c := gateCall(p, p.Call.Name, t.board.approvedOnce(p.Call.Name), custom[i])
		switch c.stage {
		case stageAsk:
			r := newApprovalRequest(p, stepIdx, c.reason, t.board.responses, t.requestTag(ctx))
			r.onceFor = custom[i].OnceFor
			c.req = t.board.add(r, now)
			t.watch(ctx, c.req)
		case stageAnswer:
			c.req = t.board.add(newQuestionRequest(p, stepIdx, t.requestTag(ctx)), now)
			t.watch(ctx, c.req)
		case stageUnknown, stageInvalid, stageDenied:
			c.out = refusal(c)
		}
		calls[i] = c
	}
	for _, c := range calls {
		if c.stage.refused() {
			t.actionResult(ctx, stepIdx, c)
		}
	}
	return calls
}

// evaluatePolicies runs the custom policies of a step concurrently, each in
// an activity.
func evaluatePolicies(ctx workflow.Context, b *inputBoard, plans []work.CallPlan, dynamicFor func(string) []work.DynamicTool) []approval.Status {
	out := make([]approval.Status, len(plans))
	futures := make([]workflow.Future, len(plans))
	for i, p := range plans {
		if !needsPolicy(p) || !reviewed(ctx, p) {
			continue
		}
		futures[i] = evaluatePolicy(ctx, work.ApprovalInput{Context: approval.Context{
			Session: b.session, ToolName: p.Call.Name, ToolInput: p.Call.Input, CallID: p.Call.ID,
			ApprovedTools: append([]string{}, b.approved...),
		}, Dynamic: dynamicFor(p.Call.Name)})
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		if err := f.Get(ctx, &out[i]); err != nil {
			out[i] = approval.Status{}
		}
	}
	return out
}

// refusal is the result the model reads for a call the gate refused.
func refusal(c *pendingCall) work.ToolOutcome {
	switch c.stage {
	case stageUnknown:
		return work.FailedOutcome(protocol.CodeToolNotFound,
			fmt.Sprintf("there is no tool named %q; call one of the tools you were given", c.plan.Call.Name))
	case stageInvalid:
		return work.FailedOutcome(protocol.CodeToolInputInvalid, c.reason)
	}
	return denied(c.tool, c.reason, false)
}

// requestsOf lists the requests the gate made for people, in the calls' order.
func requestsOf(calls []*pendingCall) []*request {
	var asked []*request
	for _, c := range calls {
		if c.req != nil {
			asked = append(asked, c.req)
		}
	}
	return asked
}

// concurrently follows each call the gate did not refuse in a coroutine of
// its own, started in the calls' order, and returns when every call has
// settled; each call's action.result is recorded as it settles. When only
// delegated jobs are left, the turn says so once (it resumes on its own).
func (t *turn) concurrently(ctx workflow.Context, stepIdx int, calls []*pendingCall, follow func(ctx workflow.Context, c *pendingCall)) {
	for _, c := range calls {
		if c.done {
			continue
		}
		workflow.Go(ctx, func(ctx workflow.Context) {
			follow(ctx, c)
			t.actionResult(ctx, stepIdx, c)
		})
	}
	left := func() int {
		n := 0
		for _, c := range calls {
			if !c.done {
				n++
			}
		}
		return n
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if delegated := delegatedTools(calls); len(delegated) > 0 {
		_ = workflow.Await(dctx, func() bool { return left() == 0 || (left() == t.delegatedOpen && len(t.board.open()) == 0) })
		if left() > 0 && ctx.Err() == nil {
			t.setStatus(ctx, statusWaitingTasks, delegated)
			t.turnWaiting(ctx, "tasks")
		}
	}
	_ = workflow.Await(dctx, func() bool { return left() == 0 })
}

// delegatedTools names the delegated tools of the calls the gate let
// through or put to a person.
func delegatedTools(calls []*pendingCall) []string {
	var names []string
	for _, c := range calls {
		if kindOf(c.plan).Async && c.plan.Task == nil && !c.control && !c.stage.refused() && !slices.Contains(names, c.plan.Call.Name) {
			names = append(names, c.plan.Call.Name)
		}
	}
	return names
}

// await waits for the person a call's request asked, if any, and reports
// whether the call runs. An answer, a denial, a withdrawal (a steering
// message), its deadline or the turn's cancellation settles the call
// instead.
func (t *turn) await(ctx workflow.Context, c *pendingCall) bool {
	r := c.req
	if r == nil {
		return true
	}
	if err := workflow.Await(ctx, func() bool { return r.state.closed() }); err != nil {
		if fx, err := r.cancel(); err == nil {
			t.recordResolved(ctx, fx.resolved)
		}
		t.traceWait(ctx, c)
		c.out = work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled before anyone answered", c.tool))
		return false
	}
	t.traceWait(ctx, c)
	out, runs := r.callOutcome(c.tool, c.stage == stageAnswer)
	if !runs {
		c.out = out
	}
	return runs
}

// execute runs a call that passed the gate and its person; what the call
// asked and nobody answered before it ended is cancelled.
func (t *turn) execute(ctx workflow.Context, c *pendingCall) {
	if t.running == nil {
		t.running = map[string]runningCall{}
	}
	t.running[c.plan.Call.ID] = runningCall{c: c, stepIdx: t.stepIdx}
	start, step := workflow.Now(ctx), t.stepIdx
	// A stub decides after the gate and the person: a denied call or one
	// still waiting consumes no entry (eve's rule).
	if d, ok := t.in.Stubs.decide(ctx, c.plan.Call.Name, t.toolInput(c).Input); ok && ctx.Err() == nil {
		c.stub = &protocol.ActionStub{RuleID: d.RuleID, Position: d.Position}
		c.out = stubOutcome(d)
	} else {
		t.askTagFor(ctx, c)
		c.out = execute(ctx, t, c)
	}
	delete(t.running, c.plan.Call.ID)
	t.traceTool(ctx, c, start, step)
	t.record(ctx, t.board.cancelAsked(c.plan.Call.ID))
}

func (t *turn) toolInput(c *pendingCall) work.ExecuteToolInput {
	p := c.plan
	in := work.ExecuteToolInput{Session: t.session(), TurnID: t.in.TurnID, CallID: p.Call.ID, ToolName: p.Call.Name, Input: p.Call.Input, Dynamic: t.dynamicFor(p.Call.Name),
		AskTag: t.askTag}
	if t.cfg.CodeAgents {
		in.Origin = t.in.Origin
	}
	if c.req != nil {
		in.Approver = c.req.approver // set only under changeResponses
		if e := c.req.edited; e != nil {
			in.Input = e.input // a person's edit (changeEdits)
		}
	}
	if p.Task != nil && c.taskID != "" {
		in.TaskID = c.taskID
		if p.Task.Input != nil && (c.req == nil || c.req.edited == nil) {
			in.Input = p.Task.Input // without taskId
		}
		if p.Task.Resumable {
			in.Resumable, in.TaskState = true, c.taskState
		}
	}
	return in
}

func (t *turn) openAction(ctx workflow.Context, a *actionState) func() {
	t.actions[a.ActionID] = a
	t.delegatedOpen++
	return func() {
		countDelegatedAction(ctx, a.Tool, a.State)
		t.delegatedOpen--
	}
}

// actionResult records a call's result (action.result): the call is done.
func (t *turn) actionResult(ctx workflow.Context, stepIdx int, c *pendingCall) {
	if isDenied(c.out) && t.changeOn(ctx, changeDeniedResult) {
		c.out.Output = deniedResult(c)
	}
	out := c.out
	outcome := out.Status
	if out.Error != nil {
		outcome = out.Error.Code
	}
	countToolCall(ctx, c.plan.Call.Name, outcome)
	t.log.emit(ctx, protocol.ActionResult, protocol.ActionResultData{
		Error: out.Error,
		Result: protocol.ToolResultAction{
			CallID: c.plan.Call.ID, Kind: "tool-result", Output: out.Output, ToolName: c.plan.Call.Name,
			IsError: out.Status != protocol.StatusCompleted,
		},
		Status:  out.Status,
		StepRef: t.step(stepIdx),
		Stub:    c.stub,
	})
	c.done = true
}

// toolResults are what the model reads in its next step, in the calls' order.
func toolResults(calls []*pendingCall) []model.ToolResult {
	results := make([]model.ToolResult, len(calls))
	for i, c := range calls {
		results[i] = model.ToolResult{CallID: c.plan.Call.ID, Name: c.plan.Call.Name, Output: c.out.Output, IsError: c.out.Status != protocol.StatusCompleted, Note: editNote(c)}
	}
	return results
}

// dynamicFor returns the resolved tool a call names, if any, so the worker
// that runs it can find it.
func (t *turn) dynamicFor(name string) []work.DynamicTool {
	for _, d := range t.dynamic {
		if d.Name == name {
			return []work.DynamicTool{d}
		}
	}
	return nil
}

// Outcomes.

// denied is the result the model sees for a rejected call: never a success.
func denied(tool, reason string, byPerson bool) work.ToolOutcome {
	msg := fmt.Sprintf("The call to %s was denied", tool)
	if byPerson {
		msg += " by the user"
	} else {
		msg += " by policy"
	}
	if reason != "" {
		// A reason is often a sentence already: one period, not two.
		msg += ": " + strings.TrimRight(reason, ".")
	}
	msg += ". The tool did not run."
	out, _ := json.Marshal(map[string]string{"error": msg, "code": protocol.CodeToolDenied, "reason": reason})
	return work.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeToolDenied, Message: msg}}
}

// isDenied: the call did not run because it was denied (a policy, a
// person, or a withdrawn prompt).
func isDenied(out work.ToolOutcome) bool {
	return out.Error != nil && out.Error.Code == protocol.CodeToolDenied
}

// deniedResult is a denied call's result in eve's shape
// (protocol.DeniedResult; changeDeniedResult).
func deniedResult(c *pendingCall) json.RawMessage {
	res := protocol.DeniedResult{Code: protocol.CodeToolDenied, Message: c.out.Error.Message, Tool: protocol.DeniedTool{Result: protocol.ToolResultNotRun}}
	if r := c.req; r != nil {
		status := protocol.DeniedStatusDenied
		if r.state == reqWithdrawn {
			status = protocol.DeniedStatusIgnored
		}
		res.Approval = &protocol.DeniedApproval{RequestID: r.req.RequestID, Status: status}
	}
	return mustJSON(res)
}

func cancelledOutcome(tool string) work.ToolOutcome {
	return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled", tool))
}

// activityFailure turns a failed tool activity (retries exhausted, timeout,
// cancellation) into the result the model sees.
func activityFailure(tool string, err error) work.ToolOutcome {
	var timeoutErr *temporal.TimeoutError
	var canceledErr *temporal.CanceledError
	switch {
	case errors.As(err, &timeoutErr):
		return work.FailedOutcome(protocol.CodeToolTimeout, fmt.Sprintf("tool %s timed out (%s)", tool, timeoutErr.TimeoutType()))
	case errors.As(err, &canceledErr):
		return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled", tool))
	}
	return work.FailedOutcome(protocol.CodeToolExecution, errorMessage(err))
}

// errorMessage digs the application error's own message out of the
// activity error wrapper.
func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}
