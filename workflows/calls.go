package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
)

// How one call proceeds after the gate.
const (
	gateRun     = iota // execute now
	gateAsk            // wait for an approval
	gateAnswer         // a client tool: wait for the answer
	gateSettled        // settled already (unknown tool, bad input, denied)
)

// runCalls gates every call (approval policies, client tools), asks people
// in one input.requested, runs what may run concurrently, and emits
// action.result as each call settles. Results keep the calls' order.
func (t *turn) runCalls(ctx workflow.Context, session auth.Session, stepIdx int, plans []activities.CallPlan) []model.ToolResult {
	n := len(plans)
	outcomes := make([]activities.ToolOutcome, n)
	gates := make([]int, n)
	reqs := make([]*openRequest, n)
	statuses := t.evaluatePolicies(ctx, session, plans)
	t.now = workflow.Now(ctx)

	var asked []protocol.InputRequest
	for i, p := range plans {
		switch {
		case !p.Known:
			gates[i] = gateSettled
			outcomes[i] = activities.FailedOutcome(protocol.CodeToolNotFound,
				fmt.Sprintf("there is no tool named %q; call one of the tools you were given", p.Call.Name))
		case p.InputError != "":
			gates[i] = gateSettled
			outcomes[i] = activities.FailedOutcome(protocol.CodeToolInputInvalid, p.InputError)
		case p.Kind == activities.KindClient:
			gates[i] = gateAnswer
			reqs[i] = t.newQuestionRequest(p, stepIdx)
			asked = append(asked, reqs[i].req)
		default:
			st := approval.Decide(p.Approval, slices.Contains(t.approved, p.Call.Name), statuses[i])
			switch st.Type {
			case approval.Denied:
				gates[i] = gateSettled
				outcomes[i] = denied(p.Call.Name, st.Reason, false)
			case approval.UserApproval:
				gates[i] = gateAsk
				reqs[i] = t.newApprovalRequest(p, stepIdx, st.Reason)
				asked = append(asked, reqs[i].req)
			default:
				gates[i] = gateRun
			}
		}
	}
	for i, p := range plans {
		if gates[i] == gateSettled {
			t.emitResult(ctx, stepIdx, p.Call, outcomes[i])
		}
	}
	if len(asked) > 0 {
		for _, r := range asked {
			countInputsOpened(ctx, r.Kind, 1)
		}
		t.log.emit(ctx, protocol.InputRequested, protocol.InputRequestedData{Requests: asked, StepRef: t.step(stepIdx)})
		t.park(ctx)
	}

	done := 0
	for i, p := range plans {
		if gates[i] == gateSettled {
			done++
			continue
		}
		i, p := i, p
		workflow.Go(ctx, func(ctx workflow.Context) {
			outcomes[i] = t.runCall(ctx, session, p, gates[i], reqs[i])
			t.emitResult(ctx, stepIdx, p.Call, outcomes[i])
			done++
		})
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if delegated := countDelegated(plans, gates); delegated > 0 {
		// Only jobs left: say so once, so clients know the turn resumes on its own.
		_ = workflow.Await(dctx, func() bool { return done == n || (done+t.delegatedOpen == n && len(t.openRequests()) == 0) })
		if done < n && ctx.Err() == nil {
			var waiting []string
			for i, p := range plans {
				if p.Kind == activities.KindDelegated && gates[i] != gateSettled && !slices.Contains(waiting, p.Call.Name) {
					waiting = append(waiting, p.Call.Name)
				}
			}
			setStatus(ctx, t.cfg, t.in.SessionID, StatusWaitingTasks, waiting)
			t.log.emit(ctx, protocol.TurnWaiting, protocol.TurnWaitingData{On: "tasks", Sequence: t.in.Sequence, TurnID: t.in.TurnID, Usage: t.usagePtr()})
		}
	}
	_ = workflow.Await(dctx, func() bool { return done == n })

	results := make([]model.ToolResult, n)
	for i, p := range plans {
		results[i] = model.ToolResult{CallID: p.Call.ID, Name: p.Call.Name, Output: outcomes[i].Output, IsError: outcomes[i].Status != protocol.StatusCompleted}
	}
	return results
}

// evaluatePolicies runs the custom policies of a step concurrently, each in
// an activity. A failure or timeout leaves an invalid status, which
// approval.Decide fails closed: a person is asked.
func (t *turn) evaluatePolicies(ctx workflow.Context, session auth.Session, plans []activities.CallPlan) []approval.Status {
	out := make([]approval.Status, len(plans))
	futures := make([]workflow.Future, len(plans))
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: activities.PolicyTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	for i, p := range plans {
		if !p.Known || p.InputError != "" || p.Approval != approval.KindCustom {
			continue
		}
		futures[i] = workflow.ExecuteLocalActivity(lctx, activities.EvaluateApprovalName, activities.ApprovalInput{Context: approval.Context{
			Session: session, ToolName: p.Call.Name, ToolInput: p.Call.Input, CallID: p.Call.ID,
			ApprovedTools: append([]string{}, t.approved...),
		}, Dynamic: t.dynamicFor(p.Call.Name)})
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

// runCall waits for a person where needed, then executes.
func (t *turn) runCall(ctx workflow.Context, session auth.Session, p activities.CallPlan, gate int, r *openRequest) activities.ToolOutcome {
	if r != nil {
		if err := workflow.Await(ctx, func() bool { return r.settled }); err != nil {
			t.cancelRequest(ctx, r)
			return activities.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled before anyone answered", p.Call.Name))
		}
		if r.withdrawn {
			return withdrawnOutcome(p, r)
		}
		if gate == gateAnswer {
			return activities.ToolOutcome{Status: protocol.StatusCompleted, Output: r.output}
		}
		if r.res.Outcome != protocol.OutcomeApproved {
			return denied(p.Call.Name, r.reason, true)
		}
	}
	if ctx.Err() != nil {
		return activities.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled", p.Call.Name))
	}
	if p.Kind == activities.KindDelegated {
		return t.runDelegated(ctx, session, p)
	}
	in := activities.ExecuteToolInput{Session: session, TurnID: t.in.TurnID, CallID: p.Call.ID, ToolName: p.Call.Name, Input: p.Call.Input, Dynamic: t.dynamicFor(p.Call.Name)}
	var out activities.ToolOutcome
	if err := executeTool(ctx, p, in).Get(ctx, &out); err != nil {
		return activityFailure(p.Call.Name, err)
	}
	return out
}

// cancelRequest settles an unanswered request when the turn is cancelled.
func (t *turn) cancelRequest(ctx workflow.Context, r *openRequest) {
	if r.settled {
		return
	}
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeCancelled, RequestID: r.req.RequestID}
	r.settled, r.res = true, res
	t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: []protocol.InputResolution{res}, StepRef: t.step(r.stepIdx)})
}

// denied is the result the model sees for a rejected call: never a success.
func denied(tool, reason string, byPerson bool) activities.ToolOutcome {
	msg := fmt.Sprintf("The call to %s was denied", tool)
	if byPerson {
		msg += " by the user"
	} else {
		msg += " by policy"
	}
	if reason != "" {
		msg += ": " + reason
	}
	msg += ". The tool did not run."
	out, _ := json.Marshal(map[string]string{"error": msg, "code": protocol.CodeToolDenied, "reason": reason})
	return activities.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeToolDenied, Message: msg}}
}

func countDelegated(plans []activities.CallPlan, gates []int) int {
	n := 0
	for i, p := range plans {
		if p.Kind == activities.KindDelegated && gates[i] != gateSettled {
			n++
		}
	}
	return n
}

// dynamicFor returns the resolved tool a call names, if any, so the worker
// that runs it can find it.
func (t *turn) dynamicFor(name string) []activities.DynamicTool {
	for _, d := range t.dynamic {
		if d.Name == name {
			return []activities.DynamicTool{d}
		}
	}
	return nil
}
