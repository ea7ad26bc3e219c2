package workflows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// notices records what the worker's reminder hook was called with.
type notices struct {
	mu  sync.Mutex
	got []tools.Reminder
}

func (n *notices) hook(_ context.Context, r tools.Reminder) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, r)
	return nil
}

func (n *notices) list() []tools.Reminder {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]tools.Reminder(nil), n.got...)
}

// withRefund changes the harness's refund tool and installs the hook.
func withRefund(n *notices, edit func(*tools.Tool)) func(*agent.Agent) {
	return func(a *agent.Agent) {
		t, _ := a.Tools.Get("refund")
		edit(t)
		a.OnReminder = n.hook
	}
}

// A call's own deadline (the policy's, from the input) wins over the
// tool's; reminders fire before it, once each, as events and hook calls
// (one activity each); at the deadline the request expires.
func TestTurnRequestDeadlineAndReminders(t *testing.T) {
	var n notices
	h := newHarness(t, withRefund(&n, func(tl *tools.Tool) {
		tl.InputDeadline = time.Hour
		tl.InputReminders = &tools.Reminders{Before: []time.Duration{5 * time.Minute, time.Minute}}
		tl.Approval = approval.Always().WithDeadline(func(c approval.PromptContext) time.Duration {
			var in struct{ Amount float64 }
			if c.Input(&in) == nil && in.Amount > 100 {
				return 10 * time.Minute
			}
			return 0
		})
	}))
	wid := turnWorkflowID(0)
	var atFour, atEight []protocol.Event
	h.at(4*time.Minute, func() { atFour = h.turnEvents(wid) })
	h.at(8*time.Minute, func() { atEight = h.turnEvents(wid) })
	in := turnInput("refund ch_1 500")
	in.Config.ReminderHook = true
	out := h.runTurn(in)

	if len(of(atFour, protocol.InputReminder)) != 0 || len(of(atEight, protocol.InputReminder)) != 1 {
		t.Fatalf("reminders at 4 min %d, at 8 min %d; want 0 then 1 (due at 5 and 9 min)", len(of(atFour, protocol.InputReminder)), len(of(atEight, protocol.InputReminder)))
	}
	rem := of(out.Events, protocol.InputReminder)
	if len(rem) != 2 {
		t.Fatalf("input.reminder %d times, want 2: %s", len(rem), join(out.Events))
	}
	var first, second protocol.InputReminderData
	decode(t, rem[0], &first)
	decode(t, rem[1], &second)
	if first.Number != 1 || second.Number != 2 || second.Deadline.Sub(first.At) != 5*time.Minute || second.Deadline.Sub(second.At) != time.Minute ||
		!strings.HasPrefix(first.RequestID, "apr_") {
		t.Fatalf("reminders %+v %+v", first, second)
	}
	rs := resolutions(t, out.Events)
	if len(rs) != 1 || rs[0].Outcome != protocol.OutcomeExpired {
		t.Fatalf("resolutions %+v", rs)
	}
	if r := reply(t, out.Events); !strings.Contains(r, protocol.CodeInputExpired) {
		t.Fatalf("reply %q", r)
	}
	got := n.list()
	if len(got) != 2 || got[0].Number != 1 || got[1].Number != 2 || got[0].IdempotencyKey != "s1/turn_0/"+first.RequestID+"/1" ||
		got[0].ToolName != "refund" || got[0].Requester == nil || got[0].Requester.ID != "alice" || !got[0].Deadline.Equal(first.Deadline) {
		t.Fatalf("hook calls %+v", got)
	}
	// The deadline is the call's (10 min after it was asked), not the tool's hour.
	asked, err := time.Parse(time.RFC3339, of(out.Events, protocol.InputRequested)[0].Meta.At)
	if err != nil || first.Deadline.Sub(asked).Round(time.Second) != 10*time.Minute {
		t.Fatalf("deadline %v, asked at %v (%v)", first.Deadline, asked, err)
	}
}

var (
	bob   = &auth.Principal{ID: "bob", Type: "user"}
	carol = &auth.Principal{ID: "carol", Type: "user", Attributes: map[string]string{"group": "managers"}}
)

func (h *harness) respondAs(wid string, who *auth.Principal, resps ...protocol.InputResponse) *update[signals.RespondResult] {
	return sendUpdate[signals.RespondResult](h, wid, signals.UpdateRespond, signals.RespondRequest{Responses: resps, Responder: who})
}

// Escalation: before it, a manager's approval is rejected (only the
// requester may decide); after the set time the turn records
// approval.escalated, the response policy sees the request as escalated,
// the hook hears of it, and the manager's approval settles the call.
func TestTurnEscalation(t *testing.T) {
	var n notices
	var mu sync.Mutex
	var seen []*time.Time
	h := newHarness(t, withRefund(&n, func(tl *tools.Tool) {
		tl.Approval = approval.Always().WithResponse(func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
			mu.Lock()
			seen = append(seen, c.Request.EscalatedAt)
			mu.Unlock()
			if approval.SamePrincipal(c.Request.Principal, c.Response.Principal) {
				return approval.Allow(), nil
			}
			return approval.Reject("only the requester, until it escalates"), nil
		}).EscalateAfter(30*time.Minute, "group", "managers")
	}))
	wid := turnWorkflowID(0)
	var early, late *update[signals.RespondResult]
	var reqID string
	h.at(10*time.Minute, func() {
		reqs := h.parkedOn(wid, "input")
		if len(reqs) != 1 {
			t.Errorf("open %+v", reqs)
			return
		}
		reqID = reqs[0].RequestID
		early = h.respondAs(wid, carol, protocol.InputResponse{RequestID: reqID, OptionID: "approve"})
	})
	h.at(20*time.Minute, func() {
		if len(of(h.turnEvents(wid), protocol.ApprovalEscalated)) != 0 || len(h.executed()) != 0 {
			t.Errorf("escalated or ran before its time: %s", join(h.turnEvents(wid)))
		}
	})
	h.at(40*time.Minute, func() {
		late = h.respondAs(wid, carol, protocol.InputResponse{RequestID: reqID, OptionID: "approve"})
	})
	in := turnInput("refund ch_1 5")
	in.Config.ReminderHook = true
	out := h.runTurn(in)

	if early == nil || early.err != nil || len(early.result.Resolutions) != 0 {
		t.Fatalf("the manager's early approval settled something: %+v", early)
	}
	esc := of(out.Events, protocol.ApprovalEscalated)
	if len(esc) != 1 {
		t.Fatalf("approval.escalated %d times: %s", len(esc), join(out.Events))
	}
	var e protocol.ApprovalEscalatedData
	decode(t, esc[0], &e)
	asked, _ := time.Parse(time.RFC3339, of(out.Events, protocol.InputRequested)[0].Meta.At)
	if e.RequestID != reqID || e.Group != "group=managers" || e.At.Sub(asked).Round(time.Second) != 30*time.Minute {
		t.Fatalf("approval.escalated %+v (asked at %v)", e, asked)
	}
	if late == nil || late.err != nil || len(late.result.Resolutions) != 1 || late.result.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("the manager's approval after escalation: %+v", late)
	}
	var settled protocol.ApprovalSettledData
	decode(t, of(out.Events, protocol.ApprovalSettled)[0], &settled)
	if settled.ResponderPrincipalID != "carol" || len(h.executed()) != 1 {
		t.Fatalf("settled %+v, executed %v", settled, h.executed())
	}
	// The policy saw the request unescalated, then escalated (the
	// escalation's own rule allowed the second answer without asking it).
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != nil {
		t.Fatalf("the policy saw escalatedAt %v", seen)
	}
	got := n.list()
	if len(got) != 1 || got[0].Escalation != "group=managers" || got[0].EscalationAttribute != "group" || got[0].IdempotencyKey != "s1/turn_0/"+reqID+"/escalation" {
		t.Fatalf("hook calls %+v", got)
	}
}

// input.requested carries each request's times (0.5): its deadline, its
// next reminder and when it escalates, each only when it has one.
func TestTurnInputRequestedCarriesItsTimes(t *testing.T) {
	type times struct{ Deadline, NextReminder, Escalates time.Duration } // after the request was asked; 0: none
	for _, c := range []struct {
		name string
		edit func(*tools.Tool)
		want times
	}{
		{"a deadline and its reminders", func(tl *tools.Tool) {
			tl.InputDeadline = time.Hour
			tl.InputReminders = &tools.Reminders{Before: []time.Duration{5 * time.Minute, time.Minute}}
		}, times{Deadline: time.Hour, NextReminder: 55 * time.Minute}},
		{"an escalation", func(tl *tools.Tool) {
			tl.Approval = approval.Always().WithResponse(func(_ context.Context, _ approval.ResponseContext) (approval.Verdict, error) {
				return approval.Allow(), nil
			}).EscalateAfter(30*time.Minute, "group", "managers")
		}, times{Escalates: 30 * time.Minute}},
		{"none", func(*tools.Tool) {}, times{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n notices
			h := newHarness(t, withRefund(&n, c.edit))
			wid := turnWorkflowID(0)
			h.at(10*time.Minute, func() {
				if reqs := h.parkedOn(wid, "input"); len(reqs) == 1 {
					h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
				}
			})
			out := h.runTurn(turnInput("refund ch_1 5"))
			asked := of(out.Events, protocol.InputRequested)
			if len(asked) != 1 {
				t.Fatalf("input.requested %d times: %s", len(asked), join(out.Events))
			}
			at, err := time.Parse(time.RFC3339, asked[0].Meta.At)
			if err != nil {
				t.Fatal(err)
			}
			var data protocol.InputRequestedData
			decode(t, asked[0], &data)
			after := func(p *time.Time) time.Duration {
				if p == nil {
					return 0
				}
				return p.Sub(at).Round(time.Second)
			}
			r := data.Requests[0]
			got := times{Deadline: after(r.Deadline), NextReminder: after(r.NextReminderAt), Escalates: after(r.EscalatesAt)}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("input.requested's times after it was asked (-want +got):\n%s", diff)
			}
		})
	}
}
