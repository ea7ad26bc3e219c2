package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
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
func newActionState(p work.CallPlan, in work.ExecuteToolInput) *actionState {
	return &actionState{outputSchema: p.OutputSchema, maxOutputBytes: p.MaxOutputBytes, ActionState: signals.ActionState{
		ActionID: in.ActionID, Tool: p.Call.Name, CallID: p.Call.ID, State: signals.ActionPending, Deadline: in.Deadline,
	}}
}

// registerActionHandlers installs the action-state query and the settle
// Update for the actions find knows. The rules are the delegated-action
// module's (signals.ActionState); the validator answers 404/409/410/422
// without recording anything.
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
				return signals.SettleDecision{}, settleError(signals.UnknownAction(req.ActionID))
			}
			return a.Settle(req), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req signals.SettleAction) error {
			a := find(req.ActionID)
			if a == nil {
				return settleError(signals.UnknownAction(req.ActionID))
			}
			return settleError(a.CheckSettle(req, a.checkOutput))
		}})
}

// settleError carries a refusal's type (which the API maps to its status)
// as an application error.
func settleError(err error) error {
	var se *signals.SettleError
	if errors.As(err, &se) {
		return temporal.NewApplicationError(se.Message, se.Type)
	}
	return err
}

// checkOutput holds a job's output to the tool's output limit and schema.
func (a *actionState) checkOutput(out json.RawMessage) error {
	if err := work.CheckOutputSize(a.Tool, out, a.maxOutputBytes); err != nil {
		return err
	}
	if len(a.outputSchema) == 0 {
		return nil
	}
	if a.schema == nil {
		s, err := schema.Compile(a.Tool+"/output", a.outputSchema)
		if err != nil {
			return errors.New("the tool's output schema does not compile: " + err.Error())
		}
		a.schema = s
	}
	if err := a.schema.Validate(out); err != nil {
		return fmt.Errorf("output breaks the %s output schema: %v", a.Tool, err)
	}
	return nil
}

// awaitAction starts a delegated call's activity and waits for the job's
// completion, the deadline, or cancellation, whichever comes first (the
// delegated branch of execute).
func awaitAction(ctx workflow.Context, a *actionState, p work.CallPlan, in work.ExecuteToolInput) work.ToolOutcome {
	actx, cancelActivity := workflow.WithCancel(ctx)
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		ActivityID:          signals.ToolActivityID(p.Call.ID),
		StartToCloseTimeout: p.Deadline + time.Minute,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		// Starting the job is retried by the job's own idempotency (action
		// id), not by re-running the activity after it went pending.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	fut := workflow.ExecuteActivity(actx, work.ExecuteToolName, in)

	tctx, cancelTimer := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, p.Deadline)
	var (
		outcome    work.ToolOutcome
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
					outcome = work.OutcomeOf(a.End(signals.ActionCancelled))
					return
				}
				outcome = activityFailure(p.Call.Name, err)
				a.State = signals.ActionFailed
				return
			}
			outcome = work.OutcomeOf(a.Observe(raw, a.checkOutput))
		})
		if !timerFired {
			sel.AddFuture(timer, func(f workflow.Future) {
				timerFired = true
				if f.Get(ctx, nil) != nil {
					return // timer cancelled with the turn; the ctx case handles it
				}
				if !a.DeadlineEnds() {
					return // a completion was accepted: wait for it
				}
				settled = true
				outcome = work.OutcomeOf(a.End(signals.ActionExpired))
			})
		}
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
			settled = true
			outcome = work.OutcomeOf(a.End(signals.ActionCancelled))
		})
		sel.Select(ctx)
	}
	cancelTimer()
	if a.Ended() {
		cancelActivity()
	}
	return outcome
}
