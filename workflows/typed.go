package workflows

import (
	"encoding/json"
	"slices"
	"sort"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A typed answer to a proxied prompt (changeProxyTyped; docs/subagents.md),
// as eve's text channels answer "the first open prompt" whether the turn
// or a descendant asked it (docs/tools/human-in-the-loop.md, "Several
// requests at once"; subagents/index.mdx):
//
//   - The parent turn keeps each request a child proxied (relayed.req) and
//     when it was asked among its own (inputBoard.asked). Its mirror to
//     the session (signals.TurnInputs) lists every open prompt, its own and
//     the proxied ones, first first: a session-limit prompt, then in the
//     order asked. So the session routes a typed message to the turn, and
//     its status says waiting-input, while only a proxied request is open.
//   - decideMessage resolves the text against the first open prompt; when
//     that is a proxied request, the message is taken (message.received)
//     and its answer goes down to the child turn that asked as an answer
//     given to the parent does (routeDown: eve.respond, as the sender's),
//     where the child's own policies decide it.
//   - Who may answer is the child's rule, relayed with the request
//     (signals.AgentInput.Rules): an approval without a response policy is
//     its requester's alone; another person's typed "approve" is not taken
//     and waits for the turn's end, as for the turn's own approvals. One a
//     response policy judges goes to the child's policy (the session's
//     mirror lists it as judged).

// typedAnswers decides, once, whether this turn routes typed answers to
// the requests its children proxy (at its first proxied request).
func (t *turn) typedAnswers(ctx workflow.Context) bool {
	if !t.typedDecided {
		t.typedDecided = true
		t.typedOn = t.changeOn(ctx, changeProxyTyped)
	}
	return t.typedOn
}

// prompt is one open request a typed message may answer: the turn's own,
// or one a child proxied (relay set).
type prompt struct {
	req   protocol.InputRequest
	order int
	relay *relayed
}

// prompts are the open requests, first first (eve's rule): a session-limit
// prompt, then in the order asked. A proxied request whose typed answer
// went down (sent) is not offered again.
func (t *turn) prompts() []prompt {
	var ps []prompt
	for _, r := range t.board.requests {
		if !r.state.closed() {
			ps = append(ps, prompt{req: r.req, order: r.order})
		}
	}
	for _, rl := range t.relays {
		if !rl.retired && !rl.sent {
			ps = append(ps, prompt{req: rl.req, order: rl.order, relay: rl})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].req.Kind == protocol.KindSessionLimit, ps[j].req.Kind == protocol.KindSessionLimit
		if li != lj {
			return li
		}
		return ps[i].order < ps[j].order
	})
	return ps
}

// inputs is the session's mirror of the open requests: the board's, and,
// with changeProxyTyped, the proxied ones among them.
func (t *turn) inputs() signals.TurnInputs {
	in := t.board.inputs()
	if !t.typedOn {
		return in
	}
	in.Open = nil
	for _, p := range t.prompts() {
		in.Open = append(in.Open, p.req)
		if p.relay != nil && p.relay.rule.Judged {
			in.Judged = append(in.Judged, p.req.RequestID)
		}
	}
	return in
}

// relayedOpen counts the proxied requests still open (the inbox memo's
// Relayed), with changeProxyTyped: 0 before it, as memos were.
func (t *turn) relayedOpen() int {
	if !t.typedOn {
		return 0
	}
	n := 0
	for _, rl := range t.relays {
		if !rl.retired {
			n++
		}
	}
	return n
}

// proxiedTools names the tools of the open requests the turn's subagents
// proxied (with changeProxyTyped), each once, in the order asked.
func (t *turn) proxiedTools() []string {
	if !t.typedOn {
		return nil
	}
	var names []string
	for _, p := range t.prompts() {
		if p.relay != nil && !slices.Contains(names, p.req.Action.ToolName) {
			names = append(names, p.req.Action.ToolName)
		}
	}
	return names
}

// tellInputs sends the session the mirror (a command of this workflow
// task, as reportInput's), when it keeps one or someone waits for the
// turn's outcome (t.report; changeTurnDecides).
func (t *turn) tellInputs(ctx workflow.Context) {
	if t.report {
		t.tell(ctx, signals.SignalTurnInputs, t.inputs())
	}
}

// answerRelayed decides a message while the first open prompt is rl, a
// request a child proxied: answered reports whether the text answers it;
// taken whether the turn took the message (the sender may answer it).
func (t *turn) answerRelayed(ctx workflow.Context, rl *relayed, m signals.TurnMessage, sender *auth.Principal) (answered, taken bool) {
	resp, ok := protocol.ResolveText(rl.req, m.Message)
	if !ok {
		return false, false
	}
	if rl.rule.RequesterOnly && !approval.MayRespond(rl.rule.Requester, sender) {
		return true, false // not theirs to settle: it waits for the turn's end
	}
	t.receiveSteering(ctx)
	t.taken = append(t.taken, m.DeliveryID)
	t.messageReceived(ctx, m.DeliveryID, m.Message)
	if !rl.rule.Judged {
		// The child takes it (its rule let the sender): the next typed
		// answer goes to the next prompt. A judged one stays first until
		// the child's policy settles it, as the turn's own does.
		rl.sent = true
		t.tellInputs(ctx)
	}
	req := signals.RespondRequest{Responses: []protocol.InputResponse{resp}, Responder: sender}
	down := map[string][]protocol.InputResponse{rl.child: req.Responses}
	workflow.Go(ctx, func(ctx workflow.Context) { t.routeDown(ctx, req, down, []string{rl.child}) })
	return true, true
}

// routeDownResolved is routeDown with changeProxyTyped: the answers go
// down, and a question resolves here in the same workflow task, before
// the child can relay its own resolution of it (which this turn then
// leaves aside: the request is retired). routeDown resolved it once the
// signal was delivered, so a child's relay read meanwhile was recorded
// too: two input.resolved for one answer.
func (t *turn) routeDownResolved(ctx workflow.Context, req signals.RespondRequest, down map[string][]protocol.InputResponse, children []string) []protocol.InputResolution {
	sent := make([]workflow.Future, len(children))
	for i, child := range children {
		sent[i] = workflow.SignalExternalWorkflow(ctx, child, "", signals.SignalRespond,
			signals.RespondRequest{Responses: down[child], Responder: req.Responder})
	}
	var resolved []protocol.InputResolution
	for _, child := range children {
		for _, resp := range down[child] {
			r := t.relays[resp.RequestID]
			if r.kind == protocol.KindToolApproval || r.retired {
				continue // an approval waits for the child's settlement
			}
			r.retired = true
			rc := resp
			resolved = append(resolved, protocol.InputResolution{Kind: r.kind, Outcome: protocol.OutcomeAnswered, RequestID: resp.RequestID, Response: &rc})
		}
	}
	if len(resolved) > 0 {
		t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolved, StepRef: t.step(t.stepIdx)})
		t.tellInputs(ctx)
	}
	for i, f := range sent {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("a relayed answer could not reach the child turn that asked", "child", children[i], "error", err.Error())
		}
	}
	return resolved
}

// answerRules says who may answer each request of an input.requested this
// subagent's turn relays (signals.AgentInput.Rules): its own by its board,
// a descendant's as that one relayed it.
func (t *turn) answerRules(raw json.RawMessage) []signals.AnswerRule {
	var d protocol.InputRequestedData
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	var rules []signals.AnswerRule
	for _, q := range d.Requests {
		if r := t.board.byID[q.RequestID]; r != nil {
			rule := signals.AnswerRule{RequestID: q.RequestID, Judged: r.judged(), RequesterOnly: r.approval() && !r.plan.ResponsePolicy}
			if rule.RequesterOnly {
				rule.Requester = t.board.requester
			}
			rules = append(rules, rule)
		} else if rl := t.relays[q.RequestID]; rl != nil {
			rules = append(rules, rl.rule)
		}
	}
	return rules
}
