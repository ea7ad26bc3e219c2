package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// noticeLog records the worker's reminder hook calls.
type noticeLog struct {
	mu  sync.Mutex
	got []tools.Reminder
}

func (n *noticeLog) hook(_ context.Context, r tools.Reminder) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, r)
	return nil
}

func (n *noticeLog) list() []tools.Reminder {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// waitUntil polls cond up to 30 s (a bounded wait on state).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Escalation over HTTP, against the real server: before the set time the
// manager (role=manager) neither sees alice's approval in the inbox nor may
// answer it; once it escalates the stream records approval.escalated, the
// inbox lists it for the manager with escalatedAt, bob (no role) still may
// not answer, and the manager's approval settles it.
func TestEscalationLetsTheSecondGroupSettle(t *testing.T) {
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	refund, _ := a.Tools.Get("refund_charge")
	// The checks before the escalation must run before it: they take a
	// second or two here (Visibility lists the request first); the time
	// leaves a loaded machine room, and the test checks that they did.
	const after = 10 * time.Second
	refund.Approval = refund.Approval.EscalateAfter(after, "role", "manager")
	var notices noticeLog
	a.OnReminder = notices.hook
	env.StartWorkerHost(a, agent.Host{SearchAttributes: true, InboxAttributes: true})
	e := newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys })
	ctx := e.Ctx(90 * time.Second)
	turn := parkOver(t, ctx, e.as("key-alice"), "", "refund ch_7 70")
	rid := turn.Open[0].RequestID
	id := protocol.InboxID(turn.SessionID, rid)
	manager := e.as("key-manager")

	// Not before: the manager sees nothing and is refused.
	waitUntil(t, "alice's inbox to list the request", func() bool { return len(inboxAll(t, e, e.as("key-alice"), client.InboxFilter{})) == 1 })
	if items := inboxAll(t, e, manager, client.InboxFilter{}); len(items) != 0 {
		t.Fatalf("the manager's inbox before the escalation: %+v", items)
	}
	// The tenant filter reads the requester's tenantId (alice's is acme).
	for tenant, want := range map[string]int{"acme": 1, "globex": 0} {
		if items := inboxAll(t, e, e.as("key-alice"), client.InboxFilter{Tenant: tenant}); len(items) != want {
			t.Fatalf("tenant %s: %d items, want %d", tenant, len(items), want)
		}
	}
	r := e.do(t, "POST", "/eve/v1/inbox/"+id, map[string]any{"optionId": "approve"}, bearer("key-manager"))
	wantError(t, r, http.StatusForbidden, "forbidden", "")
	evs := env.Events(ctx, turn.SessionID)
	if len(evetest.Of(evs, protocol.ApprovalEscalated)) != 0 {
		t.Fatal("escalated before its time")
	}
	checked := time.Now()

	evs = waitFor(t, env, turn.SessionID, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.ApprovalEscalated)) == 1 })
	var esc protocol.ApprovalEscalatedData
	if err := evetest.Of(evs, protocol.ApprovalEscalated)[0].Decode(&esc); err != nil || esc.RequestID != rid || esc.Group != "role=manager" {
		t.Fatalf("approval.escalated %+v %v", esc, err)
	}
	asked, _ := time.Parse(time.RFC3339, evetest.Of(evs, protocol.InputRequested)[0].Meta.At)
	t.Logf("the checks before the escalation ended %v after the ask", checked.Sub(asked).Round(time.Millisecond))
	if !checked.Before(esc.At) {
		t.Fatalf("the checks before the escalation ended %v after the ask, past the escalation (%v): they proved nothing", checked.Sub(asked), after)
	}
	if waited := esc.At.Sub(asked); waited < after-time.Second {
		t.Fatalf("escalated %v after it was asked, want %v", waited, after)
	}
	var listed []client.InboxItem
	waitUntil(t, "the manager's inbox to list the escalated request", func() bool {
		listed = inboxAll(t, e, manager, client.InboxFilter{Escalated: true})
		return len(listed) == 1
	})
	if it := listed[0]; it.ID != id || it.EscalatedAt == nil || !it.EscalatedAt.Equal(esc.At) || it.EscalatedTo != "role=manager" || it.RequesterPrincipalID != "alice" {
		t.Fatalf("the manager's inbox item %+v", it)
	}
	if items := inboxAll(t, e, e.as("key-bob"), client.InboxFilter{}); len(items) != 0 {
		t.Fatalf("bob's inbox: %+v", items)
	}
	wantError(t, e.do(t, "POST", "/eve/v1/inbox/"+id, map[string]any{"optionId": "approve"}, bearer("key-bob")), http.StatusForbidden, "forbidden", "")

	r = e.do(t, "POST", "/eve/v1/inbox/"+id, map[string]any{"optionId": "approve"}, bearer("key-manager"))
	if r.Status != http.StatusAccepted {
		t.Fatalf("the manager's approval: %d %s", r.Status, r.Body)
	}
	evs = env.WaitIdle(turn.SessionID)
	var settled protocol.ApprovalSettledData
	if s := evetest.Of(evs, protocol.ApprovalSettled); len(s) != 1 || s[0].Decode(&settled) != nil || settled.ResponderPrincipalID != "manager" || settled.Outcome != protocol.OutcomeApproved {
		t.Fatalf("approval.settled %+v: %s", settled, evetest.Join(evs))
	}
	var ar protocol.ActionResultData
	if rs := evetest.Of(evs, protocol.ActionResult); len(rs) != 1 || rs[0].Decode(&ar) != nil || ar.Status != protocol.StatusCompleted {
		t.Fatalf("action.result %+v", ar)
	}
	// The decision record says when it escalated.
	var dec protocol.Decision
	if ds := evetest.Of(evs, protocol.DecisionRecorded); len(ds) != 1 || ds[0].Decode(&dec) != nil || dec.EscalatedAt == nil || !dec.EscalatedAt.Equal(esc.At.UTC().Truncate(time.Millisecond)) {
		t.Fatalf("decision.recorded %+v (escalated at %v)", dec, esc.At)
	}
	// The app heard of the escalation once, with the group's attribute.
	if got := notices.list(); len(got) != 1 || got[0].Escalation != "role=manager" || got[0].EscalationAttribute != "role" || got[0].RequestID != rid {
		t.Fatalf("hook calls %+v", got)
	}
}

// Reminders fire once each, against the real server, across a worker
// stopped between two of them, in a session that continued as new before
// the turn parked: each is one input.reminder and one hook call (distinct
// keys, numbered from 1), and a reminder that fell due while the worker
// was down is sent when it is back (a restarted worker may take a sticky
// queue's timeout, 5 s, to get the task: the deadline leaves room).
func TestRemindersOnceEach(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	const every, deadline = 3 * time.Second, time.Minute
	a.InputDeadline = deadline
	a.InputReminders = &tools.Reminders{Every: every}
	a.ContinueAsNewAfterTurns = 1
	var notices noticeLog
	a.OnReminder = notices.hook
	stop := env.StartWorker(a)
	ctx := env.Ctx(90 * time.Second)
	first, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Paris", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	id := first.SessionID
	res, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "choose a plan", Caller: alice, Wait: true})
	if err != nil || res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("park: %+v %v", res.Outcome, err)
	}
	evs := env.Events(ctx, id)
	asked, _ := time.Parse(time.RFC3339, evetest.Of(evs, protocol.InputRequested)[0].Meta.At)
	waitUntil(t, "the first reminder", func() bool { return len(notices.list()) >= 1 })
	stop() // queries need a worker: read what is needed before
	// The scenario: the worker is down when the second reminder is due.
	time.Sleep(time.Until(asked.Add(2*every + 500*time.Millisecond)))
	env.StartWorker(a)

	// The reminder due while it was down comes once it is back; then the
	// question is answered.
	evs = waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputReminder)) >= 2 })
	var q protocol.InputRequestedData
	evetest.Of(evs, protocol.InputRequested)[0].Decode(&q)
	respond(t, env, id, protocol.InputResponse{RequestID: q.Requests[0].RequestID, OptionID: "pro"})
	evs = waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.TurnCompleted)) == 2 })
	rems := evetest.Of(evs, protocol.InputReminder)
	if len(rems) < 2 {
		t.Fatalf("%d reminders, want at least 2: %s", len(rems), evetest.Join(evs))
	}
	keys := map[string]bool{}
	for _, n := range notices.list() {
		keys[n.IdempotencyKey] = true
	}
	for i, ev := range rems {
		var d protocol.InputReminderData
		if err := ev.Decode(&d); err != nil || d.Number != i+1 || d.Deadline.Sub(asked).Round(time.Second) != deadline {
			t.Fatalf("reminder %d: %+v %v", i, d, err)
		}
		if !keys[fmt.Sprintf("%s/turn_1/%s/%d", id, d.RequestID, d.Number)] {
			t.Fatalf("no hook call for reminder %d (keys %v)", d.Number, keys)
		}
	}
	if len(keys) != len(rems) {
		t.Fatalf("hook keys %v for %d reminders", keys, len(rems))
	}
	var resolved protocol.InputResolvedData
	if rs := evetest.Of(evs, protocol.InputResolved); len(rs) != 1 || rs[0].Decode(&resolved) != nil || resolved.Resolutions[0].Outcome != protocol.OutcomeAnswered {
		t.Fatalf("input.resolved %+v", resolved)
	}
	// The parked turn ran in the session's second run.
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetFirstRunId() == desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Fatalf("the session did not continue as new: %v", err)
	}
}
