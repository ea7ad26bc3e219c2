package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Messages in the order the session accepted them (changeOrder; the
// mechanism is in docs/architecture.md, "Exactly once").
//
// A message accepted while a turn runs joins s.pending, in acceptance
// order. The head of s.pending goes to the turn when eve's rules let it
// (the turn's own caller; another's only to answer an approval a policy
// judges) and nothing waits in the queue, and the turn answers
// eve.turn.taken: taken, the turn reads it, and the next one is offered;
// left, it waits in the queue for a turn of its own, and so does every
// message behind it: none overtakes it. The one exception is an answer to
// the turn's open prompt, which the turn needs before it can end: it is
// offered as an answer only (TurnMessage.AnswerOnly), and the turn takes
// it only if it answers. One offer at a time, because two signals sent in
// two workflow tasks may reach the turn in either order. The send Update
// answers once its message is decided, so its turnId names the turn that
// reads it.

// pendingMessage is a message accepted while a turn runs, not yet decided.
type pendingMessage struct {
	queuedMessage
	policy string
	// offered: the offer is on its way to the turn, or the turn has it.
	offered bool
	// decided: Sequence is the turn that reads the message.
	decided bool
	// dropped: a reset dropped it, unless the turn took it already.
	dropped bool
}

// pendingOf is the undecided message of a delivery, if any.
func (s *session) pendingOf(dlv string) *pendingMessage {
	for _, p := range s.pending {
		if p.DeliveryID == dlv {
			return p
		}
	}
	return nil
}

// waiting counts the messages waiting for a turn: the queue, and (in
// order mode) those accepted while the running turn runs that it has not
// taken.
func (s *session) waiting() int { return len(s.st.Queue) + len(s.pending) }

// acceptInOrder takes a new message: while a turn runs, it joins the
// pending ones (pump decides it); otherwise it waits in the queue behind
// everything accepted before it.
func (s *session) acceptInOrder(ctx workflow.Context, req signals.SendRequest, dlv string) (p *pendingMessage, seq int) {
	m := queuedMessage{Message: req.Message, DeliveryID: dlv, Caller: req.Caller, OutputSchema: req.OutputSchema, RelayTo: req.RelayTo}
	if s.active == nil {
		return nil, s.enqueue(m)
	}
	p = &pendingMessage{queuedMessage: m, policy: req.TurnPolicy}
	s.pending = append(s.pending, p)
	s.pump(ctx)
	return p, 0
}

// enqueue gives a message the next turn of its own.
func (s *session) enqueue(m queuedMessage) int {
	m.Sequence = s.st.NextSeq
	s.st.NextSeq++
	s.st.Deliveries[m.DeliveryID] = m.Sequence
	s.st.Queue = append(s.st.Queue, m)
	return m.Sequence
}

// decide records the turn that reads a pending message.
func (s *session) decide(p *pendingMessage, seq int) {
	p.Sequence, p.decided = seq, true
	s.st.Deliveries[p.DeliveryID] = seq
}

// pump decides the pending messages from the head on: one that may not go
// to the running turn waits in the queue; the first that may is offered,
// and the rest wait for the turn's answer. A session whose turns decide
// (changeTurnDecides) offers every message but one asking for a
// structured result: the turn applies mayOffer's rules to its own
// prompts, which the session has no mirror of.
func (s *session) pump(ctx workflow.Context) {
	for len(s.pending) > 0 && !s.pending[0].offered {
		p := s.pending[0]
		behind := len(s.st.Queue) > 0 // messages accepted before it wait
		if p.dropped || len(p.OutputSchema) > 0 || s.active == nil || !s.decides && (!s.mayOffer(ctx, p.Caller, p.Message, p.policy) || (behind && !s.answersOpen(p.Message))) {
			s.pending = s.pending[1:]
			s.queue(p)
			continue
		}
		s.offer(ctx, p, behind)
		return
	}
}

// answersOpen reports whether a message answers the running turn's first
// open prompt, as the session's mirror has it (the turn decides).
func (s *session) answersOpen(message string) bool {
	if len(s.open) == 0 {
		return false
	}
	_, ok := protocol.ResolveText(s.open[0], message)
	return ok
}

// offer sends a pending message to the running turn and asks for its
// answer (eve.turn.taken); answerOnly: the turn takes it only as an answer
// to its open prompt.
func (s *session) offer(ctx workflow.Context, p *pendingMessage, answerOnly bool) {
	p.offered = true
	policy := p.policy
	if policy == "" {
		policy = signals.TurnPolicySteer
	}
	m := signals.TurnMessage{Message: p.Message, DeliveryID: p.DeliveryID, Caller: p.Caller, TurnPolicy: policy, Ack: true, AnswerOnly: answerOnly,
		Report: s.decides && s.waiters[p.DeliveryID] > 0}
	turnID := s.active.TurnID
	f := workflow.SignalExternalWorkflow(ctx, s.active.WorkflowID, "", signals.SignalTurnMessage, m)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if f.Get(ctx, nil) != nil {
			// Not delivered: the turn had ended, and never saw it.
			s.turnAnswered(ctx, signals.TurnTaken{TurnID: turnID, DeliveryID: p.DeliveryID})
		}
	})
}

// turnAnswered applies the running turn's answer to the offer out.
func (s *session) turnAnswered(ctx workflow.Context, a signals.TurnTaken) {
	if s.active == nil || a.TurnID != s.active.TurnID || len(s.pending) == 0 {
		return // a turn that ended: its result decided (settleOffers)
	}
	p := s.pending[0]
	if !p.offered || p.DeliveryID != a.DeliveryID {
		return
	}
	s.pending = s.pending[1:]
	if a.Taken {
		s.decide(p, s.active.Sequence)
		s.acked = append(s.acked, p.queuedMessage)
	} else {
		s.queue(p)
	}
	s.pump(ctx)
}

// queue decides a pending message for a turn of its own (a dropped one
// for none: it names the turn the reset cancelled).
func (s *session) queue(p *pendingMessage) {
	if p.dropped {
		s.decide(p, p.Sequence)
		return
	}
	p.Sequence = s.enqueue(p.queuedMessage)
	p.decided = true
}

// queuePending sends every pending message to the queue, in order.
func (s *session) queuePending() {
	for _, p := range s.pending {
		s.queue(p)
	}
	s.pending = nil
}

// dropPending is a reset's: messages not yet taken by the turn it cancels
// are dropped, as the queue is.
func (s *session) dropPending() {
	for _, p := range s.pending {
		p.dropped, p.Sequence = true, s.active.Sequence
	}
}

// settleOffers decides, when a turn has ended, what it left undecided: the
// offer it had not answered counts as taken if the turn read it; the
// others wait for turns of their own. Messages the turn took but did not
// read (only a turn that ended abnormally: terminated, timed out) go
// first, ahead of everything accepted after them; the queue is numbered
// again behind them, so turn numbers keep rising in the stream (those
// answers named other turns: the one case where an answer does not name
// the reader).
func (s *session) settleOffers(read []string) {
	var unread []queuedMessage
	for _, m := range s.acked {
		if !slices.Contains(read, m.DeliveryID) {
			unread = append(unread, m)
		}
	}
	s.acked = nil
	if len(s.pending) > 0 && s.pending[0].offered && slices.Contains(read, s.pending[0].DeliveryID) {
		p := s.pending[0]
		s.pending = s.pending[1:]
		s.decide(p, s.active.Sequence)
	}
	if len(unread) > 0 {
		later := s.st.Queue
		s.st.Queue = nil
		if len(later) > 0 {
			// The queue holds the turns from its first on, in order.
			s.st.NextSeq = later[0].Sequence
		}
		for _, m := range append(unread, later...) {
			s.enqueue(m)
		}
	}
	s.queuePending()
}

// deliveriesIn are the deliveries events answer (a terminated turn's
// events, read back): the messages the turn read.
func deliveriesIn(evs []protocol.Event) []string {
	var out []string
	for _, e := range evs {
		for _, d := range e.Meta.DeliveryIDs {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}
