package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// A session's deliveries and queue: the send Update, its validator, and
// what a message becomes (the running turn's, or a turn of its own).

func (s *session) validateSend(ctx workflow.Context, req signals.SendRequest) error {
	if s.ended {
		return temporal.NewApplicationError(fmt.Sprintf("session %s has ended: its lifetime (%s, agent.Agent.SessionLifetime) is over; start a new session", s.id, s.st.Config.SessionLifetime), signals.ErrSessionEnded)
	}
	if strings.TrimSpace(req.Message) == "" {
		return errors.New("message is empty: send the text of the user's message")
	}
	if len(req.Message) > maxMessageBytes {
		return fmt.Errorf("message is %d bytes; the limit is %d (signals.MaxMessageBytes): send large content as a file or a tool's input instead", len(req.Message), maxMessageBytes)
	}
	if p := req.TurnPolicy; p != "" && p != signals.TurnPolicySteer && p != signals.TurnPolicyQueue {
		return fmt.Errorf("turnPolicy %q: expected either %q or %q", p, signals.TurnPolicyQueue, signals.TurnPolicySteer)
	}
	if _, dup := s.st.Deliveries[req.DeliveryID]; !dup && s.pendingOf(req.DeliveryID) == nil && s.waiting() >= signals.MaxQueuedMessages {
		return temporal.NewApplicationError(fmt.Sprintf("session %s has %d messages waiting for their turn (the limit, signals.MaxQueuedMessages); send again when the running turn ends", s.id, s.waiting()), signals.ErrSessionBusy)
	}
	return nil
}

// acceptFirst queues the message a session was started with
// (changeFirstMessage): its starter checked it as validateSend would, and
// nothing else is queued yet, so it is turn 0 in either order mode.
func (s *session) acceptFirst(req signals.SendRequest) {
	if req.DeliveryID == "" {
		req.DeliveryID = "dlv_" + s.id
	}
	s.enqueue(queuedMessage{Message: req.Message, DeliveryID: req.DeliveryID, Caller: req.Caller, OutputSchema: req.OutputSchema, RelayTo: req.RelayTo})
}

func (s *session) send(ctx workflow.Context, req signals.SendRequest) (signals.SendResult, error) {
	dlv := req.DeliveryID
	if dlv == "" {
		dlv = "dlv_" + workflow.GetCurrentUpdateInfo(ctx).ID
	}
	if s.ordered {
		return s.sendInOrder(ctx, req, dlv)
	}
	seq, dup := s.st.Deliveries[dlv]
	offered := false
	if !dup && s.active != nil && len(req.OutputSchema) == 0 {
		// Offered to the running turn: a waiting sender gets the outcome of
		// the turn that reads it (this one, or its own if it is re-queued).
		offered = s.offerToTurn(ctx, req, dlv)
		seq = s.active.Sequence
	}
	if !dup && !offered {
		seq = s.st.NextSeq
		s.st.NextSeq++
		s.st.Deliveries[dlv] = seq
		s.st.Queue = append(s.st.Queue, queuedMessage{Sequence: seq, Message: req.Message, DeliveryID: dlv, Caller: req.Caller, OutputSchema: req.OutputSchema, RelayTo: req.RelayTo})
	}
	res := signals.SendResult{SessionID: s.id, DeliveryID: dlv, TurnID: signals.TurnID(seq), Sequence: seq}
	if !req.Wait {
		return res, nil
	}
	if dup {
		return res, fmt.Errorf("delivery %s was already accepted; read its outcome from the event stream", dlv)
	}
	defer s.wait(dlv)()
	return s.awaitOutcome(ctx, res)
}

// sendInOrder is send in a session that reads its messages in the order
// it accepted them (changeOrder): the answer waits until the message's
// turn is decided (session_order.go), so its turnId is the turn that
// reads it.
func (s *session) sendInOrder(ctx workflow.Context, req signals.SendRequest, dlv string) (signals.SendResult, error) {
	seq, dup := s.st.Deliveries[dlv]
	p := s.pendingOf(dlv)
	dup = dup || p != nil // a re-sent delivery joins the first
	if req.Wait && !dup {
		// Before the decision: a turn that decides as it ends finds it.
		defer s.wait(dlv)()
	}
	if !dup {
		p, seq = s.acceptInOrder(ctx, req, dlv)
	}
	if p != nil {
		if err := workflow.Await(ctx, func() bool { return p.decided }); err != nil {
			return signals.SendResult{}, err
		}
		seq = p.Sequence
	}
	res := signals.SendResult{SessionID: s.id, DeliveryID: dlv, TurnID: signals.TurnID(seq), Sequence: seq}
	if !req.Wait {
		return res, nil
	}
	if dup {
		return res, fmt.Errorf("delivery %s was already accepted; read its outcome from the event stream", dlv)
	}
	return s.awaitOutcome(ctx, res)
}

// wait registers a sender waiting for its delivery's outcome; the
// function it returns forgets it.
func (s *session) wait(dlv string) func() {
	s.waiters[dlv]++
	return func() {
		if s.waiters[dlv]--; s.waiters[dlv] == 0 {
			delete(s.waiters, dlv)
			delete(s.outcomes, dlv)
		}
	}
}

// awaitOutcome waits for the outcome of the turn that reads a delivery
// (or for it to park).
func (s *session) awaitOutcome(ctx workflow.Context, res signals.SendResult) (signals.SendResult, error) {
	if err := workflow.Await(ctx, func() bool { return s.outcomes[res.DeliveryID] != nil }); err != nil {
		return res, err
	}
	res.Outcome = s.outcomes[res.DeliveryID]
	return res, nil
}
