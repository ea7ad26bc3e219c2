package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// runningCall is a call whose tool is running, which may ask.
type runningCall struct {
	c       *pendingCall
	stepIdx int
}

// ask opens a running call's question (SignalAsk): input.requested, and the
// turn waits for input as for a client tool; QueryAsked tells the call how
// it was settled. A retried attempt asks the same request id again: the
// board has it, and the query answers it.
func (t *turn) ask(ctx workflow.Context, a signals.AskRequest) {
	rc, ok := t.running[a.CallID]
	req := a.Request
	if !ok || rc.c.done || t.board.byID[req.RequestID] != nil || !t.askPrefixOK(a.CallID, req.RequestID) ||
		strings.TrimSpace(req.Prompt) == "" {
		return // not a running call's: the call hears nothing and gives up
	}
	if !t.changeOn(ctx, changeAsk) {
		return
	}
	r := t.board.add(newAskedRequest(rc.c.plan, rc.stepIdx, req), workflow.Now(ctx))
	t.watch(ctx, r)
	t.parkFor(ctx, rc.stepIdx, []*request{r}, rc.c.taskID)
	if tools.Kind(rc.c.plan.Kind) == tools.KindWorkflow && t.changeOn(ctx, changeWorkflowAsk) {
		// A workflow tool's child asked (package tools/wfcall): it cannot
		// query the turn, so the turn signals it the settlement.
		child := signals.WorkflowToolID(workflow.GetInfo(ctx).WorkflowExecution.ID, a.CallID)
		workflow.Go(ctx, func(ctx workflow.Context) {
			if workflow.Await(ctx, func() bool { return r.state.closed() }) != nil {
				return
			}
			dctx, _ := workflow.NewDisconnectedContext(ctx)
			// A child that ended meanwhile fails the signal: nothing to tell.
			_ = workflow.SignalExternalWorkflow(dctx, child, "", signals.SignalAnswered, signals.Answered{RequestID: req.RequestID, Resolution: r.res}).Get(dctx, nil)
		})
	}
}
