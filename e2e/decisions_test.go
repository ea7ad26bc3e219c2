package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
)

// decisionsOf collects c's export for f.
func decisionsOf(t *testing.T, ctx context.Context, c *client.Client, f client.DecisionFilter) []client.Decision {
	t.Helper()
	var out []client.Decision
	if err := c.Decisions(ctx, f, func(d client.Decision) error { out = append(out, d); return nil }); err != nil {
		t.Fatalf("decisions %+v: %v", f, err)
	}
	return out
}

func ref(id string) *protocol.PrincipalRef {
	return &protocol.PrincipalRef{ID: id, Type: auth.TypeUser}
}

func sameRef(a, b *protocol.PrincipalRef) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// The decision record of a session matches what happened, field by field:
// a four-eyes transfer (the requester's refused approval, then a
// manager's from the inbox), a denial with a note, and a question answered
// by free text. Across sessions, an operator reads everyone's, a user only
// the sessions it may act on; filters narrow both; eve decisions prints
// the same lines.
func TestDecisionRecord(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	stopWorker := env.StartWorker(a)
	keys := map[string]*auth.Principal{"key-auditor": {ID: "auditor", Type: auth.TypeOperator}}
	for k, p := range apiTestKeys {
		keys[k] = p
	}
	// The manager may answer (not read the record of) anyone's session.
	authorize := func(_ context.Context, a api.SessionAccess) bool {
		return a.Caller.ID == "manager" && a.Action == api.ActionRespond
	}
	e := newAPIEnv(t, env, func(o *api.Options) {
		o.Keys = keys
		o.AuthorizeSession = authorize
	})
	ctx := e.Ctx(120 * time.Second)
	start := time.Now().Add(-time.Second)
	alice, bob, manager, auditor := e.as("key-alice"), e.as("key-bob"), e.as("key-manager"), e.as("key-auditor")

	// 1. A transfer: alice's own approval is refused, the manager's settles it.
	transfer := parkOver(t, ctx, alice, "", "transfer 25 to bob")
	sid := transfer.SessionID
	tr := transfer.Open[0]
	if _, err := alice.Respond(ctx, sid, protocol.InputResponse{RequestID: tr.RequestID, OptionID: "approve"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("alice's own approval: %v, want 400 rejected (the response policy refuses it)", err)
	}
	if _, err := manager.AnswerInbox(ctx, protocol.InboxID(sid, tr.RequestID), protocol.InboxAnswer{OptionID: "approve"}); err != nil {
		t.Fatal(err)
	}
	e.WaitIdle(sid)
	// 2. A refund alice denies with a note.
	refund := parkOver(t, ctx, alice, sid, "refund ch_1 for 5")
	rf := refund.Open[0]
	if _, _, err := alice.RespondAndWait(ctx, sid, []protocol.InputResponse{{RequestID: rf.RequestID, OptionID: "cancel", Text: "wrong charge"}}, nil); err != nil {
		t.Fatal(err)
	}
	// 3. A question answered by free text.
	plan := parkOver(t, ctx, alice, sid, "choose a plan")
	pl := plan.Open[0]
	if _, _, err := alice.RespondAndWait(ctx, sid, []protocol.InputResponse{{RequestID: pl.RequestID, Text: "Pro"}}, nil); err != nil {
		t.Fatal(err)
	}
	// And bob's own session: a refund he approves.
	bobs := parkOver(t, ctx, bob, "", "refund ch_2 for 7")
	if _, _, err := bob.RespondAndWait(ctx, bobs.SessionID, []protocol.InputResponse{{RequestID: bobs.Open[0].RequestID, OptionID: "approve"}}, nil); err != nil {
		t.Fatal(err)
	}
	evs := e.WaitIdle(sid)

	// The session's record, checked against its stream.
	ds := decisionsOf(t, ctx, alice, client.DecisionFilter{SessionID: sid})
	if len(ds) != 3 {
		t.Fatalf("alice's session: %d decisions, want 3: %+v", len(ds), ds)
	}
	asked := map[string]protocol.InputRequest{}
	askedAt := map[string]string{}
	for _, ev := range evetest.Of(evs, protocol.InputRequested) {
		var d protocol.InputRequestedData
		ev.Decode(&d)
		for _, r := range d.Requests {
			asked[r.RequestID], askedAt[r.RequestID] = r, ev.Meta.At
		}
	}
	resolvedAt := map[string]string{}
	for _, ev := range evetest.Of(evs, protocol.InputResolved) {
		var d protocol.InputResolvedData
		ev.Decode(&d)
		for _, r := range d.Resolutions {
			resolvedAt[r.RequestID] = ev.Meta.At
		}
	}
	turnOf := func(turn *client.Turn) string {
		for _, ev := range turn.Events {
			if ev.Type == protocol.TurnStarted {
				var r protocol.TurnRef
				ev.Decode(&r)
				return r.TurnID
			}
		}
		t.Fatal("no turn.started")
		return ""
	}
	turns := []string{turnOf(transfer), turnOf(refund), turnOf(plan)}
	for i, d := range ds {
		r := asked[d.RequestID]
		at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, s); return t }
		if d.SessionID != sid || d.TurnID != turns[i] || d.Kind != r.Kind || d.ToolName != r.Action.ToolName || d.CallID != r.Action.CallID ||
			d.Prompt != r.Prompt || !bytes.Equal(d.Input, r.Action.Input) || !sameRef(d.Requester, ref("alice")) ||
			!d.AskedAt.Equal(at(askedAt[d.RequestID])) || !d.DecidedAt.Equal(at(resolvedAt[d.RequestID])) || d.Deadline != nil || d.Withdrawn {
			t.Fatalf("decision %d = %+v\nasked %+v at %s, resolved at %s", i, d, r, askedAt[d.RequestID], resolvedAt[d.RequestID])
		}
	}
	if d := ds[0]; d.RequestID != tr.RequestID || d.Outcome != protocol.OutcomeApproved || !sameRef(d.Decider, ref("manager")) ||
		d.OptionID != "approve" || d.Prompt != "Transfer $25.00 to bob?" || len(d.Candidates) != 1 {
		t.Fatalf("the transfer's decision: %+v", d)
	} else if c := d.Candidates[0]; !sameRef(c.Principal, ref("alice")) || c.Outcome != protocol.CandidateRejected ||
		c.Reason != "A second person must approve transfers." || c.At.Before(d.AskedAt) || c.At.After(d.DecidedAt) {
		t.Fatalf("the transfer's refused candidate: %+v", c)
	}
	if d := ds[1]; d.RequestID != rf.RequestID || d.Outcome != protocol.OutcomeDenied || !sameRef(d.Decider, ref("alice")) ||
		d.Note != "wrong charge" || d.Text != "" || d.OptionID != "cancel" || len(d.Candidates) != 0 {
		t.Fatalf("the refund's decision: %+v", d)
	}
	if d := ds[2]; d.RequestID != pl.RequestID || d.Kind != protocol.KindQuestion || d.Outcome != protocol.OutcomeAnswered ||
		!sameRef(d.Decider, ref("alice")) || d.Text != "Pro" || d.Note != "" {
		t.Fatalf("the question's decision: %+v", d)
	}

	// Who may read it.
	wantError(t, e.do(t, "GET", "/eve/v1/decisions?session="+sid, nil, bearer("key-bob")), http.StatusForbidden, api.CodeForbidden, `may not decisions`)
	wantError(t, e.do(t, "GET", "/eve/v1/decisions?session="+sid, nil, bearer("key-manager")), http.StatusForbidden, api.CodeForbidden, "")
	wantError(t, e.do(t, "GET", "/eve/v1/decisions", nil, bearer("key-alice")), http.StatusBadRequest, api.CodeBadRequest, "?since=")
	wantError(t, e.do(t, "GET", "/eve/v1/decisions?since=yesterday", nil, bearer("key-alice")), http.StatusBadRequest, api.CodeBadRequest, "RFC 3339")
	if got := decisionsOf(t, ctx, auditor, client.DecisionFilter{SessionID: sid}); len(got) != 3 {
		t.Fatalf("the operator reads %d of the session's decisions, want 3", len(got))
	}

	// Across sessions (Visibility lists sessions eventually).
	since := client.DecisionFilter{Since: start}
	waitCount := func(c *client.Client, f client.DecisionFilter, want int) []client.Decision {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := decisionsOf(t, ctx, c, f)
			if len(got) == want {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("decisions %+v: %d, want %d: %+v", f, len(got), want, got)
			}
			time.Sleep(100 * time.Millisecond) // polling Visibility, not a barrier
		}
	}
	waitCount(auditor, since, 4)
	if got := waitCount(alice, since, 3); got[0].SessionID != sid {
		t.Fatalf("alice across sessions: %+v", got)
	}
	waitCount(bob, since, 1)
	waitCount(manager, since, 0)
	waitCount(auditor, client.DecisionFilter{Since: start, Tool: "refund_charge"}, 2)
	waitCount(auditor, client.DecisionFilter{Since: start, Principal: "bob"}, 1)
	waitCount(auditor, client.DecisionFilter{Since: start, Principal: "manager"}, 1)
	waitCount(auditor, client.DecisionFilter{Since: start, Outcome: protocol.OutcomeDenied}, 1)
	waitCount(auditor, client.DecisionFilter{Since: time.Now().Add(time.Hour)}, 0)
	waitCount(auditor, client.DecisionFilter{Since: start, Until: ds[0].DecidedAt}, 1)

	// eve decisions prints the same records, a JSON object per line.
	root := cli.NewRootCommand(cli.App{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"decisions", "--session", sid, "--url", e.URL, "--api-key", "key-alice"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("eve decisions: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("eve decisions printed %d lines:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		var d client.Decision
		if err := json.Unmarshal([]byte(l), &d); err != nil || d.RequestID != ds[i].RequestID || d.Outcome != ds[i].Outcome {
			t.Fatalf("line %d %q: %+v %v", i, l, d, err)
		}
	}

	// A closed session's record stays readable (from its history) by those
	// it allowed, for as long as the namespace retains it.
	if err := env.Client.TerminateWorkflow(ctx, bobs.SessionID, "", "end of the test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{bob, auditor} {
		if got := decisionsOf(t, ctx, c, client.DecisionFilter{SessionID: bobs.SessionID}); len(got) != 1 || got[0].Outcome != protocol.OutcomeApproved || !sameRef(got[0].Decider, ref("bob")) {
			t.Fatalf("the closed session's record: %+v", got)
		}
	}
	wantError(t, e.do(t, "GET", "/eve/v1/decisions?session="+bobs.SessionID, nil, bearer("key-alice")), http.StatusForbidden, api.CodeForbidden, "")

	// Sessions nobody answers for (no worker: open and closed ones alike
	// are read by a query) make the export say it is incomplete, naming
	// them. A server with a short per-session bound keeps the wait short;
	// the one above keeps the default, which a loaded worker's answers
	// stay well within.
	stopWorker()
	short := newAPIEnv(t, env, func(o *api.Options) {
		o.Keys = keys
		o.AuthorizeSession = authorize
		o.DecisionsSessionTimeout = 2 * time.Second
	})
	var got []client.Decision
	err = short.as("key-auditor").Decisions(ctx, since, func(d client.Decision) error { got = append(got, d); return nil })
	var inc *client.IncompleteDecisionsError
	if !errors.As(err, &inc) || !slices.Equal(sorted(inc.Sessions), sorted([]string{sid, bobs.SessionID})) || !strings.Contains(inc.Message, "did not answer within 2s") || len(got) != 0 {
		t.Fatalf("export without a worker: %d records, %v", len(got), err)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
