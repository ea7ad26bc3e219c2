package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Messages behave as in eve 0.80.1. A message from the person the turn
// serves answers the turn's first open prompt (approvals included) or
// steers the turn (pending prompts withdrawn, the model reads it before its
// next step); turnPolicy "queue" and other people's messages wait for the
// turn's end. Assistant text always streams (message.appended).

// samePrincipal: two callers are one person (no caller is the open mode's
// anonymous person).
func samePrincipal(a, b *auth.Principal) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ID == b.ID && a.Type == b.Type
}

// offerToTurn hands a message to the running turn, which answers a prompt
// with it, steers with it, or leaves it for the next turn. It reports
// whether the message went to the turn.
func (s *session) offerToTurn(ctx workflow.Context, req signals.SendRequest, dlv string) bool {
	if !s.mayOffer(ctx, req.Caller, req.Message, req.TurnPolicy) {
		return false
	}
	policy := req.TurnPolicy
	if policy == "" {
		policy = signals.TurnPolicySteer
	}
	s.st.Deliveries[dlv] = s.active.Sequence
	m := signals.TurnMessage{Message: req.Message, DeliveryID: dlv, Caller: req.Caller, TurnPolicy: policy}
	s.offered = append(s.offered, queuedMessage{Sequence: s.active.Sequence, Message: req.Message, DeliveryID: dlv, Caller: req.Caller})
	workflow.SignalExternalWorkflow(ctx, s.active.WorkflowID, "", signals.SignalTurnMessage, m)
	return true
}

// mayOffer reports whether a message goes to the running turn: the
// person it serves (but a queued message with nothing open to answer or
// withdraw, which waits), or another person answering an approval a
// response policy judges.
func (s *session) mayOffer(ctx workflow.Context, caller *auth.Principal, message, policy string) bool {
	if caller == nil {
		caller = s.initiator // as the turn it would start
	}
	if s.active == nil {
		return false
	}
	if !samePrincipal(caller, s.activeCaller) && !s.answersApproval(ctx, message) {
		return false // another person's message waits for the turn's end
	}
	if policy == signals.TurnPolicyQueue && len(s.open) == 0 {
		return false // nothing it could answer or withdraw: it waits
	}
	return true
}

// answersApproval reports whether a message answers the turn's first open
// prompt, a tool approval whose response policy decides who may settle it,
// in text ("approve", "cancel"): another person's such message goes to the
// turn, whose policy judges it (changeOffers). Other approvals are the
// requester's alone: the message waits for the turn's end.
func (s *session) answersApproval(ctx workflow.Context, message string) bool {
	return answersJudged(signals.TurnInputs{Open: s.open, Judged: s.judged}, message) && s.changeOn(ctx, changeOffers)
}

// answersJudged reports whether a message answers the first of the open
// prompts in, when that is a tool approval a response policy judges: the
// session reads its mirror of them, a turn that decides its own prompts.
func answersJudged(in signals.TurnInputs, message string) bool {
	if len(in.Open) == 0 || in.Open[0].Kind != protocol.KindToolApproval || !slices.Contains(in.Judged, in.Open[0].RequestID) {
		return false
	}
	_, ok := protocol.ResolveText(in.Open[0], message)
	return ok
}

// requeueUntaken runs the offered messages the turn did not take (it ended
// first, or they were queued) as turns of their own, in arrival order.
func (s *session) requeueUntaken(taken []string) {
	for _, m := range s.offered {
		if slices.Contains(taken, m.DeliveryID) {
			continue
		}
		seq := s.st.NextSeq
		s.st.NextSeq++
		s.st.Deliveries[m.DeliveryID] = seq
		m.Sequence = seq
		s.st.Queue = append(s.st.Queue, m)
	}
	s.offered = nil
}

// takeMessage decides what a message offered by the session does: answer
// the first open prompt, steer, or nothing (the session runs it after the
// turn). A session that keeps its messages in order asks for the decision
// (m.Ack): it offers the next message only once it has it, and its sender
// learns the turn that reads the message.
func (t *turn) takeMessage(ctx workflow.Context, m signals.TurnMessage) {
	report := t.report
	if m.Report {
		// Its sender waits for the outcome of the turn that reads it: a
		// park of this turn, once it took it, is told (changeTurnDecides).
		t.report = true
	}
	taken := t.decideMessage(ctx, m)
	if !taken {
		t.report = report
	}
	if m.Ack && t.ordered {
		// A command: it commits with the decision, in this workflow task.
		t.tell(ctx, signals.SignalTurnTaken, signals.TurnTaken{TurnID: t.in.TurnID, DeliveryID: m.DeliveryID, Taken: taken})
	}
}

// decideMessage is takeMessage's decision: whether the turn took the
// message (answered a prompt with it, or steers with it). In order mode
// (t.ordered) a message taken is read before the turn ends, however it
// ends, and no message is read before one taken earlier.
func (t *turn) decideMessage(ctx workflow.Context, m signals.TurnMessage) bool {
	if t.finished || t.closing {
		return false
	}
	sender := m.Caller
	if sender == nil {
		sender = t.in.Auth.Initiator // as the session counts it
	}
	if t.in.Decides && !samePrincipal(sender, t.in.Auth.Current) && !answersJudged(t.inputs(), m.Message) {
		// The session's rule (mayOffer), which it leaves to the turn:
		// another person's message waits for the turn's end unless it
		// answers an approval a response policy judges.
		return false
	}
	open := t.board.open()
	if t.typedOn {
		// The first open prompt may be a child's proxied request (typed.go).
		if ps := t.prompts(); len(ps) == 0 {
			open = nil
		} else if rl := ps[0].relay; rl != nil {
			if answered, taken := t.answerRelayed(ctx, rl, m, sender); answered {
				return taken
			}
			open = nil // the message answers none of the turn's own prompts
		} else {
			open = []protocol.InputRequest{ps[0].req}
		}
	}
	if len(open) > 0 {
		r := t.board.byID[open[0].RequestID]
		if resp, ok := protocol.ResolveText(r.req, m.Message); ok {
			if d, err := r.decide(resp); err == nil {
				if r.approval() {
					if r.refusedResponder(sender) != "" {
						return false // not theirs to settle: it waits for the turn's end
					}
					t.receiveSteering(ctx)
					t.taken = append(t.taken, m.DeliveryID)
					t.messageReceived(ctx, m.DeliveryID, m.Message)
					if r.judged() {
						c, _ := r.propose(d, resp, sender)
						workflow.Go(ctx, func(ctx workflow.Context) { t.judge(ctx, []*candidate{c}) })
						return true
					}
					fx, _ := r.answer(d, sender)
					t.record(ctx, fx)
					return true
				}
				t.receiveSteering(ctx)
				t.taken = append(t.taken, m.DeliveryID)
				t.messageReceived(ctx, m.DeliveryID, m.Message)
				fx, _ := r.answer(d, sender)
				t.record(ctx, fx)
				return true
			}
		}
	}
	if m.AnswerOnly && t.ordered {
		return false // it answers nothing; it may not overtake those waiting
	}
	if t.ordered && t.stepIdx+1 >= t.cfg.MaxSteps && len(t.board.open()) == 0 {
		// The last step, and nothing open it could withdraw or wait
		// behind: no step of this turn would read it; the next turn does.
		return false
	}
	if open := t.board.open(); t.limits && len(open) > 0 && open[0].Kind == protocol.KindSessionLimit {
		// A reply that answers neither Continue nor Stop waits behind the
		// prompt, which stays open; the held turn reads it once granted.
		t.steering = append(t.steering, m)
		return true
	}
	if t.board.responses && !samePrincipal(sender, t.in.Auth.Current) {
		// Another person's message, offered as an answer that no longer
		// answers anything: it waits for the turn's end.
		return false
	}
	if m.TurnPolicy == signals.TurnPolicyQueue && !t.board.approvalOpen() {
		return false
	}
	t.steering = append(t.steering, m)
	// The open requests are withdrawn; calls approved already run.
	t.record(ctx, t.board.withdraw())
	return true
}

// receiveSteering records message.received for the steering messages not
// received yet, in order mode: a message that answers a prompt now (a
// call's question, a session-limit prompt) is read after those taken
// before it. The model reads them at the next step boundary (readSteering).
func (t *turn) receiveSteering(ctx workflow.Context) {
	if !t.ordered {
		return
	}
	for _, m := range t.steering[t.steerReceived:] {
		t.taken = append(t.taken, m.DeliveryID)
		t.messageReceived(ctx, m.DeliveryID, m.Message)
	}
	t.steerReceived = len(t.steering)
}

// readSteering puts the steering messages into the conversation, where
// the next model step reads them.
func (t *turn) readSteering(ctx workflow.Context) {
	for i, m := range t.steering {
		if i >= t.steerReceived {
			t.taken = append(t.taken, m.DeliveryID)
			t.messageReceived(ctx, m.DeliveryID, m.Message)
		}
		t.conv.add(model.Message{Role: model.RoleUser, Text: m.Message})
	}
	t.steering, t.steerReceived = nil, 0
}

// streamRest emits what the step's text has not streamed yet, so every
// text block reaches clients as message.appended (the whole text when the
// model does not stream) before message.completed.
func (t *turn) streamRest(ctx workflow.Context, stepIdx int, text string) {
	rest := text
	if t.streamed != "" {
		if !strings.HasPrefix(text, t.streamed) {
			return // a retried attempt streamed other text: message.completed is authoritative
		}
		rest = text[len(t.streamed):]
	}
	if rest != "" {
		t.log.emit(ctx, protocol.MessageAppended, protocol.MessageAppendedData{MessageDelta: rest, StepRef: t.step(stepIdx)})
	}
	t.streamed = ""
}

// withdrawnOutcome is the result the model sees for a call whose prompt a
// steering message withdrew.
func withdrawnOutcome(p work.CallPlan, r *request) work.ToolOutcome {
	if r.req.Kind == protocol.KindToolApproval {
		msg := fmt.Sprintf("The call to %s did not run: ignored because the user continued without responding.", p.Call.Name)
		out := mustJSON(map[string]string{"error": msg, "code": protocol.CodeToolDenied, "reason": "ignored"})
		return work.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeToolDenied, Message: msg}}
	}
	return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("the question of %s was withdrawn: the user sent a new message instead of answering", p.Call.Name))
}
