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
	caller := req.Caller
	if caller == nil {
		caller = s.initiator // as the turn it would start
	}
	if s.active == nil {
		return false
	}
	if !samePrincipal(caller, s.activeCaller) && !s.answersApproval(ctx, req.Message) {
		return false // another person's message waits for the turn's end
	}
	policy := req.TurnPolicy
	if policy == "" {
		policy = signals.TurnPolicySteer
	}
	if policy == signals.TurnPolicyQueue && len(s.open) == 0 {
		return false // nothing it could answer or withdraw: it waits
	}
	s.st.Deliveries[dlv] = s.active.Sequence
	m := signals.TurnMessage{Message: req.Message, DeliveryID: dlv, Caller: req.Caller, TurnPolicy: policy}
	s.offered = append(s.offered, queuedMessage{Sequence: s.active.Sequence, Message: req.Message, DeliveryID: dlv, Caller: req.Caller})
	workflow.SignalExternalWorkflow(ctx, s.active.WorkflowID, "", signals.SignalTurnMessage, m)
	return true
}

// answersApproval reports whether a message answers the turn's first open
// prompt, a tool approval whose response policy decides who may settle it,
// in text ("approve", "cancel"): another person's such message goes to the
// turn, whose policy judges it (changeOffers). Other approvals are the
// requester's alone: the message waits for the turn's end.
func (s *session) answersApproval(ctx workflow.Context, message string) bool {
	if len(s.open) == 0 || s.open[0].Kind != protocol.KindToolApproval || !slices.Contains(s.judged, s.open[0].RequestID) {
		return false
	}
	if _, ok := protocol.ResolveText(s.open[0], message); !ok {
		return false
	}
	return workflow.GetVersion(ctx, changeOffers, workflow.DefaultVersion, 1) >= 1
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
// turn).
func (t *turn) takeMessage(ctx workflow.Context, m signals.TurnMessage) {
	if t.finished || t.closing {
		return
	}
	sender := m.Caller
	if sender == nil {
		sender = t.in.Auth.Initiator // as the session counts it
	}
	if open := t.board.open(); len(open) > 0 {
		r := t.board.byID[open[0].RequestID]
		if resp, ok := protocol.ResolveText(r.req, m.Message); ok {
			if d, err := r.decide(resp); err == nil {
				if t.responses && r.req.Kind == protocol.KindToolApproval {
					if t.refusedResponder(r, sender) != "" {
						return // not theirs to settle: it waits for the turn's end
					}
					t.taken = append(t.taken, m.DeliveryID)
					t.messageReceived(ctx, m.DeliveryID, m.Message)
					if t.judged(r) {
						c := t.newCandidate(r, d, resp, sender)
						workflow.Go(ctx, func(ctx workflow.Context) { t.judge(ctx, []*candidate{c}) })
						return
					}
					t.settleBy(ctx, r, d, sender)
					t.recordResolutions(ctx, []protocol.InputResolution{d.res})
					return
				}
				t.taken = append(t.taken, m.DeliveryID)
				t.messageReceived(ctx, m.DeliveryID, m.Message)
				t.settleBy(ctx, r, d, sender)
				t.recordResolutions(ctx, []protocol.InputResolution{d.res})
				return
			}
		}
	}
	if open := t.board.open(); t.limits && len(open) > 0 && open[0].Kind == protocol.KindSessionLimit {
		// A reply that answers neither Continue nor Stop waits behind the
		// prompt, which stays open; the held turn reads it once granted.
		t.steering = append(t.steering, m)
		return
	}
	if t.responses && !samePrincipal(sender, t.in.Auth.Current) {
		// Another person's message, offered as an answer that no longer
		// answers anything: it waits for the turn's end.
		return
	}
	if m.TurnPolicy == signals.TurnPolicyQueue && !t.board.approvalOpen() {
		return
	}
	t.steering = append(t.steering, m)
	// The open requests are withdrawn; calls approved already run.
	t.recordResolutions(ctx, t.board.withdraw())
}

// readSteering puts the steering messages into the conversation, where
// the next model step reads them.
func (t *turn) readSteering(ctx workflow.Context) {
	for _, m := range t.steering {
		t.taken = append(t.taken, m.DeliveryID)
		t.messageReceived(ctx, m.DeliveryID, m.Message)
		t.conv.add(model.Message{Role: model.RoleUser, Text: m.Message})
	}
	t.steering = nil
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
func withdrawnOutcome(p work.CallPlan, r *openRequest) work.ToolOutcome {
	if r.req.Kind == protocol.KindToolApproval {
		msg := fmt.Sprintf("The call to %s did not run: ignored because the user continued without responding.", p.Call.Name)
		out := mustJSON(map[string]string{"error": msg, "code": protocol.CodeToolDenied, "reason": "ignored"})
		return work.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeToolDenied, Message: msg}}
	}
	return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("the question of %s was withdrawn: the user sent a new message instead of answering", p.Call.Name))
}
