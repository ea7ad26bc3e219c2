package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// actionState is one delegated action in flight, in a turn or in a tools
// API execution: both settle it the same way.
type actionState struct {
	signals.ActionState
	outputSchema json.RawMessage
	schema       *schema.Schema
	// maxOutputBytes is the plan's output limit (0: not known, unchecked).
	maxOutputBytes int
}

// newActionState is the action of a delegated call whose job starts with in.
func newActionState(p activities.CallPlan, in activities.ExecuteToolInput) *actionState {
	return &actionState{outputSchema: p.OutputSchema, maxOutputBytes: p.MaxOutputBytes, ActionState: signals.ActionState{
		ActionID: in.ActionID, Tool: p.Call.Name, CallID: p.Call.ID, State: signals.ActionPending, Deadline: in.Deadline,
	}}
}

func (t *turn) registerActionHandlers(ctx workflow.Context) error {
	return registerActionHandlers(ctx, func(id string) *actionState { return t.actions[id] })
}

// registerActionHandlers installs the action-state query and the settle
// Update (whose validator answers 404/409/410/422 without recording
// anything) for the actions find knows.
func registerActionHandlers(ctx workflow.Context, find func(id string) *actionState) error {
	if err := workflow.SetQueryHandler(ctx, signals.QueryAction, func(id string) (signals.ActionState, error) {
		a := find(id)
		if a == nil {
			return signals.ActionState{}, fmt.Errorf("unknown action %q", id)
		}
		return a.ActionState, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateSettleAction,
		func(ctx workflow.Context, req signals.SettleAction) (signals.SettleDecision, error) {
			a := find(req.ActionID)
			if a == nil { // the validator refuses these; replays skip it
				return signals.SettleDecision{}, temporal.NewApplicationError(fmt.Sprintf("unknown action %q", req.ActionID), signals.ErrActionUnknown)
			}
			if a.State == signals.ActionPending {
				a.State = signals.ActionSettling
				a.Hash = signals.HashSettle(req)
			}
			if a.State == signals.ActionSettling {
				// Not yet observed: (re)complete, so a crash between this
				// update and the completion call is healed by a retry.
				return signals.SettleDecision{Decision: signals.DecisionComplete}, nil
			}
			return signals.SettleDecision{Decision: signals.DecisionDuplicate}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req signals.SettleAction) error {
			a := find(req.ActionID)
			if a == nil {
				return temporal.NewApplicationError(fmt.Sprintf("unknown action %q", req.ActionID), signals.ErrActionUnknown)
			}
			return a.check(req)
		}})
}

// check answers a completion without changing anything: 410 when the
// action ended first, 409 for a different outcome after settlement, 422
// for output larger than the tool's MaxOutputBytes or that breaks its
// output schema; nil to accept.
func (a *actionState) check(req signals.SettleAction) error {
	if (req.Error == nil) == (req.Output == nil) {
		return temporal.NewApplicationError(`send exactly one of "output" or "error"`, signals.ErrActionInvalid)
	}
	switch a.State {
	case signals.ActionExpired, signals.ActionCancelled:
		return temporal.NewApplicationError(fmt.Sprintf("action %s ended first (%s); a late completion cannot revive it", a.ActionID, a.State), signals.ErrActionGone)
	case signals.ActionPending:
	default:
		if a.Hash != signals.HashSettle(req) {
			return temporal.NewApplicationError(fmt.Sprintf("action %s already settled with a different outcome", a.ActionID), signals.ErrActionConflict)
		}
		return nil
	}
	if req.Output != nil {
		if err := activities.CheckOutputSize(a.Tool, req.Output, a.maxOutputBytes); err != nil {
			return temporal.NewApplicationError(err.Error(), signals.ErrActionInvalid)
		}
	}
	if req.Output != nil && len(a.outputSchema) > 0 {
		if a.schema == nil {
			s, err := schema.Compile(a.Tool+"/output", a.outputSchema)
			if err != nil {
				return temporal.NewApplicationError("the tool's output schema does not compile: "+err.Error(), signals.ErrActionInvalid)
			}
			a.schema = s
		}
		if err := a.schema.Validate(req.Output); err != nil {
			return temporal.NewApplicationError(fmt.Sprintf("output breaks the %s output schema: %v", a.Tool, err), signals.ErrActionInvalid)
		}
	}
	if req.Error != nil && req.Error.Message == "" {
		return temporal.NewApplicationError("error.message is required", signals.ErrActionInvalid)
	}
	return nil
}

// awaitAction starts a delegated call's activity and waits for the job's
// completion, the deadline, or cancellation, whichever comes first (the
// delegated branch of execute).
func awaitAction(ctx workflow.Context, a *actionState, p activities.CallPlan, in activities.ExecuteToolInput) activities.ToolOutcome {
	actx, cancelActivity := workflow.WithCancel(ctx)
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		ActivityID:          "tool/" + p.Call.ID,
		StartToCloseTimeout: p.Deadline + time.Minute,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		// Starting the job is retried by the job's own idempotency (action
		// id), not by re-running the activity after it went pending.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	fut := workflow.ExecuteActivity(actx, activities.ExecuteToolName, in)

	tctx, cancelTimer := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, p.Deadline)
	var (
		outcome    activities.ToolOutcome
		settled    bool
		timerFired bool
	)
	for !settled {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(f workflow.Future) {
			settled = true
			var raw json.RawMessage
			if err := f.Get(ctx, &raw); err != nil {
				if ctx.Err() != nil {
					outcome = a.end(signals.ActionCancelled)
					return
				}
				outcome = activityFailure(p.Call.Name, err)
				a.State = signals.ActionFailed
				return
			}
			outcome = a.outcome(raw)
		})
		if !timerFired {
			sel.AddFuture(timer, func(f workflow.Future) {
				timerFired = true
				if f.Get(ctx, nil) != nil {
					return // timer cancelled with the turn; the ctx case handles it
				}
				if a.State == signals.ActionSettling {
					return // a completion was accepted: wait for it
				}
				settled = true
				outcome = a.end(signals.ActionExpired)
			})
		}
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
			settled = true
			outcome = a.end(signals.ActionCancelled)
		})
		sel.Select(ctx)
	}
	cancelTimer()
	if a.State == signals.ActionExpired || a.State == signals.ActionCancelled {
		cancelActivity()
	}
	return outcome
}

// end settles an action that ended without its job: deadline or cancellation.
func (a *actionState) end(state string) activities.ToolOutcome {
	a.State = state
	if state == signals.ActionCancelled {
		return activities.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled before its job completed", a.Tool))
	}
	return activities.FailedOutcome(protocol.CodeDeadlineExceeded,
		fmt.Sprintf("deadline exceeded: the job of tool %s did not complete by %s", a.Tool, a.Deadline.UTC().Format(time.RFC3339)))
}

// outcome turns what the activity completed with into the call's outcome.
func (a *actionState) outcome(raw json.RawMessage) activities.ToolOutcome {
	r := activities.DecodeActionResult(raw)
	if r.Status == protocol.StatusFailed {
		a.State = signals.ActionFailed
		e := r.Error
		if e == nil {
			e = &protocol.ActionError{Code: protocol.CodeToolExecution, Message: "the job failed"}
		}
		if e.Code == "" {
			e.Code = protocol.CodeToolExecution
		}
		if a.Hash == "" {
			a.Hash = signals.HashSettle(signals.SettleAction{Error: e})
		}
		out, _ := json.Marshal(map[string]string{"error": e.Message, "code": e.Code})
		return activities.ToolOutcome{Status: protocol.StatusFailed, Output: out, Error: e}
	}
	// A raw task-token completion skipped the API's 422 check: check here.
	if err := a.check(signals.SettleAction{ActionID: a.ActionID, Output: r.Output}); err != nil && a.State == signals.ActionPending {
		a.State = signals.ActionFailed
		return activities.FailedOutcome(protocol.CodeToolOutputInvalid, errorMessage(err))
	}
	a.State = signals.ActionCompleted
	if a.Hash == "" {
		a.Hash = signals.HashSettle(signals.SettleAction{Output: r.Output})
	}
	return activities.ToolOutcome{Status: protocol.StatusCompleted, Output: r.Output}
}
