package e2e

// HTTP flows of approvals, client-tool questions, answers and cancelling a
// parked turn (issue 3's workflow side, driven through the API server and
// the Go client).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/protocol"
)

// parkOver sends a message through c and waits until the turn parks on
// input; it returns the turn (Open holds the requests).
func parkOver(t *testing.T, ctx context.Context, c *client.Client, sessionID, msg string) *client.Turn {
	t.Helper()
	turn, err := c.SendAndWait(ctx, sessionID, msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != client.TurnWaiting || len(turn.Open) != 1 {
		t.Fatalf("turn = %s %+v: want it parked on one request", turn.Status, turn.Open)
	}
	last := turn.Events[len(turn.Events)-1]
	if last.Type != protocol.TurnWaiting {
		t.Fatalf("the response should end at turn.waiting, got %s", last.Type)
	}
	return turn
}

// An approval over HTTP: only the initiator may answer; bad answers are
// refused and record nothing; the approved call runs and the turn ends.
func TestAPIApprovalRespond(t *testing.T) {
	e := keyedAPI(t, nil)
	ctx := e.Ctx(60 * time.Second)
	alice, bob := e.as("key-alice"), e.as("key-bob")
	turn := parkOver(t, ctx, alice, "", "refund ch_1 for 10")
	id, req := turn.SessionID, turn.Open[0]
	if req.Kind != protocol.KindToolApproval || req.Action.ToolName != "refund_charge" {
		t.Fatalf("request = %+v", req)
	}
	pending, err := alice.Pending(ctx, id)
	if err != nil || len(pending) != 1 || pending[0].RequestID != req.RequestID || pending[0].TurnID != "turn_0" {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	before := ids(e.snapshot(t, id))
	approve := protocol.InputResponse{RequestID: req.RequestID, OptionID: "approve"}

	// bob is not the initiator: 403, and nothing changes.
	if _, err := bob.Respond(ctx, id, approve); !client.IsStatus(err, 403) {
		t.Fatalf("bob's answer: %v, want 403", err)
	}
	wantError(t, e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"inputResponses": []any{approve}}, map[string]string{"Authorization": "Bearer key-bob"}), 403, api.CodeForbidden, "bob")
	// Unknown request id, invalid option: 400, nothing recorded.
	if _, err := alice.Respond(ctx, id, protocol.InputResponse{RequestID: "apr_nope", OptionID: "approve"}); !client.IsStatus(err, 400) {
		t.Fatalf("unknown request id: %v", err)
	}
	_, err = alice.Respond(ctx, id, protocol.InputResponse{RequestID: req.RequestID, OptionID: "gold"})
	if !client.IsStatus(err, 400) || !strings.Contains(err.Error(), "gold") {
		t.Fatalf("invalid option: %v", err)
	}
	// The refusals came back, so anything the server sent the workflows is
	// in their histories; the snapshot is read by queries, which Temporal
	// answers only after the workflows have processed all of it.
	if after := ids(e.snapshot(t, id)); !slices.Equal(before, after) {
		t.Fatalf("refused answers recorded events: %d became %d", len(before), len(after))
	}
	if p, _ := alice.Pending(ctx, id); len(p) != 1 {
		t.Fatalf("still pending = %+v", p)
	}

	// alice approves: 202 with the resolution; the rest of the turn follows.
	acc, rest, err := alice.RespondAndWait(ctx, id, []protocol.InputResponse{approve}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Status != "accepted" || len(acc.Resolutions) != 1 || acc.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("accepted = %+v", acc)
	}
	if rest.Status != client.TurnCompleted || rest.Reply != "Refund of ch_1: 10" || rest.Events[0].Type != protocol.ApprovalSettled || rest.Events[1].Type != protocol.InputResolved {
		t.Fatalf("rest of the turn = %s %q %s", rest.Status, rest.Reply, joinTypes(rest.Events))
	}
	var ar protocol.ActionResultData
	for _, ev := range rest.Events {
		if ev.Type == protocol.ActionResult {
			ev.Decode(&ar)
		}
	}
	if !strings.Contains(string(ar.Result.Output), `"requestedBy":"alice"`) {
		t.Fatalf("action.result %s", ar.Result.Output)
	}
	// The request is settled and its turn over: answering again is a 409.
	if _, err := alice.Respond(ctx, id, approve); !client.IsStatus(err, 409) {
		t.Fatalf("answer after the turn ended: %v, want 409", err)
	}
	if p, _ := alice.Pending(ctx, id); len(p) != 0 {
		t.Fatalf("pending after approval = %+v", p)
	}
}

// The app's session hook lets others answer; for answers it sees the
// requests. (It also decides the other routes: see api_authz_test.go.)
func TestAPIResponderPolicy(t *testing.T) {
	var mu sync.Mutex
	var checks []api.SessionAccess
	e := keyedAPI(t, func(o *api.Options) {
		o.AuthorizeSession = func(_ context.Context, a api.SessionAccess) bool {
			if a.Action == api.ActionRespond {
				mu.Lock()
				checks = append(checks, a)
				mu.Unlock()
			}
			return a.Caller.Attr("role") == "manager"
		}
	})
	ctx := e.Ctx(60 * time.Second)
	// transfer_funds has a response policy (demo.FourEyes) that lets anyone
	// the session allows cancel; without one only alice could answer.
	turn := parkOver(t, ctx, e.as("key-alice"), "", "transfer 20 to bob")
	req := turn.Open[0]
	deny := protocol.InputResponse{RequestID: req.RequestID, OptionID: "cancel", Text: "not today"}
	if _, err := e.as("key-bob").Respond(ctx, turn.SessionID, deny); !client.IsStatus(err, 403) {
		t.Fatalf("bob: %v, want 403", err)
	}
	acc, rest, err := e.as("key-manager").RespondAndWait(ctx, turn.SessionID, []protocol.InputResponse{deny}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Resolutions[0].Outcome != protocol.OutcomeDenied || rest.Status != client.TurnCompleted {
		t.Fatalf("manager's denial: %+v, turn %s %q", acc, rest.Status, rest.Reply)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(checks) != 2 || checks[0].Caller.ID != "bob" || checks[1].Caller.ID != "manager" ||
		checks[1].Owner.ID != "alice" || checks[1].SessionID != turn.SessionID ||
		len(checks[1].Requests) != 1 || checks[1].Requests[0].RequestID != req.RequestID || !reflect.DeepEqual(checks[1].Responses[0], deny) {
		t.Fatalf("policy checks = %+v", checks)
	}
}

// Client tools park the turn on a question; the answer is the tool's result.
func TestAPIClientToolQuestion(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(60 * time.Second)
	turn := parkOver(t, ctx, e.C, "", "choose a plan")
	q := turn.Open[0]
	if q.Kind != protocol.KindQuestion || len(q.Options) != 2 || q.Action.ToolName != "choose_plan" {
		t.Fatalf("question = %+v", q)
	}
	_, rest, err := e.C.RespondAndWait(ctx, turn.SessionID, []protocol.InputResponse{{RequestID: q.RequestID, OptionID: "pro"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Status != client.TurnCompleted || rest.Reply != "You picked pro." {
		t.Fatalf("turn = %s %q", rest.Status, rest.Reply)
	}
	// ask_question with free text, in the same session.
	turn2 := parkOver(t, ctx, e.C, turn.SessionID, "ask me something")
	_, rest2, err := e.C.RespondAndWait(ctx, turn.SessionID, []protocol.InputResponse{{RequestID: turn2.Open[0].RequestID, Text: "green"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rest2.Reply != "You said green." {
		t.Fatalf("reply %q", rest2.Reply)
	}
}

// Cancelling a parked turn settles its request as cancelled and ends it.
func TestAPICancelParkedTurn(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(60 * time.Second)
	turn := parkOver(t, ctx, e.C, "", "refund ch_9 9")
	id := turn.SessionID
	from := turn.Next
	res, err := e.C.Cancel(ctx, id, "")
	if err != nil || res.Status != "accepted" || res.SessionID != id {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	rest, err := e.C.WaitTurn(ctx, id, "", from, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinTypes(rest.Events); got != "input.resolved decision.recorded action.result turn.cancelled session.waiting" || rest.Status != client.TurnCancelled {
		t.Fatalf("after cancel: %s (%s)", got, rest.Status)
	}
	if res, err := e.C.Cancel(ctx, id, ""); err != nil || res.Status != "no_active_turn" {
		t.Fatalf("second cancel = %+v, %v", res, err)
	}
	if p, _ := e.C.Pending(ctx, id); len(p) != 0 {
		t.Fatalf("pending after cancel = %+v", p)
	}
	next, err := e.C.SendAndWait(ctx, id, "what's the weather in Oslo", nil)
	if err != nil || next.Status != client.TurnCompleted {
		t.Fatalf("next turn = %+v, %v", next, err)
	}
}

func joinTypes(evs []protocol.Event) string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return strings.Join(out, " ")
}

// An answer a response policy refuses is never accepted: the HTTP answer
// (inputResponses and the inbox alike) is 400 rejected naming the request
// and the policy's reason; the Go client's *Error carries the refusal and
// `eve inbox approve` prints it; the request stays open and a reviewer's
// approval then settles it (200 would say "partial" had others settled).
func TestAPIRefusedResponseSaysWhy(t *testing.T) {
	e := keyedAPI(t, func(o *api.Options) {
		// The manager may answer alice's approvals (not read her session).
		o.AuthorizeSession = func(_ context.Context, a api.SessionAccess) bool {
			return a.Caller.ID == "manager" && a.Action == api.ActionRespond
		}
	})
	ctx := e.Ctx(60 * time.Second)
	alice := e.as("key-alice")
	turn := parkOver(t, ctx, alice, "", "transfer 25 to bob")
	sid, rid := turn.SessionID, turn.Open[0].RequestID
	const why = "A second person must approve transfers."
	refusal := func(n int) []protocol.Refusal {
		return []protocol.Refusal{{RequestID: rid, CandidateID: fmt.Sprintf("cnd_%s.%d", rid, n), Outcome: protocol.CandidateRejected, Reason: why}}
	}

	// Over HTTP: 400 rejected; the body names the request and the reason.
	r := e.do(t, "POST", "/eve/v1/session/"+sid, map[string]any{"inputResponses": []any{map[string]string{"requestId": rid, "optionId": "approve"}}},
		map[string]string{"Authorization": "Bearer key-alice"})
	wantError(t, r, http.StatusBadRequest, api.CodeRejected, rid+" was refused (rejected) and the request stays open: "+why)
	var body protocol.ErrorBody
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refusal(1), body.Refused); diff != "" {
		t.Errorf("HTTP answer's refused (-want +got):\n%s", diff)
	}

	// The Go client: an *Error whose Refused says which and why.
	_, err := alice.Respond(ctx, sid, protocol.InputResponse{RequestID: rid, OptionID: "approve"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Code != api.CodeRejected {
		t.Fatalf("Go client: %v, want a 400 rejected *client.Error", err)
	}
	if diff := cmp.Diff(refusal(2), ce.Refused); diff != "" {
		t.Errorf("Go client's Refused (-want +got):\n%s", diff)
	}

	// `eve inbox approve`: fails with the request, outcome and reason (the
	// binary prints the error).
	root := cli.NewRootCommand(cli.App{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"inbox", "approve", protocol.InboxID(sid, rid), "--url", e.URL, "--api-key", "key-alice"})
	err = root.ExecuteContext(ctx)
	want := "refused: " + rid + " (rejected): " + why + "; the request stays open"
	if err == nil || err.Error() != want || strings.Contains(out.String(), "accepted") {
		t.Fatalf("eve inbox approve: error %v, output %q; want the error %q", err, out.String(), want)
	}

	// Three candidates, each refused; the request is still open.
	evs := e.snapshot(t, sid)
	if cs := candidates(t, evs); len(cs) != 6 || cs[5].Outcome != protocol.CandidateRejected || cs[5].Reason != why {
		t.Fatalf("approval.candidate events: %+v", cs)
	}
	if p, err := alice.Pending(ctx, sid); err != nil || len(p) != 1 {
		t.Fatalf("pending after the refusals: %+v, %v", p, err)
	}
	// The manager's approval settles it: 202 accepted, no refusals.
	acc, err := e.as("key-manager").AnswerInbox(ctx, protocol.InboxID(sid, rid), protocol.InboxAnswer{OptionID: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Status != "accepted" || len(acc.Refused) != 0 || len(acc.Resolutions) != 1 || acc.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("manager's approval: %+v", acc)
	}
}
