package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// A call to a working child joins its turn (changeSubagentJoin;
// docs/subagents.md), as eve's subagents/index.mdx says: "A call with the
// taskId of a child that is still working joins the child's current turn,
// and that turn's final reply settles both calls."
//
//   - The parent turn runs the call at once instead of queueing it behind
//     the task's current call (taskState.joined): it signals the child its
//     message as any call does and waits for its reply. Stopping the task
//     stops every call it serves.
//   - The child session offers the message to its running turn as a
//     steering message from the call's caller (the session's steering
//     path, in order: session_order.go). A turn that takes it reads it in
//     its next step, and its final reply answers every call it read. One
//     that ends first leaves it to a turn of its own, which answers it.

// joinCall lets a call by taskId join the working call of a subagent's
// task; false: it queues behind it, as before the change.
func (t *turn) joinCall(ctx workflow.Context, ts *taskState, call *taskCall) bool {
	if ts.Kind != taskKindAgent || !t.changeOn(ctx, changeSubagentJoin) {
		return false
	}
	call.joining = true
	ts.joined = append(ts.joined, call)
	return true
}

// endCall ends one call of ts that settled: a joined call just leaves; the
// current call hands the task to the first joined call still working, or
// the task goes on as before (nextCall).
func (t *turn) endCall(ts *taskState, call *taskCall, status string) {
	if i := slices.Index(ts.joined, call); i >= 0 {
		ts.joined = slices.Delete(ts.joined, i, i+1)
		return
	}
	if ts.current == call && len(ts.joined) > 0 {
		next := ts.joined[0]
		ts.joined = ts.joined[1:]
		ts.current, ts.CallID = next, next.c.plan.Call.ID
		return
	}
	t.nextCall(ts, status)
}

// joinTurn offers a parent's message to the running turn, which reads it
// as a steering message; false: no turn runs (or the session reads
// messages in the old order), and the message waits for a turn of its own.
func (s *session) joinTurn(ctx workflow.Context, m queuedMessage) bool {
	if s.active == nil || !s.ordered || !s.changeOn(ctx, changeSubagentJoin) {
		return false
	}
	p := &pendingMessage{queuedMessage: m, policy: signals.TurnPolicySteer}
	s.pending = append(s.pending, p)
	s.joins = append(s.joins, p)
	s.pump(ctx)
	return true
}

// replyJoined answers, when a turn ends, the joined messages it read with
// its outcome; those it left were queued, with their ReplyTo, for turns of
// their own.
func (s *session) replyJoined(ctx workflow.Context, seq int, o signals.TurnOutcome) {
	var keep []*pendingMessage
	for _, p := range s.joins {
		switch {
		case !p.decided:
			keep = append(keep, p)
		case p.Sequence == seq && p.ReplyTo != nil:
			s.replyToParent(ctx, p.ReplyTo, o)
		}
	}
	s.joins = keep
}
