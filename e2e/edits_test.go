package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
)

// Approve with edits (issue 26, item 2), against the real server: the
// demo's issue_credit is editable. An invalid edit is a 422 naming the
// field and leaves the request pending with no trace; an edit the tenant
// policy denies is refused (400 rejected, its reason) and the request stays
// pending; the inbox offers the tool's schema; a valid edit from `eve inbox
// edit` runs the call with it; input.resolved carries both inputs and the
// editor, and the conversation the model reads shows the call that ran
// and the note.
func TestApproveWithEdits(t *testing.T) {
	e := inboxAPI(t)
	ctx := e.Ctx(120 * time.Second)
	alice := e.as("key-alice")
	e.C = alice // snapshots read as alice
	turn := parkOver(t, ctx, alice, "", "credit acme 1500")
	id, req := turn.SessionID, turn.Open[0]
	if req.Action.ToolName != "issue_credit" {
		t.Fatalf("request %+v", req)
	}
	before := ids(e.snapshot(t, id))
	respond := func(input string) rawResponse {
		return e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"inputResponses": []any{
			map[string]any{"requestId": req.RequestID, "optionId": "approve", "input": json.RawMessage(input)}}}, bearer("key-alice"))
	}
	stillPending := func(when string) {
		t.Helper()
		p, err := alice.Pending(ctx, id)
		if err != nil || len(p) != 1 || p[0].RequestID != req.RequestID {
			t.Fatalf("%s: pending %+v, %v", when, p, err)
		}
	}

	// Invalid: 422 invalid_input naming /amount; nothing recorded.
	r := respond(`{"tenantId":"acme","amount":-5}`)
	wantError(t, r, http.StatusUnprocessableEntity, api.CodeInvalidInput, "/amount")
	var body protocol.ErrorBody
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Field != "/amount" {
		t.Fatalf("error body %s: want field /amount", r.Body)
	}
	// The Go client reads the field too (the inbox route, an unknown key).
	inboxID := protocol.InboxID(id, req.RequestID)
	_, err := alice.EditInbox(ctx, inboxID, json.RawMessage(`{"tenantId":"acme","amount":5,"note":"x"}`))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusUnprocessableEntity || ce.Code != api.CodeInvalidInput || ce.Field != "" ||
		!strings.Contains(ce.Message, "additional properties") {
		t.Fatalf("an edit with an unknown property: %v", err)
	}
	if after := ids(e.snapshot(t, id)); !slices.Equal(after, before) {
		t.Fatalf("invalid edits left events: %v, then %v", before, after)
	}
	stillPending("after invalid edits")

	// Denied by the policy: another tenant.
	r = respond(`{"tenantId":"globex","amount":1500}`)
	wantError(t, r, http.StatusBadRequest, api.CodeRejected, "Caller cannot access this tenant.")
	stillPending("after a denied edit")
	evs := e.Events(ctx, id)
	if cs := candidates(t, evs); len(cs) != 2 || cs[1].Outcome != protocol.CandidateRejected ||
		!strings.Contains(cs[1].Reason, "Caller cannot access this tenant.") || len(evetest.Of(evs, protocol.InputResolved)) != 0 {
		t.Fatalf("after the denied edit: %s, candidates %+v", evetest.Join(evs), cs)
	}

	// The inbox offers the edit and the tool's schema.
	items := waitInbox(t, e, alice, client.InboxFilter{SessionID: id}, inboxID)
	if !items[0].Editable || !strings.Contains(string(items[0].InputSchema), `"tenantId"`) ||
		!strings.Contains(string(items[0].Request.Action.Input), `"amount":1500`) {
		t.Fatalf("inbox item %+v", items[0])
	}

	// A valid edit from the CLI runs the call with it.
	if out := inboxCLI(t, e, "key-alice", "edit", inboxID, "--input", `{"tenantId":"acme","amount":1200}`); strings.TrimSpace(out) != req.RequestID+" approved (edited)" {
		t.Fatalf("eve inbox edit: %q", out)
	}
	evs = e.WaitIdle(id)
	if reply := e.Reply(id); reply != "Credit for acme: 1200" {
		t.Fatalf("reply %q; events %s", reply, evetest.Join(evs))
	}
	var res protocol.InputResolution
	for _, ev := range evetest.Of(evs, protocol.InputResolved) {
		var d protocol.InputResolvedData
		ev.Decode(&d)
		res = d.Resolutions[0]
	}
	if res.Outcome != protocol.OutcomeApproved || res.Response == nil || string(res.Response.Input) != `{"tenantId":"acme","amount":1200}` ||
		string(res.OriginalInput) != `{"tenantId":"acme","amount":1500}` || res.EditedBy == nil || res.EditedBy.ID != "alice" || res.EditedBy.Type != "user" {
		t.Fatalf("input.resolved %+v", res)
	}
	for _, ev := range evetest.Of(evs, protocol.ActionResult) {
		var d protocol.ActionResultData
		ev.Decode(&d)
		if !strings.Contains(string(d.Result.Output), `"credited":1200`) {
			t.Fatalf("action.result %s", d.Result.Output)
		}
	}

	// What the model reads: the call with the input that ran, and the note.
	sum, err := e.Sessions.Summary(ctx, id)
	if err != nil || sum.Conversation == nil {
		t.Fatalf("summary %+v, %v", sum, err)
	}
	msgs, err := conversation.New(e.Env.Server.PayloadStore()).Load(ctx, *sum.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	var sawCall, sawNote bool
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			sawCall = sawCall || string(c.Input) == `{"tenantId":"acme","amount":1200}`
			if strings.Contains(string(c.Input), "1500") {
				t.Fatalf("the conversation still shows the model's input: %s", c.Input)
			}
		}
		for _, tr := range m.ToolResults {
			sawNote = sawNote || strings.Contains(tr.Note, "a person (user alice) edited") && strings.Contains(tr.Note, `{"tenantId":"acme","amount":1500}`)
		}
	}
	if !sawCall || !sawNote {
		t.Fatalf("conversation (call %v, note %v): %+v", sawCall, sawNote, msgs)
	}
	// The decision record: the model's input, the edit, the refused edit.
	var decs []protocol.Decision
	if err := alice.Decisions(ctx, client.DecisionFilter{SessionID: id}, func(d protocol.Decision) error { decs = append(decs, d); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(decs) != 1 || string(decs[0].Input) != `{"tenantId":"acme","amount":1500}` || string(decs[0].EditedInput) != `{"tenantId":"acme","amount":1200}` ||
		decs[0].Decider == nil || decs[0].Decider.ID != "alice" || len(decs[0].Candidates) != 1 || decs[0].Candidates[0].Outcome != protocol.CandidateRejected {
		t.Fatalf("decisions %+v", decs)
	}
	waitInbox(t, e, alice, client.InboxFilter{SessionID: id})
}
