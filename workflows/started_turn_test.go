package workflows_test

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A session runs each turn as a child workflow: its start commits with
// the session's workflow task and its result with the turn's final one, so
// nothing the two tell each other can be taken back by a failed task
// (docs/architecture.md, "Exactly once"). The child's result is the turn's
// end: its events, in order, then session.waiting.
func TestSessionRunsTurnsAsChildren(t *testing.T) {
	h := newHarness(t, nil)
	var sent *update[signals.SendResult]
	h.at(time.Minute, func() { sent = h.send(signals.SendRequest{Message: "refund ch_1 5", Wait: true}) })
	var open []protocol.InputRequest
	h.at(2*time.Minute, func() {
		open = h.parkedOn(turnWorkflowID(0), "input")
		h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: open[0].RequestID, OptionID: "approve"})
	})
	h.at(3*time.Minute, func() { h.CancelWorkflow() })
	if err := h.runSession(s1); !temporal.IsCanceledError(err) {
		t.Fatalf("session ended with %v", err)
	}
	if len(h.turns) != 1 || h.turns[0].Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("child turns %+v", h.turns)
	}
	if !sent.completed || sent.result.Outcome == nil {
		t.Fatalf("send %+v", sent)
	}
	evs := h.sessionEvents(0).Events
	if got := join(evs); !strings.Contains(got, "input.requested turn.waiting approval.settled input.resolved decision.recorded action.result") || !strings.HasSuffix(got, "turn.completed session.waiting") {
		t.Fatalf("events %s", got)
	}
}
