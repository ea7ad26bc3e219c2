package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

const editRules = `
name: edits
default: "Hello."
rules:
  - match: '^pay (?P<to>\w+) (?P<amount>[0-9]+)'
    steps:
      - calls: [{tool: pay, inputJSON: '{"to": "{{to}}", "amount": {{amount}}}'}]
      - reply: "paid {{result.pay.paid}} to {{result.pay.to}}{{result.pay.code}} | {{note.pay}}"
  - match: '^wire (?P<amount>[0-9]+)'
    steps:
      - calls: [{tool: wire, inputJSON: '{"amount": {{amount}}}'}]
      - reply: "wired {{result.wire.wired}}{{result.wire.code}}"
  - match: '^refund'
    steps:
      - calls: [{tool: refund, input: {chargeId: ch_1, amount: 5}}]
      - reply: "refunded {{result.refund.refunded}}{{result.refund.code}}"
`

// editHarness adds two editable tools: pay, whose custom policy asks up to
// 500 and denies above, and wire, whose response policy rejects an
// approval above 100 (and records the inputs it judged).
func editHarness(t *testing.T) (*harness, *[]approval.Request) {
	t.Helper()
	var judged []approval.Request
	var h *harness
	h = newHarness(t, func(a *agent.Agent) {
		m, err := scripted.Parse([]byte(editRules))
		if err != nil {
			t.Fatal(err)
		}
		a.Model = m
		pay := &tools.Tool{Name: "pay", Description: "Pay someone; a person approves, and may edit.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","minLength":1},"amount":{"type":"number","exclusiveMinimum":0}},"required":["to","amount"],"additionalProperties":false}`),
			Approval: approval.Custom(func(c approval.Context) approval.Status {
				var in struct{ Amount float64 }
				if err := c.Input(&in); err != nil || in.Amount > 500 {
					return approval.Deny("over the 500 limit")
				}
				return approval.Ask()
			}).Editable(),
			Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
				h.mu.Lock()
				h.ran = append(h.ran, "pay:"+string(in))
				h.mu.Unlock()
				var v struct {
					To     string
					Amount float64
				}
				_ = json.Unmarshal(in, &v)
				return map[string]any{"paid": v.Amount, "to": v.To}, nil
			}}
		wire := &tools.Tool{Name: "wire", Description: "Wire money; a response policy limits approvals.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
			Approval: approval.Always().Editable().WithResponse(func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
				judged = append(judged, c.Request)
				var in struct{ Amount float64 }
				if err := c.Request.Input(&in); err != nil || in.Amount > 100 {
					return approval.Reject("approvals stop at 100"), nil
				}
				return approval.Allow(), nil
			}),
			Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
				h.mu.Lock()
				h.ran = append(h.ran, "wire:"+string(in))
				h.mu.Unlock()
				var v struct{ Amount float64 }
				_ = json.Unmarshal(in, &v)
				return map[string]any{"wired": v.Amount}, nil
			}}
		if err := a.Tools.Register(pay, wire); err != nil {
			t.Fatal(err)
		}
	})
	return h, &judged
}

func edit(requestID, input string) protocol.InputResponse {
	return protocol.InputResponse{RequestID: requestID, OptionID: "approve", Input: json.RawMessage(input)}
}

// failureField is the failing field an invalid edit's rejection names.
func failureField(err error) string {
	var ae *temporal.ApplicationError
	var field string
	if errors.As(err, &ae) && ae.HasDetails() {
		_ = ae.Details(&field)
	}
	return field
}

// An invalid edit is refused by the validator (no event, still parked),
// naming the field; so are an edit with cancel and an edit of a tool that
// is not editable. A valid edit runs the call with it; input.resolved
// carries both inputs and the editor; the conversation shows the call with
// the input that ran and a note the model reads.
func TestTurnApproveWithEdit(t *testing.T) {
	h, _ := editHarness(t)
	wid := turnWorkflowID(0)
	var bad, withCancel, ok *update[signals.RespondResult]
	var before int
	h.at(time.Minute, func() {
		reqs := h.parkedOn(wid, "input")
		if len(reqs) != 1 {
			t.Fatalf("requests %+v", reqs)
		}
		id := reqs[0].RequestID
		before = len(h.turnEvents(wid))
		bad = h.respond(wid, edit(id, `{"to":"bob","amount":"lots"}`))
		withCancel = h.respond(wid, protocol.InputResponse{RequestID: id, OptionID: "cancel", Input: json.RawMessage(`{"to":"bob","amount":5}`)})
		if n := len(h.turnEvents(wid)); n != before {
			t.Errorf("a refused edit left %d events", n-before)
		}
		h.parkedOn(wid, "input")
		ok = h.respond(wid, edit(id, `{"to":"carol","amount":20}`))
	})
	out := h.runTurn(turnInput("pay bob 400"))

	if !bad.rejected || errType(bad.rejection) != signals.ErrTypeInvalidEdit || failureField(bad.rejection) != "/amount" ||
		!strings.Contains(bad.rejection.Error(), "/amount") {
		t.Fatalf("invalid edit: %+v", bad)
	}
	if !withCancel.rejected || !strings.Contains(withCancel.rejection.Error(), `optionId "approve"`) {
		t.Fatalf("edit with cancel: %+v", withCancel)
	}
	if !ok.completed || ok.err != nil || len(ok.result.Resolutions) != 1 || ok.result.EditRefused != "" {
		t.Fatalf("valid edit: %+v", ok)
	}
	if got := h.executed(); !slices.Equal(got, []string{`pay:{"to":"carol","amount":20}`}) {
		t.Fatalf("executed %v", got)
	}
	wantTypes(t, out.Events,
		protocol.TurnStarted, protocol.MessageReceived,
		protocol.StepStarted, protocol.ActionsRequested, protocol.InputRequested, protocol.TurnWaiting,
		protocol.ApprovalCandidate, protocol.ApprovalSettled, protocol.InputResolved, protocol.DecisionRecorded, protocol.ActionResult, protocol.StepCompleted,
		protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
		protocol.TurnCompleted)
	rs := resolutions(t, out.Events)
	if len(rs) != 1 || rs[0].Outcome != protocol.OutcomeApproved || rs[0].Response == nil ||
		string(rs[0].Response.Input) != `{"to":"carol","amount":20}` || string(rs[0].OriginalInput) != `{"to":"bob","amount":400}` ||
		rs[0].EditedBy == nil || rs[0].EditedBy.ID != "alice" || rs[0].EditedBy.Type != "user" {
		t.Fatalf("input.resolved %+v", rs)
	}
	var dec protocol.Decision
	decode(t, of(out.Events, protocol.DecisionRecorded)[0], &dec)
	if string(dec.EditedInput) != `{"to":"carol","amount":20}` || string(dec.Input) != `{"to":"bob","amount":400}` || dec.Decider == nil || dec.Decider.ID != "alice" {
		t.Fatalf("decision %+v", dec)
	}
	want := "paid 20 to carol | Note: a person (user alice) edited this call's input before approving it. " +
		`It ran with {"to":"carol","amount":20}, not with the input you proposed, {"to":"bob","amount":400}.`
	if got := reply(t, out.Events); got != want {
		t.Fatalf("reply %q\nwant  %q", got, want)
	}
	msgs, err := conversation.New(h.store).Load(context.Background(), *out.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	var call *model.ToolCall
	var result *model.ToolResult
	for i := range msgs {
		if len(msgs[i].ToolCalls) == 1 {
			call = &msgs[i].ToolCalls[0]
		}
		if len(msgs[i].ToolResults) == 1 {
			result = &msgs[i].ToolResults[0]
		}
	}
	if call == nil || string(call.Input) != `{"to":"carol","amount":20}` || result == nil || !strings.Contains(result.Note, "user alice") ||
		!strings.Contains(result.Note, `{"to":"bob","amount":400}`) || string(result.Output) != `{"paid":20,"to":"carol"}` {
		t.Fatalf("conversation: call %+v, result %+v", call, result)
	}
}

// An edit the approval policy denies is refused: the candidate is
// rejected with the policy's reason, the request stays open and nothing
// ran; a later edit within the policy settles it. A tool that is not
// editable refuses an edit (not_editable).
func TestTurnEditPolicyDenies(t *testing.T) {
	h, _ := editHarness(t)
	wid := turnWorkflowID(0)
	var denied, ok *update[signals.RespondResult]
	var id string
	h.at(time.Minute, func() {
		id = h.parkedOn(wid, "input")[0].RequestID
		denied = h.respond(wid, edit(id, `{"to":"bob","amount":900}`))
	})
	h.at(2*time.Minute, func() {
		if len(h.executed()) != 0 {
			t.Errorf("the denied edit ran: %v", h.executed())
		}
		if open := h.parkedOn(wid, "input"); len(open) != 1 {
			t.Errorf("after the denied edit: open %+v", open)
		}
		ok = h.respond(wid, edit(id, `{"to":"bob","amount":300}`))
	})
	out := h.runTurn(turnInput("pay bob 400"))
	if !denied.completed || denied.err != nil || len(denied.result.Resolutions) != 0 ||
		!strings.Contains(denied.result.EditRefused, "The approval policy denies the edited call: over the 500 limit") {
		t.Fatalf("denied edit: %+v", denied)
	}
	if !ok.completed || len(ok.result.Resolutions) != 1 || ok.result.EditRefused != "" {
		t.Fatalf("allowed edit: %+v", ok)
	}
	if got := h.executed(); !slices.Equal(got, []string{`pay:{"to":"bob","amount":300}`}) {
		t.Fatalf("executed %v", got)
	}
	var outcomes []string
	for _, e := range of(out.Events, protocol.ApprovalCandidate) {
		var d protocol.ApprovalCandidateData
		decode(t, e, &d)
		outcomes = append(outcomes, d.Outcome+":"+d.Reason)
	}
	if want := []string{"pending:", "rejected:The approval policy denies the edited call: over the 500 limit", "pending:"}; !slices.Equal(outcomes, want) {
		t.Fatalf("candidates %q, want %q", outcomes, want)
	}

	h2, _ := editHarness(t)
	var notEditable *update[signals.RespondResult]
	h2.at(time.Minute, func() {
		id := h2.parkedOn(wid, "input")[0].RequestID
		notEditable = h2.respond(wid, edit(id, `{"chargeId":"ch_1","amount":1}`))
		h2.respond(wid, protocol.InputResponse{RequestID: id, OptionID: "approve"})
	})
	h2.runTurn(turnInput("refund"))
	if !notEditable.rejected || errType(notEditable.rejection) != signals.ErrTypeNotEditable {
		t.Fatalf("edit of a tool that is not editable: %+v", notEditable)
	}
	if got := h2.executed(); !slices.Equal(got, []string{`refund:{"amount":5,"chargeId":"ch_1"}`}) {
		t.Fatalf("executed %v", got)
	}
}

// The response policy judges the edited input (and sees the model's): an
// edit above its limit is refused, one within it settles.
func TestTurnEditResponsePolicy(t *testing.T) {
	h, judged := editHarness(t)
	wid := turnWorkflowID(0)
	var refused, ok *update[signals.RespondResult]
	var id string
	h.at(time.Minute, func() {
		id = h.parkedOn(wid, "input")[0].RequestID
		refused = h.respond(wid, edit(id, `{"amount":150}`))
	})
	h.at(2*time.Minute, func() { ok = h.respond(wid, edit(id, `{"amount":60}`)) })
	out := h.runTurn(turnInput("wire 50"))
	if !refused.completed || !strings.Contains(refused.result.EditRefused, "approvals stop at 100") || len(refused.result.Resolutions) != 0 {
		t.Fatalf("refused edit: %+v", refused)
	}
	if !ok.completed || len(ok.result.Resolutions) != 1 {
		t.Fatalf("allowed edit: %+v", ok)
	}
	// The Update's answer names each refused answer and why.
	for _, c := range []struct {
		name string
		u    *update[signals.RespondResult]
		want []protocol.Refusal
	}{
		{"refused", refused, []protocol.Refusal{{RequestID: id, CandidateID: "cnd_" + id + ".1", Outcome: protocol.CandidateRejected, Reason: "approvals stop at 100", Edited: true}}},
		{"allowed", ok, nil},
	} {
		if diff := cmp.Diff(c.want, c.u.result.Refused); diff != "" {
			t.Errorf("%s edit: RespondResult.Refused (-want +got):\n%s", c.name, diff)
		}
	}
	if len(*judged) != 2 || string((*judged)[0].ToolInput) != `{"amount":150}` || string((*judged)[0].OriginalInput) != `{"amount":50}` {
		t.Fatalf("the response policy judged %+v", *judged)
	}
	if got := reply(t, out.Events); got != "wired 60" {
		t.Fatalf("reply %q", got)
	}
}

// Edits by signal (senders that cannot wait): an invalid edit is recorded
// as an invalid answer and the request stays open; a valid one settles it
// through the policies, and the call runs with it.
func TestTurnEditBySignal(t *testing.T) {
	h, _ := editHarness(t)
	wid := turnWorkflowID(0)
	var id string
	h.at(time.Minute, func() {
		id = h.parkedOn(wid, "input")[0].RequestID
		h.SignalWorkflow(signals.SignalRespond, signals.RespondRequest{Responses: []protocol.InputResponse{edit(id, `{"to":""}`)}, Responder: alice})
	})
	h.at(2*time.Minute, func() {
		if open := h.parkedOn(wid, "input"); len(open) != 1 {
			t.Errorf("after the invalid edit: open %+v", open)
		}
		h.SignalWorkflow(signals.SignalRespond, signals.RespondRequest{Responses: []protocol.InputResponse{edit(id, `{"to":"dan","amount":7}`)}, Responder: alice})
	})
	out := h.runTurn(turnInput("pay bob 400"))
	rs := resolutions(t, out.Events)
	if len(rs) != 2 || rs[0].Outcome != protocol.OutcomeInvalid || rs[1].Outcome != protocol.OutcomeApproved || string(rs[1].OriginalInput) != `{"to":"bob","amount":400}` {
		t.Fatalf("resolutions %+v", rs)
	}
	if got := h.executed(); !slices.Equal(got, []string{`pay:{"to":"dan","amount":7}`}) {
		t.Fatalf("executed %v", got)
	}
}
