package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// People in the loop from any depth (changeProxyInput; docs/subagents.md),
// as eve proxies a descendant's requests (dist/src/subagents/adapter.js,
// hitl-proxy.js):
//
//   - A subagent's turn (turnInput.CalledBy set) relays its input.requested,
//     approval.candidate, approval.settled and input.resolved to the parent
//     turn that called it (signals.SignalAgentInput, a fire-and-forget
//     SignalExternalWorkflow command: it commits with the workflow task
//     that recorded the event, so a retried task relays nothing twice).
//   - The parent records the requests on its own stream once (by request
//     id; the child's ids, the child's step reference, the parent's
//     callId) and keeps, per request id, the child turn that asked. A
//     parent that is itself a subagent's turn relays what it recorded to
//     its own parent, so a request from any depth reaches the root.
//   - An answer given to the parent (the respond Update or Signal, or a
//     typed message when the request is the first open prompt: typed.go)
//     for a relayed request goes down to the child turn as an eve.respond
//     signal; the child decides it by its own policies. A tool approval
//     stays open on the parent until the child relays approval.settled and
//     input.resolved, which the parent records (eve's resolvedByChild); a
//     question is resolved on the parent when the answer goes down.

// relayed is a request a child turn asked through this turn.
type relayed struct {
	child   string // the child turn's workflow id (answers go there)
	kind    string
	retired bool // settled (or answered, for a question): no more answers
	// call is this turn's call whose child asked, n the order it came in
	// (a stopped call withdraws its open requests: subagent_cancel.go).
	call string
	n    int
	// With changeProxyTyped (typed.go): req is the request as relayed,
	// rule who may answer it, order when it was asked among the turn's
	// own (inputBoard.asked); sent: a typed answer the child will take
	// went down, so the next typed answer goes to the next prompt.
	req   protocol.InputRequest
	rule  signals.AnswerRule
	order int
	sent  bool
}

// relayUp relays this subagent turn's people-in-the-loop events to its
// parent turn (eventLog.relay).
func (t *turn) relayUp(ctx workflow.Context, typ string, data any) {
	switch typ {
	case protocol.InputRequested, protocol.ApprovalCandidate, protocol.ApprovalSettled, protocol.InputResolved:
	default:
		return
	}
	if !t.proxyDecided {
		t.proxyDecided = true
		t.proxyOn = t.changeOn(ctx, changeProxyInput)
	}
	if !t.proxyOn {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	in := signals.AgentInput{CallID: t.in.CalledBy.CallID, ChildSession: t.in.SessionID, ChildTurn: t.wid, Type: typ, Data: raw}
	if typ == protocol.InputRequested {
		in.Rules = t.answerRules(raw) // typed.go
	}
	t.relayQueue = append(t.relayQueue, in)
	if t.relaySending {
		return
	}
	// One sender, in order (the parent records approval.settled before
	// input.resolved); the turn does not end before it is done
	// (drainRelays): a workflow that completes drops its pending signals.
	t.relaySending = true
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		for len(t.relayQueue) > 0 {
			in := t.relayQueue[0]
			if err := workflow.SignalExternalWorkflow(ctx, t.in.CalledBy.WorkflowID, "", signals.SignalAgentInput, in).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Info("the parent turn is gone; a relayed event is dropped", "parent", t.in.CalledBy.WorkflowID, "type", in.Type, "error", err)
			}
			t.relayQueue = t.relayQueue[1:]
		}
		t.relaySending = false
	})
}

// drainRelays waits until the relayed events, and the cancels sent to
// children (subagent_cancel.go), are sent (the turn's end).
func (t *turn) drainRelays(ctx workflow.Context) {
	if t.relaySending || t.stopping > 0 {
		_ = workflow.Await(ctx, func() bool { return !t.relaySending && t.stopping == 0 })
	}
}

// requestTag is what this turn puts in its request ids: a subagent's turn
// (it relays its requests to the root) its session's tag, so its ids never
// equal the root's or another descendant's (changeSubagentRequestIDs,
// decided at its first request); any other turn nothing.
func (t *turn) requestTag(ctx workflow.Context) string {
	if t.in.CalledBy == nil || t.in.CalledBy.WorkflowID == "" {
		return ""
	}
	if !t.tagDecided {
		t.tagDecided = true
		if t.changeOn(ctx, changeSubagentRequestIDs) {
			t.reqTag = sessionTag(t.in.SessionID)
		}
	}
	return t.reqTag
}

// askTagFor decides, as a subagent's turn first runs a call that may ask
// its person (an activity's tools.Context.Ask, a workflow tool's
// wfcall.Ask), the tag it hands its calls for their questions' ids
// (signals.AskID: ask_<tag>_<callId>_<n>), so a tool's question it proxies
// to the root never shares an id with a sibling's
// (changeSubagentAskIDs). A root turn, and a turn started before the
// change, hands none: ask_<callId>_<n>.
func (t *turn) askTagFor(ctx workflow.Context, c *pendingCall) {
	if t.askTagDecided || t.in.CalledBy == nil || t.in.CalledBy.WorkflowID == "" {
		return
	}
	switch tools.Kind(c.plan.Kind) {
	case tools.KindAuthored:
		if c.plan.Local {
			return // a local activity cannot ask
		}
	case tools.KindDelegated, tools.KindWorkflow:
	default:
		return
	}
	t.askTagDecided = true
	if workflow.GetVersion(ctx, changeSubagentAskIDs, workflow.DefaultVersion, 1) >= 1 {
		t.askTag = sessionTag(t.in.SessionID)
	}
}

// askPrefixOK says whether a running call's question id is its own: it
// begins with the call's prefix (signals.AskPrefix), untagged or with the
// tag this turn handed its calls (a workflow tool built with an older
// tools/wfcall asks untagged).
func (t *turn) askPrefixOK(callID, requestID string) bool {
	return strings.HasPrefix(requestID, signals.AskPrefix("", callID)) ||
		t.askTag != "" && strings.HasPrefix(requestID, signals.AskPrefix(t.askTag, callID))
}

// takeAgentInput records a child turn's relayed event on this turn's
// stream, once.
func (t *turn) takeAgentInput(ctx workflow.Context, in signals.AgentInput) {
	if !t.changeOn(ctx, changeProxyInput) {
		return
	}
	if t.relays == nil {
		t.relays, t.relayedSeen = map[string]*relayed{}, map[string]bool{}
	}
	switch in.Type {
	case protocol.InputRequested:
		var d protocol.InputRequestedData
		if json.Unmarshal(in.Data, &d) != nil {
			return
		}
		var fresh []protocol.InputRequest
		for _, r := range d.Requests {
			if t.relays[r.RequestID] == nil {
				rl := &relayed{child: in.ChildTurn, kind: r.Kind, call: in.CallID, n: len(t.relays), req: r}
				for _, rule := range in.Rules {
					if rule.RequestID == r.RequestID {
						rl.rule = rule
					}
				}
				t.board.asked++
				rl.order = t.board.asked
				t.relays[r.RequestID] = rl
				fresh = append(fresh, r)
			}
		}
		if len(fresh) == 0 {
			return
		}
		d.Requests, d.CallID = fresh, in.CallID
		if task := t.callTasks[in.CallID]; task != "" && t.changeOn(ctx, changeProxyTaskID) {
			// The call runs as a task: eve's input.requested from a task's
			// run carries its taskId (the parent's, not the child's own).
			d.TaskID = task
		}
		t.log.emit(ctx, protocol.InputRequested, d)
		// The turn holds for people (eve's relay: hold on input), so a
		// client reads the request as the end of a segment.
		t.turnWaiting(ctx, "input")
		if t.typedAnswers(ctx) {
			t.tellInputs(ctx) // typed.go
		}
	case protocol.ApprovalCandidate, protocol.ApprovalSettled:
		key := in.Type + "\x00" + string(in.Data)
		if t.relayedSeen[key] {
			return
		}
		t.relayedSeen[key] = true
		t.log.emit(ctx, in.Type, json.RawMessage(in.Data))
	case protocol.InputResolved:
		// The child's resolutions of its tool approvals (eve's
		// resolvedForParent); a question was resolved here when its
		// answer went down.
		var d protocol.InputResolvedData
		if json.Unmarshal(in.Data, &d) != nil {
			return
		}
		var keep []protocol.InputResolution
		for _, res := range d.Resolutions {
			r := t.relays[res.RequestID]
			if r == nil || r.retired || (res.Kind != protocol.KindToolApproval && !t.takeChildResolution(ctx, res)) {
				continue
			}
			if res.Outcome != protocol.OutcomeInvalid {
				r.retired = true
			}
			keep = append(keep, res)
		}
		if len(keep) == 0 {
			return
		}
		d.Resolutions = keep
		t.log.emit(ctx, protocol.InputResolved, d)
		if t.typedOn {
			t.tellInputs(ctx)
		}
	}
}

// splitRelayed parts a batch of answers into this turn's own and those for
// requests its children asked (by child turn, in the order first
// answered), and the repeats of answers to relayed requests that are
// retired.
func (t *turn) splitRelayed(rs []protocol.InputResponse) (own []protocol.InputResponse, down map[string][]protocol.InputResponse, children []string, retired []string) {
	for _, resp := range rs {
		r := t.relays[resp.RequestID]
		switch {
		case r == nil:
			own = append(own, resp)
		case r.retired:
			retired = append(retired, resp.RequestID)
		default:
			if down == nil {
				down = map[string][]protocol.InputResponse{}
			}
			if _, ok := down[r.child]; !ok {
				children = append(children, r.child)
			}
			down[r.child] = append(down[r.child], resp)
		}
	}
	return own, down, children, retired
}

// relayedCheck validates the relayed part of a batch (the rest is the
// board's): an answer to a relayed request appears once in a batch. The
// child checks the answer itself.
func (t *turn) relayedCheck(rs []protocol.InputResponse) error {
	seen := map[string]bool{}
	for i, resp := range rs {
		if t.relays[resp.RequestID] == nil {
			continue
		}
		if seen[resp.RequestID] {
			return fmt.Errorf("response %d (requestId %q): answered twice in one batch", i+1, resp.RequestID)
		}
		seen[resp.RequestID] = true
	}
	return nil
}

// routeDown sends the answers to relayed requests down to the child turns
// that asked, as the responder's (one eve.respond signal per child, which
// commits with this workflow task). A question is resolved here at once
// (input.resolved, eve's routeAnswer); a tool approval waits for the
// child's relayed settlement. It returns the resolutions it recorded.
func (t *turn) routeDown(ctx workflow.Context, req signals.RespondRequest, down map[string][]protocol.InputResponse, children []string) []protocol.InputResolution {
	if t.typedOn {
		return t.routeDownResolved(ctx, req, down, children) // typed.go
	}
	var resolved []protocol.InputResolution
	for _, child := range children {
		rs := down[child]
		err := workflow.SignalExternalWorkflow(ctx, child, "", signals.SignalRespond,
			signals.RespondRequest{Responses: rs, Responder: req.Responder}).Get(ctx, nil)
		if err != nil {
			workflow.GetLogger(ctx).Warn("a relayed answer could not reach the child turn that asked", "child", child, "error", err.Error())
			continue
		}
		for _, resp := range rs {
			r := t.relays[resp.RequestID]
			if r.kind == protocol.KindToolApproval {
				continue
			}
			r.retired = true
			rc := resp
			resolved = append(resolved, protocol.InputResolution{Kind: r.kind, Outcome: protocol.OutcomeAnswered, RequestID: resp.RequestID, Response: &rc})
		}
	}
	if len(resolved) > 0 {
		t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolved, StepRef: t.step(t.stepIdx)})
	}
	return resolved
}
