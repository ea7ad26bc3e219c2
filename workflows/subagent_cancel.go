package workflows

import (
	"slices"
	"sort"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Stopping a subagent's call (changeSubagentCancel; docs/subagents.md), as
// eve does: eve__task_cancel of the call (or the task cancel API, or the
// calling turn cancelled or failed) cancels the child's current turn and
// keeps its conversation, so a later call by taskId continues it.
//
//   - The parent turn withdraws the requests the call's child proxied to it
//     that nobody settled (input.resolved, outcome cancelled, eve's outcome
//     for a withdrawn request), so none stays open on the root; a middle
//     turn relays that resolution up as any other.
//   - It signals the child session eve.agent.cancel (signals.AgentCancel):
//     a SignalExternalWorkflow command, committed with the workflow task
//     that saw the call stop, so a retried task sends it once. The child
//     cancels the turn that reads the call's message, through the same
//     path as the session cancel API, or drops the message if it still
//     waits in the queue; a repeat, or a cancel of a turn that ended,
//     changes nothing.
//   - A child turn cancelled some other way relays its own resolutions of
//     the proxied requests (questions too), which the parent records.

// stopChild stops the child's work on a call that was cancelled (ctx is
// the call's, cancelled).
func (t *turn) stopChild(ctx workflow.Context, callID, childID, deliveryID string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if !t.changeOn(dctx, changeSubagentCancel) {
		return
	}
	t.withdrawRelayed(dctx, callID)
	// The turn does not end before the signal is sent (drainRelays): a
	// workflow that completes drops its pending signals.
	t.stopping++
	err := workflow.SignalExternalWorkflow(dctx, childID, "", signals.SignalAgentCancel,
		signals.AgentCancel{DeliveryID: deliveryID, CallID: callID}).Get(dctx, nil)
	t.stopping--
	if err != nil {
		workflow.GetLogger(ctx).Info("the subagent's session is gone; nothing to cancel", "child", childID, "error", err)
	}
}

// withdrawRelayed resolves, cancelled, the requests the call's child
// proxied to this turn that are still open, in the order they came.
func (t *turn) withdrawRelayed(ctx workflow.Context, callID string) {
	var open []*relayed
	ids := map[*relayed]string{}
	for id, r := range t.relays {
		if r.call == callID && !r.retired {
			open = append(open, r)
			ids[r] = id
		}
	}
	if len(open) == 0 {
		return
	}
	sort.Slice(open, func(i, j int) bool { return open[i].n < open[j].n })
	res := make([]protocol.InputResolution, len(open))
	for i, r := range open {
		r.retired = true
		res[i] = protocol.InputResolution{Kind: r.kind, Outcome: protocol.OutcomeCancelled, RequestID: ids[r]}
	}
	t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: res, StepRef: t.step(t.stepIdx)})
	if t.typedOn {
		t.tellInputs(ctx) // typed.go
	}
}

// takeChildResolution reports whether this turn records a child's
// resolution of a proxied request other than a tool approval's (a question
// the child withdrew: its call or turn stopped): before the change only
// tool approvals were taken, and a question stayed open here.
func (t *turn) takeChildResolution(ctx workflow.Context, res protocol.InputResolution) bool {
	if res.Outcome == protocol.OutcomeInvalid {
		return false
	}
	return t.changeOn(ctx, changeSubagentCancel)
}

// agentCancel stops the child session's work on a parent's call
// (signals.SignalAgentCancel): the turn that reads the call's message (or
// that the message is joining) is cancelled as the session cancel API
// cancels it, or the message, still queued, is dropped.
func (s *session) agentCancel(ctx workflow.Context, m signals.AgentCancel) {
	seq, ok := s.st.Deliveries[m.DeliveryID]
	p := s.pendingOf(m.DeliveryID) // a message that joins the running turn (subagent_join.go)
	if !ok && p == nil {
		return
	}
	if !s.changeOn(ctx, changeSubagentCancel) {
		return
	}
	if p != nil && s.active != nil {
		// Offered to the running turn, not yet taken: it never gets a turn
		// of its own (as a reset drops it), and the turn it joins stops.
		p.dropped, p.Sequence = true, s.active.Sequence
		if s.cancelTurn != nil {
			s.cancelTurn()
		}
		return
	}
	if s.active != nil && s.active.Sequence == seq {
		if s.cancelTurn != nil {
			s.cancelTurn()
		}
		return
	}
	if i := slices.IndexFunc(s.st.Queue, func(q queuedMessage) bool { return q.DeliveryID == m.DeliveryID }); i >= 0 {
		s.st.Queue = slices.Delete(s.st.Queue, i, i+1)
	}
}
