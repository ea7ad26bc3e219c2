package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TurnInput starts one turn.
type TurnInput struct {
	SessionID string    `json:"sessionId"`
	TurnID    string    `json:"turnId"`
	Sequence  int       `json:"sequence"`
	Auth      auth.Auth `json:"auth"`
	Message   string    `json:"message"`
	// History is the whole conversation, in turns started before
	// conversations were stored by reference (and once, when such a
	// session starts its first turn by reference).
	History []model.Message `json:"history"`
	// Conversation is the stored conversation before this turn.
	Conversation *conversation.Ref `json:"conversation,omitempty"`
	DeliveryIDs  []string          `json:"deliveryIds,omitempty"`
	// EventBase is the global index of the turn's first event.
	EventBase int    `json:"eventBase"`
	Config    Config `json:"config"`
	// ApprovedTools are the tools approved once in this session.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// SessionTools were resolved when the session started.
	SessionTools []activities.DynamicTool `json:"sessionTools,omitempty"`
}

// TurnOutput is what the session keeps of a finished turn.
type TurnOutput struct {
	Events []protocol.Event `json:"events"`
	// Messages are what the turn added to the conversation (turns recorded
	// before conversations were stored by reference).
	Messages []model.Message `json:"messages"`
	// Conversation is the stored conversation after the turn.
	Conversation *conversation.Ref   `json:"conversation,omitempty"`
	Outcome      signals.TurnOutcome `json:"outcome"`
	Usage        protocol.TokenUsage `json:"usage"`
	// ApprovedTools is the session's once-approved set after the turn.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// Taken are the delivery ids of the messages the session offered that
	// the turn used (answers, steering); the session runs the others as
	// turns of their own.
	Taken []string `json:"taken,omitempty"`
}

// Error codes of turn.failed.
const (
	CodeMaxSteps   = "MAX_STEPS_EXCEEDED"
	CodeModelError = "MODEL_ERROR"
)

type turn struct {
	in     TurnInput
	cfg    Config
	parent *workflow.Execution
	log    eventLog
	// byRef: the conversation is stored (conv) and pending holds the
	// messages no model step has stored yet. Turns recorded before that
	// carry it inline: msgs (history first) and newMsg (this turn's).
	byRef   bool
	conv    conversation.Ref
	pending []model.Message
	// noCompact: compacting again in this turn won't help (it failed, or
	// the turn alone fills the window).
	noCompact bool
	// turnMsgs counts the messages this turn added to the conversation.
	turnMsgs int
	msgs     []model.Message
	newMsg   []model.Message
	usage    protocol.TokenUsage

	stepIdx int
	// stepDone is the last step whose model call returned (-1 before any):
	// late text deltas of a finished step are dropped.
	stepDone int
	now      time.Time // workflow time when the step's requests were made
	// dynamic are the resolved tools in force (session, turn, step).
	dynamic  []activities.DynamicTool
	turnDyn  []activities.DynamicTool
	requests []*openRequest
	byID     map[string]*openRequest
	approved []string // tools approved once in this session
	parks    int      // how often the turn parked for input
	actions  map[string]*actionState
	// delegatedOpen counts delegated calls waiting for their jobs.
	delegatedOpen int
	finished      bool
	// prompts: versionMessagePrompts. steering are messages the model reads
	// before its next step; taken the offered messages used; streamed the
	// text of the running step sent as message.appended; closing: the turn
	// takes no more messages.
	prompts  bool
	steering []signals.TurnMessage
	taken    []string
	streamed string
	closing  bool
	status   string
	reply    string
	errMsg   string
}

func (t *turn) add(m model.Message) {
	t.turnMsgs++
	if t.byRef {
		t.pending = append(t.pending, m)
		return
	}
	t.msgs = append(t.msgs, m)
	t.newMsg = append(t.newMsg, m)
}

func (t *turn) ref() protocol.TurnRef {
	return protocol.TurnRef{Sequence: t.in.Sequence, TurnID: t.in.TurnID}
}

func (t *turn) step(i int) protocol.StepRef {
	return protocol.StepRef{Sequence: t.in.Sequence, StepIndex: i, TurnID: t.in.TurnID}
}

func (t *turn) outcome() signals.TurnOutcome {
	status := t.status
	if !t.finished {
		status = signals.TurnStatusWaiting
	}
	return signals.TurnOutcome{
		Status: status, Reply: t.reply, Error: t.errMsg,
		FirstEvent: t.log.base, LastEvent: t.log.total() - 1,
	}
}

// finish ends the turn; handlers waiting on it (respond with Wait) return
// before the workflow completes.
func (t *turn) finish(ctx workflow.Context, status, reply, errMsg string) (TurnOutput, error) {
	t.closing = true
	t.finished, t.status, t.reply, t.errMsg = true, status, reply, errMsg
	countTurn(ctx, status)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
	out := TurnOutput{
		Events:        t.log.events,
		Messages:      t.newMsg,
		Usage:         t.usage,
		Outcome:       t.outcome(),
		ApprovedTools: t.approved,
		Taken:         t.taken,
	}
	if t.byRef {
		t.storePending(dctx)
		conv := t.conv
		out.Conversation = &conv
	}
	return out, nil
}

// storePending stores the messages no model step stored (the tool results
// of a turn that ended before its next step), so the next turn sees them.
func (t *turn) storePending(ctx workflow.Context) {
	if len(t.pending) == 0 {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
	})
	var ref conversation.Ref
	in := activities.AppendInput{SessionID: t.in.SessionID, Conversation: t.conv, Messages: t.pending}
	if err := workflow.ExecuteLocalActivity(lctx, activities.AppendConversationName, in).Get(ctx, &ref); err != nil {
		workflow.GetLogger(ctx).Error("the turn's last messages could not be stored; the conversation goes on without them", "turn", t.in.TurnID, "error", err)
		return
	}
	t.conv, t.pending = ref, nil
}

// cancelled records the end of a cancelled turn.
func (t *turn) cancelled(ctx workflow.Context) (TurnOutput, error) {
	t.log.emit(ctx, protocol.TurnCancelled, t.ref())
	return t.finish(ctx, signals.TurnStatusCancelled, "", "the turn was cancelled")
}

// Turn runs the step loop: model → tools (concurrently) → model … until
// the model answers without tool calls or MaxSteps is reached. Failures of
// the model or of tools become events, never a failed workflow.
func (r *Runtime) Turn(ctx workflow.Context, in TurnInput) (TurnOutput, error) {
	cfg := in.Config.WithDefaults()
	t := &turn{in: in, cfg: cfg,
		log:      eventLog{rt: r, sessionID: in.SessionID, base: in.EventBase, deliveries: in.DeliveryIDs},
		stepDone: -1, byID: map[string]*openRequest{}, actions: map[string]*actionState{}, approved: append([]string(nil), in.ApprovedTools...)}
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil {
		t.parent = p
	}
	if err := t.registerInputHandlers(ctx); err != nil {
		return TurnOutput{}, err
	}
	if err := t.registerActionHandlers(ctx); err != nil {
		return TurnOutput{}, err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryTurnEvents, func(from int) ([]protocol.Event, error) {
		if from < 0 || from > len(t.log.events) {
			return nil, fmt.Errorf("event index %d out of range [0,%d]", from, len(t.log.events))
		}
		return signals.PageEvents(t.log.events[from:]), nil
	}); err != nil {
		return TurnOutput{}, err
	}

	t.byRef = workflow.GetVersion(ctx, versionConversationRef, workflow.DefaultVersion, 1) == 1
	t.prompts = workflow.GetVersion(ctx, versionMessagePrompts, workflow.DefaultVersion, 1) == 1
	if t.byRef {
		if in.Conversation != nil {
			t.conv = *in.Conversation
		}
		// A session that kept its conversation inline hands it over once.
		t.pending = append([]model.Message(nil), in.History...)
	} else {
		t.msgs = append([]model.Message(nil), in.History...)
	}
	setStatus(ctx, cfg, in.SessionID, StatusRunning, nil)
	t.log.emit(ctx, protocol.TurnStarted, t.ref())
	t.log.emit(ctx, protocol.MessageReceived, protocol.MessageReceivedData{Message: in.Message, Sequence: in.Sequence, TurnID: in.TurnID})
	t.add(model.Message{Role: model.RoleUser, Text: in.Message})

	session := auth.Session{ID: in.SessionID, Auth: in.Auth}
	if cfg.hasScope("turn") {
		ts, err := resolveTools(ctx, activities.ResolveInput{Scope: "turn", Session: session, TurnID: in.TurnID})
		if err != nil {
			return t.resolutionFailed(ctx, err)
		}
		t.turnDyn = ts
	}
	for stepIdx := 0; ; stepIdx++ {
		t.stepIdx = stepIdx
		if ctx.Err() != nil {
			return t.cancelled(ctx)
		}
		if stepIdx >= cfg.MaxSteps {
			msg := fmt.Sprintf("the turn stopped after %d model steps without a final answer; the model kept calling tools. Raise the agent's max steps (EVE_MAX_STEPS) if this is expected.", cfg.MaxSteps)
			t.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeMaxSteps, Message: msg, Sequence: in.Sequence, TurnID: in.TurnID})
			return t.finish(ctx, signals.TurnStatusFailed, "", msg)
		}
		var stepDyn []activities.DynamicTool
		if cfg.hasScope("step") {
			ts, err := resolveTools(ctx, activities.ResolveInput{Scope: "step", Session: session, TurnID: in.TurnID, StepIndex: stepIdx})
			if err != nil {
				return t.resolutionFailed(ctx, err)
			}
			stepDyn = ts
		}
		dyn, err := mergeDynamic(in.SessionTools, t.turnDyn, stepDyn)
		if err != nil {
			return t.resolutionFailed(ctx, err)
		}
		t.dynamic = dyn
		if t.byRef && t.shouldCompact() {
			t.compact(ctx, stepIdx)
			if ctx.Err() != nil {
				return t.cancelled(ctx)
			}
		}
		t.log.emit(ctx, protocol.StepStarted, protocol.StepStartedData{ModelID: cfg.ModelID, StepRef: t.step(stepIdx)})
		step := activities.ModelStepInput{SessionID: in.SessionID, TurnID: in.TurnID, StepIndex: stepIdx, Messages: t.msgs, Dynamic: t.dynamic}
		if t.byRef {
			conv := t.conv
			step.Messages, step.Conversation, step.Append = nil, &conv, t.pending
		}
		if cfg.StreamText && !cfg.LocalModel {
			step.StreamTo = workflow.GetInfo(ctx).WorkflowExecution.ID
		}
		t.streamed = ""
		res, err := runModelStep(ctx, cfg, step)
		t.stepDone = stepIdx
		if err != nil {
			if ctx.Err() != nil {
				return t.cancelled(ctx)
			}
			msg := errorMessage(err)
			t.log.emit(ctx, protocol.StepFailed, protocol.StepFailedData{Code: CodeModelError, Message: msg, StepRef: t.step(stepIdx)})
			t.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeModelError, Message: msg, Sequence: in.Sequence, TurnID: in.TurnID})
			return t.finish(ctx, signals.TurnStatusFailed, "", msg)
		}
		resp := res.Response
		su := protocol.StepUsage(resp.Usage)
		t.usage = t.usage.Add(su)
		if resp.Text != "" {
			if t.prompts {
				t.streamRest(ctx, stepIdx, resp.Text)
			}
			t.log.emit(ctx, protocol.MessageCompleted, protocol.MessageCompletedData{FinishReason: resp.FinishReason, Message: resp.Text, StepRef: t.step(stepIdx)})
		}
		if t.byRef {
			// The step stored what it read and its answer.
			if res.Conversation != nil {
				t.conv = *res.Conversation
			}
			t.pending = nil
			t.turnMsgs++ // the model's answer
		} else {
			t.add(model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		}
		if len(resp.ToolCalls) == 0 {
			t.log.emit(ctx, protocol.StepCompleted, protocol.StepCompletedData{FinishReason: resp.FinishReason, Usage: &su, StepRef: t.step(stepIdx)})
			if t.prompts && len(t.steering) > 0 && stepIdx+1 < cfg.MaxSteps {
				// A message steered while the model answered: it reads it
				// in another step of this turn.
				t.readSteering(ctx)
				continue
			}
			t.closing = true
			t.log.emit(ctx, protocol.TurnCompleted, t.ref())
			return t.finish(ctx, signals.TurnStatusCompleted, resp.Text, "")
		}
		actions := make([]protocol.ToolCallAction, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			actions[i] = toolCallAction(c)
		}
		t.log.emit(ctx, protocol.ActionsRequested, protocol.ActionsRequestedData{Actions: actions, StepRef: t.step(stepIdx)})
		results := t.runCalls(ctx, session, stepIdx, res.Plans)
		t.add(model.Message{Role: model.RoleTool, ToolResults: results})
		if ctx.Err() != nil {
			return t.cancelled(ctx)
		}
		t.log.emit(ctx, protocol.StepCompleted, protocol.StepCompletedData{FinishReason: resp.FinishReason, Usage: &su, StepRef: t.step(stepIdx)})
		if t.prompts {
			t.readSteering(ctx)
		}
	}
}

// CodeResolution is the turn.failed code of a tool resolver failure.
const CodeResolution = "TOOL_RESOLUTION_FAILED"

func (t *turn) resolutionFailed(ctx workflow.Context, err error) (TurnOutput, error) {
	if ctx.Err() != nil {
		return t.cancelled(ctx)
	}
	msg := errorMessage(err)
	t.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeResolution, Message: msg, Sequence: t.in.Sequence, TurnID: t.in.TurnID})
	return t.finish(ctx, signals.TurnStatusFailed, "", msg)
}

// resolveTools runs the resolvers of one scope (recorded in history).
func resolveTools(ctx workflow.Context, in activities.ResolveInput) ([]activities.DynamicTool, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrTypeResolve}},
	})
	var out activities.ResolveOutput
	err := workflow.ExecuteLocalActivity(lctx, activities.ResolveToolsName, in).Get(ctx, &out)
	return out.Tools, err
}

// mergeDynamic joins the scopes' tools; one name from two resolvers is an error.
func mergeDynamic(sets ...[]activities.DynamicTool) ([]activities.DynamicTool, error) {
	var out []activities.DynamicTool
	owner := map[string]string{}
	for _, set := range sets {
		for _, d := range set {
			if prev, dup := owner[d.Name]; dup {
				return nil, fmt.Errorf("resolvers %q and %q both return a tool named %q; tool names must be unique, rename one", prev, d.Resolver, d.Name)
			}
			owner[d.Name] = d.Resolver
			out = append(out, d)
		}
	}
	return out, nil
}

func toolCallAction(c model.ToolCall) protocol.ToolCallAction {
	input := c.Input
	if !isJSONObject(input) {
		// The wire shape requires an object; keep what the model sent visible.
		input = mustJSON(map[string]string{"$raw": string(c.Input)})
	}
	return protocol.ToolCallAction{CallID: c.ID, Input: input, Kind: "tool-call", ToolName: c.Name}
}

func runModelStep(ctx workflow.Context, cfg Config, in activities.ModelStepInput) (activities.ModelStepOutput, error) {
	var out activities.ModelStepOutput
	err := modelActivity(ctx, cfg, activities.ModelStepName, in).Get(ctx, &out)
	return out, err
}

// modelActivity runs an activity that calls the model (a step, a
// compaction) as the agent runs model steps: local or regular, with the
// model's timeout and retries.
func modelActivity(ctx workflow.Context, cfg Config, name string, in any) workflow.Future {
	if cfg.LocalModel {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: cfg.ModelTimeout, RetryPolicy: cfg.modelRetry(),
		}), name, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: cfg.ModelTimeout, RetryPolicy: cfg.modelRetry(),
	}), name, in)
}

func executeTool(ctx workflow.Context, p activities.CallPlan, in activities.ExecuteToolInput) workflow.Future {
	retry := &temporal.RetryPolicy{
		InitialInterval:        p.Retry.InitialInterval,
		BackoffCoefficient:     p.Retry.BackoffCoefficient,
		MaximumInterval:        p.Retry.MaximumInterval,
		MaximumAttempts:        p.Retry.MaximumAttempts,
		NonRetryableErrorTypes: []string{activities.ErrTypeBadConfig},
	}
	if p.Local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: p.Timeout, RetryPolicy: retry})
		return workflow.ExecuteLocalActivity(lctx, activities.ExecuteToolName, in)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "tool/" + in.CallID,
		StartToCloseTimeout: p.Timeout,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		RetryPolicy:         retry,
	})
	return workflow.ExecuteActivity(actx, activities.ExecuteToolName, in)
}

func (t *turn) emitResult(ctx workflow.Context, stepIdx int, call model.ToolCall, out activities.ToolOutcome) {
	outcome := out.Status
	if out.Error != nil {
		outcome = out.Error.Code
	}
	countToolCall(ctx, call.Name, outcome)
	t.log.emit(ctx, protocol.ActionResult, protocol.ActionResultData{
		Error: out.Error,
		Result: protocol.ToolResultAction{
			CallID: call.ID, Kind: "tool-result", Output: out.Output, ToolName: call.Name,
			IsError: out.Status != protocol.StatusCompleted,
		},
		Status:  out.Status,
		StepRef: t.step(stepIdx),
	})
}

// activityFailure turns a failed tool activity (retries exhausted, timeout,
// cancellation) into the result the model sees.
func activityFailure(tool string, err error) activities.ToolOutcome {
	var timeoutErr *temporal.TimeoutError
	var canceledErr *temporal.CanceledError
	switch {
	case errors.As(err, &timeoutErr):
		return activities.FailedOutcome(protocol.CodeToolTimeout, fmt.Sprintf("tool %s timed out (%s)", tool, timeoutErr.TimeoutType()))
	case errors.As(err, &canceledErr):
		return activities.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled", tool))
	}
	return activities.FailedOutcome(protocol.CodeToolExecution, errorMessage(err))
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
