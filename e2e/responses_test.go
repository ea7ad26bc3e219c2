package e2e

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Response policies (issue 23): who may settle an approval.

var carol = &auth.Principal{ID: "carol", Type: "user", Attributes: map[string]string{"role": "approver"}}

func candidates(t *testing.T, evs []protocol.Event) []protocol.ApprovalCandidateData {
	t.Helper()
	var out []protocol.ApprovalCandidateData
	for _, e := range evetest.Of(evs, protocol.ApprovalCandidate) {
		var d protocol.ApprovalCandidateData
		e.Decode(&d)
		out = append(out, d)
	}
	return out
}

func respondAs(env *evetest.Env, id string, who *auth.Principal, rs ...protocol.InputResponse) (signals.RespondResult, error) {
	return env.Sessions.Respond(env.Ctx(30*time.Second), id, signals.RespondRequest{Responses: rs, Responder: who, Wait: true})
}

// A four-eyes transfer: the requester's own approval is refused with the
// policy's reason and the request stays pending; a designated approver
// settles it, and the tool sees who approved while it runs as alice.
func TestFourEyesTransfer(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "transfer 25 to bob")
	r := d.Requests[0]
	if r.Prompt != "Transfer $25.00 to bob?" {
		t.Fatalf("prompt = %q, want the one built from the input", r.Prompt)
	}
	approve := protocol.InputResponse{RequestID: r.RequestID, OptionID: "approve"}
	res, err := respondAs(env, id, alice, approve)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resolutions) != 0 || res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("alice's own approval: %+v outcome %+v, want nothing settled and the turn waiting", res.Resolutions, res.Outcome)
	}
	evs := env.Events(env.Ctx(10*time.Second), id)
	cs := candidates(t, evs)
	if len(cs) != 2 || cs[0].Outcome != protocol.CandidatePending || cs[1].Outcome != protocol.CandidateRejected ||
		cs[1].Reason != "A second person must approve transfers." || cs[1].ResponderPrincipalID != "alice" || cs[0].CandidateID != cs[1].CandidateID {
		t.Fatalf("candidates = %+v", cs)
	}
	if tail := evetest.Types(evs[len(evs)-3:]); strings.Join(tail, " ") != "approval.candidate approval.candidate turn.waiting" {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.InputResolved)) + len(evetest.Of(evs, protocol.ApprovalSettled)); n != 0 {
		t.Fatalf("a refused response settled something: %s", evetest.Join(evs))
	}
	// A designated approver settles it.
	res, err = respondAs(env, id, carol, approve)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resolutions) != 1 || res.Resolutions[0].Outcome != protocol.OutcomeApproved ||
		res.Outcome == nil || res.Outcome.Reply != "Transfer to bob: 25 approved by carol" {
		t.Fatalf("carol's approval: %+v outcome %+v", res.Resolutions, res.Outcome)
	}
	evs = env.WaitIdle(id)
	got := strings.Join(evetest.Types(evs), " ")
	if !strings.Contains(got, "turn.waiting approval.candidate approval.settled input.resolved decision.recorded action.result") {
		t.Fatalf("events: %s", got)
	}
	var st protocol.ApprovalSettledData
	evetest.Of(evs, protocol.ApprovalSettled)[0].Decode(&st)
	if st.Outcome != protocol.OutcomeApproved || st.ResponderPrincipalID != "carol" || st.RequestID != r.RequestID {
		t.Fatalf("approval.settled = %+v", st)
	}
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if !strings.Contains(string(ar.Result.Output), `"requestedBy":"alice"`) || !strings.Contains(string(ar.Result.Output), `"approvedBy":"carol"`) {
		t.Fatalf("action.result = %s", ar.Result.Output)
	}
}

// Without a response policy only the requester settles: another person's
// answer is refused (nothing recorded); the requester's settles directly,
// approval.settled then input.resolved, with no candidate.
func TestRequesterOnlyByDefault(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "refund ch_42 for 25")
	r := d.Requests[0]
	if r.Prompt != "Refund $25.00 for charge ch_42?" {
		t.Fatalf("prompt = %q", r.Prompt)
	}
	approve := protocol.InputResponse{RequestID: r.RequestID, OptionID: "approve"}
	if _, err := respondAs(env, id, &auth.Principal{ID: "mallory", Type: "user"}, approve); err == nil || !strings.Contains(err.Error(), approval.ReasonRequesterOnly) {
		t.Fatalf("mallory's approval: %v, want refused", err)
	}
	res, err := respondAs(env, id, alice, approve)
	if err != nil || res.Outcome == nil || res.Outcome.Reply != "Refund of ch_42: 25" {
		t.Fatalf("alice: %+v, %v", res, err)
	}
	evs := env.WaitIdle(id)
	if len(evetest.Of(evs, protocol.ApprovalCandidate)) != 0 || !strings.Contains(evetest.Join(evs), "turn.waiting approval.settled input.resolved decision.recorded action.result") {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
}

// A response policy that fails, or does not answer in time, settles
// nothing: its candidate ends failed or timed-out and the request stays
// answerable; a later response the policy allows settles it.
func TestResponsePolicyFailsOrTimesOut(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	tool := countingTool("count", &runs, map[string]bool{"ok": true})
	tool.Approval = approval.Always().WithResponse(func(ctx context.Context, c approval.ResponseContext) (approval.Verdict, error) {
		switch c.Response.Principal.ID {
		case "broken":
			return approval.Verdict{}, errors.New("directory down")
		case "slow":
			<-ctx.Done() // the policy's deadline
			return approval.Verdict{}, ctx.Err()
		}
		return approval.Allow(), nil
	})
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: count, input: {n: 1}}]
      - reply: done
`, tool))
	id, d := startParked(t, env, "go")
	approve := protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"}
	for _, tc := range []struct{ who, outcome, reason string }{
		{"broken", protocol.CandidateFailed, "We couldn't verify your response. Please try again."},
		{"slow", protocol.CandidateTimedOut, "The approval policy did not answer in time. Please try again."},
	} {
		res, err := respondAs(env, id, &auth.Principal{ID: tc.who, Type: "user"}, approve)
		if err != nil || len(res.Resolutions) != 0 || res.Outcome.Status != signals.TurnStatusWaiting {
			t.Fatalf("%s: %+v, %v", tc.who, res, err)
		}
		cs := candidates(t, env.Events(env.Ctx(10*time.Second), id))
		last := cs[len(cs)-1]
		if last.Outcome != tc.outcome || last.Reason != tc.reason || last.ResponderPrincipalID != tc.who {
			t.Fatalf("%s: candidate %+v", tc.who, last)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("the tool ran %d times before an allowed response", runs.Load())
	}
	res, err := respondAs(env, id, &auth.Principal{ID: "ok", Type: "user"}, approve)
	if err != nil || res.Outcome.Status != signals.TurnStatusCompleted || runs.Load() != 1 {
		t.Fatalf("allowed: %+v, %v, runs %d", res, err, runs.Load())
	}
}

// "approve" typed by the requester is a response like any other: the
// four-eyes policy refuses it and the request stays open; the approver's
// typed "approve" (another person's message, offered to the turn because
// it answers an approval a response policy decides) settles it.
func TestRejectedPlainTextApprove(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, _ := startParked(t, env, "transfer 40 to dan")
	if _, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "approve", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool {
		cs := candidates(t, evs)
		return len(cs) == 2 && evs[len(evs)-1].Type == protocol.TurnWaiting
	})
	if cs := candidates(t, evs); cs[1].Outcome != protocol.CandidateRejected || cs[1].Reason != "A second person must approve transfers." {
		t.Fatalf("candidates = %+v", cs)
	}
	if len(evetest.Of(evs, protocol.InputResolved)) != 0 || len(evetest.Of(evs, protocol.TurnStarted)) != 1 {
		t.Fatalf("the refused text settled something or started a turn: %s", evetest.Join(evs))
	}
	if _, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "approve", Caller: carol}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id, idle(1))
	if env.Reply(id) != "Transfer to dan: 40 approved by carol" || len(evetest.Of(evs, protocol.TurnStarted)) != 1 {
		t.Fatalf("reply %q; events %s", env.Reply(id), evetest.Join(evs))
	}
	// Both typed answers are the turn's messages, not turns of their own.
	if n := len(evetest.Of(evs, protocol.MessageReceived)); n != 3 {
		t.Fatalf("%d message.received, want 3: %s", n, evetest.Join(evs))
	}
}
