package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TurnInput starts one turn.
type TurnInput struct {
	SessionID   string          `json:"sessionId"`
	TurnID      string          `json:"turnId"`
	Sequence    int             `json:"sequence"`
	Auth        auth.Auth       `json:"auth"`
	Message     string          `json:"message"`
	History     []model.Message `json:"history"`
	DeliveryIDs []string        `json:"deliveryIds,omitempty"`
	// EventBase is the global index of the turn's first event.
	EventBase int    `json:"eventBase"`
	Config    Config `json:"config"`
}

// TurnOutput is what the session keeps of a finished turn.
type TurnOutput struct {
	Events   []protocol.Event    `json:"events"`
	Messages []model.Message     `json:"messages"`
	Outcome  signals.TurnOutcome `json:"outcome"`
	Usage    protocol.TokenUsage `json:"usage"`
}

// Error codes of turn.failed.
const (
	CodeMaxSteps   = "MAX_STEPS_EXCEEDED"
	CodeModelError = "MODEL_ERROR"
)

type turn struct {
	in     TurnInput
	events []protocol.Event
	msgs   []model.Message // the whole conversation, history first
	newMsg []model.Message // what this turn adds
	usage  protocol.TokenUsage
}

func (t *turn) emit(ctx workflow.Context, typ string, data any) {
	now := workflow.Now(ctx)
	idx := t.in.EventBase + len(t.events)
	t.events = append(t.events, protocol.NewEvent(typ, data, protocol.EventID(now, t.in.SessionID, idx), now, t.in.DeliveryIDs))
}

func (t *turn) add(m model.Message) {
	t.msgs = append(t.msgs, m)
	t.newMsg = append(t.newMsg, m)
}

func (t *turn) ref() protocol.TurnRef {
	return protocol.TurnRef{Sequence: t.in.Sequence, TurnID: t.in.TurnID}
}

func (t *turn) step(i int) protocol.StepRef {
	return protocol.StepRef{Sequence: t.in.Sequence, StepIndex: i, TurnID: t.in.TurnID}
}

func (t *turn) output(status, reply, errMsg string) TurnOutput {
	return TurnOutput{
		Events:   t.events,
		Messages: t.newMsg,
		Usage:    t.usage,
		Outcome: signals.TurnOutcome{
			Status: status, Reply: reply, Error: errMsg,
			FirstEvent: t.in.EventBase, LastEvent: t.in.EventBase + len(t.events) - 1,
		},
	}
}

// Turn runs the step loop: model → tools (concurrently) → model … until
// the model answers without tool calls or MaxSteps is reached. Failures of
// the model or of tools become events, never a failed workflow.
func (r *Runtime) Turn(ctx workflow.Context, in TurnInput) (TurnOutput, error) {
	cfg := in.Config.WithDefaults()
	t := &turn{in: in, msgs: append([]model.Message(nil), in.History...)}
	if err := workflow.SetQueryHandler(ctx, signals.QueryTurnEvents, func(from int) ([]protocol.Event, error) {
		if from < 0 || from > len(t.events) {
			return nil, fmt.Errorf("event index %d out of range [0,%d]", from, len(t.events))
		}
		return t.events[from:], nil
	}); err != nil {
		return TurnOutput{}, err
	}

	t.emit(ctx, protocol.TurnStarted, t.ref())
	t.emit(ctx, protocol.MessageReceived, protocol.MessageReceivedData{Message: in.Message, Sequence: in.Sequence, TurnID: in.TurnID})
	t.add(model.Message{Role: model.RoleUser, Text: in.Message})

	session := auth.Session{ID: in.SessionID, Auth: in.Auth}
	for stepIdx := 0; ; stepIdx++ {
		if stepIdx >= cfg.MaxSteps {
			msg := fmt.Sprintf("the turn stopped after %d model steps without a final answer; the model kept calling tools. Raise the agent's max steps (EVE_MAX_STEPS) if this is expected.", cfg.MaxSteps)
			t.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeMaxSteps, Message: msg, Sequence: in.Sequence, TurnID: in.TurnID})
			return t.output(signals.TurnStatusFailed, "", msg), nil
		}
		t.emit(ctx, protocol.StepStarted, protocol.StepStartedData{ModelID: cfg.ModelID, StepRef: t.step(stepIdx)})
		res, err := runModelStep(ctx, cfg, activities.ModelStepInput{SessionID: in.SessionID, TurnID: in.TurnID, StepIndex: stepIdx, Messages: t.msgs})
		if err != nil {
			msg := errorMessage(err)
			t.emit(ctx, protocol.StepFailed, protocol.StepFailedData{Code: CodeModelError, Message: msg, StepRef: t.step(stepIdx)})
			t.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeModelError, Message: msg, Sequence: in.Sequence, TurnID: in.TurnID})
			return t.output(signals.TurnStatusFailed, "", msg), nil
		}
		resp := res.Response
		su := protocol.StepUsage(resp.Usage)
		t.usage = t.usage.Add(su)
		if resp.Text != "" {
			t.emit(ctx, protocol.MessageCompleted, protocol.MessageCompletedData{FinishReason: resp.FinishReason, Message: resp.Text, StepRef: t.step(stepIdx)})
		}
		t.add(model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			t.emit(ctx, protocol.StepCompleted, protocol.StepCompletedData{FinishReason: resp.FinishReason, Usage: &su, StepRef: t.step(stepIdx)})
			t.emit(ctx, protocol.TurnCompleted, t.ref())
			return t.output(signals.TurnStatusCompleted, resp.Text, ""), nil
		}
		actions := make([]protocol.ToolCallAction, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			actions[i] = toolCallAction(c)
		}
		t.emit(ctx, protocol.ActionsRequested, protocol.ActionsRequestedData{Actions: actions, StepRef: t.step(stepIdx)})
		results := t.runCalls(ctx, session, stepIdx, res.Plans)
		t.add(model.Message{Role: model.RoleTool, ToolResults: results})
		t.emit(ctx, protocol.StepCompleted, protocol.StepCompletedData{FinishReason: resp.FinishReason, Usage: &su, StepRef: t.step(stepIdx)})
	}
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
	var f workflow.Future
	if cfg.LocalModel {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: cfg.ModelTimeout,
			RetryPolicy:         cfg.modelRetry(),
		})
		f = workflow.ExecuteLocalActivity(lctx, activities.ModelStepName, in)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: cfg.ModelTimeout,
			RetryPolicy:         cfg.modelRetry(),
		})
		f = workflow.ExecuteActivity(actx, activities.ModelStepName, in)
	}
	err := f.Get(ctx, &out)
	return out, err
}

// runCalls runs every call concurrently and emits action.result as each
// settles; the results keep the calls' order for the model.
func (t *turn) runCalls(ctx workflow.Context, session auth.Session, stepIdx int, plans []activities.CallPlan) []model.ToolResult {
	outcomes := make([]activities.ToolOutcome, len(plans))
	settled := make([]bool, len(plans))
	sel := workflow.NewSelector(ctx)
	pending := 0
	for i, p := range plans {
		if !p.Known {
			outcomes[i] = activities.FailedOutcome(protocol.CodeToolNotFound,
				fmt.Sprintf("there is no tool named %q; call one of the tools you were given", p.Call.Name))
			settled[i] = true
			t.emitResult(ctx, stepIdx, p.Call, outcomes[i])
			continue
		}
		in := activities.ExecuteToolInput{Session: session, TurnID: t.in.TurnID, CallID: p.Call.ID, ToolName: p.Call.Name, Input: p.Call.Input}
		f := executeTool(ctx, p, in)
		pending++
		i, p := i, p
		sel.AddFuture(f, func(f workflow.Future) {
			var out activities.ToolOutcome
			if err := f.Get(ctx, &out); err != nil {
				out = activityFailure(p.Call.Name, err)
			}
			outcomes[i] = out
			settled[i] = true
			t.emitResult(ctx, stepIdx, p.Call, out)
		})
	}
	for ; pending > 0; pending-- {
		sel.Select(ctx)
	}
	results := make([]model.ToolResult, len(plans))
	for i, p := range plans {
		results[i] = model.ToolResult{CallID: p.Call.ID, Name: p.Call.Name, Output: outcomes[i].Output, IsError: outcomes[i].Status != protocol.StatusCompleted}
	}
	return results
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
	t.emit(ctx, protocol.ActionResult, protocol.ActionResultData{
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
