package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// s1 is a session's input as eve's starters give it (signals.SessionVersions).
var s1 = workflows.SessionInput{SessionID: "s1", Initiator: alice, Versions: signals.SessionVersions}

// forGenerations runs a test of a session's messages with s1 and with the
// input of a session started before eve's input generations (Versions 0),
// whose old paths (the session's mirror of its turn's prompts among them)
// running sessions still take.
func forGenerations(t *testing.T, test func(t *testing.T, s1 workflows.SessionInput)) {
	t.Helper()
	legacy := s1
	legacy.Versions = 0
	for _, g := range []struct {
		name string
		in   workflows.SessionInput
	}{{"current", s1}, {"legacy", legacy}} {
		t.Run(g.name, func(t *testing.T) { test(t, g.in) })
	}
}

// afterTurns makes the session continue as new after n turns, which ends
// the run under test.
func afterTurns(n int) func(*agent.Agent) {
	return func(a *agent.Agent) { a.ContinueAsNewAfterTurns = n }
}

// continuedWith returns the input of the run a session continued as new with.
func continuedWith(t *testing.T, err error) workflows.SessionInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("the session did not continue as new: %v", err)
	}
	if can.WorkflowType.Name != signals.SessionWorkflow {
		t.Fatalf("continued as %s", can.WorkflowType.Name)
	}
	var in workflows.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// A message starts a turn in a child workflow; its events join the
// session's log between session.started and session.waiting. A waiting
// sender hears that the turn parked, and the respond goes to the turn.
// approval.Once carries to the session's next turn, which does not ask.
func TestSessionOnce(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(2))
		var first, second *update[signals.SendResult]
		var state signals.SessionSummary
		h.at(time.Minute, func() {
			first = h.send(signals.SendRequest{Message: "look up a", DeliveryID: "dlv_a", Wait: true})
		})
		h.at(2*time.Minute, func() {
			if reqs := h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 1 {
				h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
			}
		})
		h.at(3*time.Minute, func() {
			second = h.send(signals.SendRequest{Message: "look up b", DeliveryID: "dlv_b", Wait: true})
		})
		err := h.runSession(s1)
		next := continuedWith(t, err)

		if !first.completed || first.result.TurnID != "turn_0" || first.result.Outcome == nil || first.result.Outcome.Status != signals.TurnStatusWaiting {
			t.Fatalf("first send %+v (%+v)", first, first.result.Outcome)
		}
		if !second.completed || second.result.TurnID != "turn_1" || second.result.Sequence != 1 || second.result.Outcome == nil ||
			second.result.Outcome.Status != signals.TurnStatusCompleted || second.result.Outcome.Reply != "found v-b" {
			t.Fatalf("second send %+v (%+v)", second, second.result.Outcome)
		}
		if len(h.turns) != 2 {
			t.Fatalf("%d turns", len(h.turns))
		}
		if len(of(h.turns[0].Events, protocol.InputRequested)) != 1 || len(of(h.turns[1].Events, protocol.InputRequested)) != 0 {
			t.Fatalf("turn 0: %s\nturn 1: %s", join(h.turns[0].Events), join(h.turns[1].Events))
		}
		if got := h.executed(); !slices.Equal(got, []string{`lookup:{"key":"a"}`, `lookup:{"key":"b"}`}) {
			t.Fatalf("executed %v", got)
		}

		page := h.sessionEvents(0)
		evs := page.Events
		want := []string{protocol.SessionStarted}
		for _, turn := range h.turns {
			want = append(append(want, types(turn.Events)...), protocol.SessionWaiting)
		}
		wantTypes(t, evs, want...)
		if page.Total != len(evs) || page.ActiveTurn != nil {
			t.Fatalf("page total %d active %+v", page.Total, page.ActiveTurn)
		}
		o := second.result.Outcome
		if evs[o.FirstEvent].Type != protocol.TurnStarted || o.LastEvent != len(evs)-1 {
			t.Fatalf("outcome indexes %d..%d: %s", o.FirstEvent, o.LastEvent, join(evs))
		}
		for _, e := range evs[o.FirstEvent:] {
			if e.Type != protocol.SessionWaiting && !slices.Equal(e.Meta.DeliveryIDs, []string{"dlv_b"}) {
				t.Fatalf("%s of turn 1 carries %v", e.Type, e.Meta.DeliveryIDs)
			}
		}
		if !slices.Equal(next.State.ApprovedTools, []string{"lookup"}) {
			t.Fatalf("approved tools carried: %v", next.State.ApprovedTools)
		}
		if v, err := h.QueryWorkflow(signals.QueryState); err != nil {
			t.Fatal(err)
		} else if err := v.Get(&state); err != nil || state.Turns != 2 || state.Queued != 0 || state.Conversation == nil {
			t.Fatalf("state %+v (%v)", state, err)
		}
	})
}

// After ContinueAsNewAfterTurns turns the session continues as new,
// carrying its conversation, once-approvals, sequence and event indexes;
// the next run goes on from there and points at the earlier run's events.
func TestSessionContinueAsNew(t *testing.T) {
	h := newHarness(t, afterTurns(1))
	h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "look up a"}) })
	h.at(2*time.Minute, func() {
		if reqs := h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 1 {
			h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
		}
	})
	err := h.runSession(s1)
	next := continuedWith(t, err)
	run1 := h.sessionEvents(0).Events
	if n := len(run1); n == 0 || run1[n-1].Type != protocol.SessionWaiting {
		t.Fatalf("run 1: %s", join(run1))
	}
	st := next.State
	if next.SessionID != "s1" || next.Initiator == nil || next.Initiator.ID != "alice" || st == nil {
		t.Fatalf("continued with %+v", next)
	}
	if len(st.Events) != 0 || st.EventBase != len(run1) || st.NextSeq != 1 || st.RunFirstTurn != 1 || len(st.Queue) != 0 ||
		len(st.Runs) != 1 || st.Runs[0].From != 0 || st.Runs[0].To != len(run1) || st.Runs[0].RunID == "" ||
		!slices.Equal(st.ApprovedTools, []string{"lookup"}) || st.Conversation == nil || st.Config.ContinueAsNewAfterTurns != 1 {
		t.Fatalf("carried state %+v", st)
	}

	// The next run: a new environment on the same conversation store.
	h2 := newHarnessOn(t, h.store, func(a *agent.Agent) { a.ContinueAsNewAfterTurns = 1 })
	var sent *update[signals.SendResult]
	h2.at(time.Minute, func() { sent = h2.send(signals.SendRequest{Message: "look up b", Wait: true}) })
	next2 := continuedWith(t, h2.runSession(next))

	if !sent.completed || sent.result.TurnID != "turn_1" || sent.result.Outcome.Status != signals.TurnStatusCompleted ||
		sent.result.Outcome.FirstEvent != len(run1) {
		t.Fatalf("send %+v (%+v)", sent, sent.result.Outcome)
	}
	if len(h2.turns) != 1 || len(of(h2.turns[0].Events, protocol.InputRequested)) != 0 {
		t.Fatalf("the once-approval was lost: %s", join(h2.turns[0].Events))
	}
	page := h2.sessionEvents(0)
	if page.From != len(run1) || len(page.Runs) != 1 || page.Runs[0] != st.Runs[0] || page.Total != len(run1)+len(page.Events) ||
		page.Events[0].Type != protocol.TurnStarted || page.Events[0].Meta.ID == run1[0].Meta.ID {
		t.Fatalf("run 2 page from %d runs %+v total %d: %s", page.From, page.Runs, page.Total, join(page.Events))
	}
	var started protocol.TurnRef
	decode(t, page.Events[0], &started)
	if started.Sequence != 1 || started.TurnID != "turn_1" {
		t.Fatalf("turn.started %+v", started)
	}
	// Both turns are in the one conversation: user, call, result, answer each.
	msgs, err := conversation.New(h.store).Load(context.Background(), *next2.State.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 8 || msgs[0].Text != "look up a" || msgs[4].Text != "look up b" || msgs[7].Text != "found v-b" {
		t.Fatalf("conversation of %d messages: %+v", len(msgs), msgs)
	}
	if next2.State.EventBase != len(run1)+len(page.Events) || len(next2.State.Runs) != 2 || next2.State.RunFirstTurn != 2 {
		t.Fatalf("second carry %+v", next2.State)
	}
}

// The cancel control cancels the running turn (a parked one too); with no
// turn running it says so.
func TestSessionCancel(t *testing.T) {
	h := newHarness(t, nil)
	var sent *update[signals.SendResult]
	var other, cancel, idle *update[signals.ControlResult]
	var state signals.SessionSummary
	h.at(time.Minute, func() {
		sent = h.send(signals.SendRequest{Message: "refund ch_1 5", Wait: true})
	})
	h.at(2*time.Minute, func() {
		h.parkedOn(turnWorkflowID(0), "input")
		other = sendUpdate[signals.ControlResult](h, "", signals.UpdateControl, signals.ControlRequest{Op: signals.ControlCancel, TurnID: "turn_7"})
		cancel = sendUpdate[signals.ControlResult](h, "", signals.UpdateControl, signals.ControlRequest{Op: signals.ControlCancel, TurnID: "turn_0"})
	})
	h.at(3*time.Minute, func() {
		idle = sendUpdate[signals.ControlResult](h, "", signals.UpdateControl, signals.ControlRequest{Op: signals.ControlCancel})
		if v, err := h.QueryWorkflow(signals.QueryState); err != nil || v.Get(&state) != nil {
			t.Errorf("state: %v", err)
		}
		h.CancelWorkflow() // end the session
	})
	err := h.runSession(s1)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("session ended with %v", err)
	}

	if other.result.Status != signals.ControlNoActiveTurn || cancel.result.Status != signals.ControlAccepted || idle.result.Status != signals.ControlNoActiveTurn {
		t.Fatalf("controls: other turn %+v, cancel %+v, idle %+v", other.result, cancel.result, idle.result)
	}
	if sent.result.Outcome == nil || sent.result.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("send %+v", sent.result)
	}
	if len(h.turns) != 1 || h.turns[0].Outcome.Status != signals.TurnStatusCancelled {
		t.Fatalf("turns %+v", h.turns)
	}
	evs := h.sessionEvents(0).Events
	if got := join(evs); !strings.HasSuffix(got, "turn.waiting input.resolved decision.recorded action.result turn.cancelled session.waiting") {
		t.Fatalf("events %s", got)
	}
	if rs := resolutions(t, evs); len(rs) != 1 || rs[0].Outcome != protocol.OutcomeCancelled {
		t.Fatalf("input.resolved %+v", rs)
	}
	if len(h.executed()) != 0 || state.ActiveTurn != nil || state.Turns != 1 {
		t.Fatalf("executed %v, state %+v", h.executed(), state)
	}
}

// A message from the person a parked turn serves that answers its first
// prompt resolves it, in the same turn.
func TestSessionMessageAnswersPrompt(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(1))
		var answer *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "refund ch_1 5", DeliveryID: "dlv_refund"}) })
		h.at(2*time.Minute, func() {
			h.parkedOn(turnWorkflowID(0), "input")
			answer = h.send(signals.SendRequest{Message: "Approve", DeliveryID: "dlv_approve", Wait: true})
		})
		continuedWith(t, h.runSession(s1))

		if !answer.completed || answer.result.TurnID != "turn_0" || answer.result.Outcome == nil ||
			answer.result.Outcome.Status != signals.TurnStatusCompleted || answer.result.Outcome.Reply != "refund ch_1: 5" {
			t.Fatalf("answer %+v (%+v)", answer, answer.result.Outcome)
		}
		evs := h.sessionEvents(0).Events
		if n := len(of(evs, protocol.TurnStarted)); n != 1 {
			t.Fatalf("%d turns: %s", n, join(evs))
		}
		if got := join(evs); !strings.Contains(got, "turn.waiting message.received approval.settled input.resolved decision.recorded action.result") {
			t.Fatalf("events %s", got)
		}
		mr := of(evs, protocol.MessageReceived)
		var m protocol.MessageReceivedData
		decode(t, mr[1], &m)
		if m.Message != "Approve" || !slices.Contains(mr[1].Meta.DeliveryIDs, "dlv_approve") {
			t.Fatalf("message.received %+v %v", m, mr[1].Meta.DeliveryIDs)
		}
		if rs := resolutions(t, evs); len(rs) != 1 || rs[0].Outcome != protocol.OutcomeApproved {
			t.Fatalf("input.resolved %+v", rs)
		}
		if !slices.Equal(h.turns[0].Taken, []string{"dlv_approve"}) || len(h.executed()) != 1 {
			t.Fatalf("taken %v, executed %v", h.turns[0].Taken, h.executed())
		}
	})
}

// A message that answers nothing steers: the open approval is withdrawn
// (ignored, its call does not run), the call approved before runs, and the
// model reads the message in the next step of the same turn.
func TestSessionSteer(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(1))
		var reqs []protocol.InputRequest
		var steer *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "refund both"}) })
		h.at(2*time.Minute, func() {
			if reqs = h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 2 {
				h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
			}
		})
		h.at(3*time.Minute, func() {
			h.parkedOn(turnWorkflowID(0), "input") // on the second approval
			steer = h.send(signals.SendRequest{Message: "and the weather in Oslo", DeliveryID: "dlv_steer"})
		})
		continuedWith(t, h.runSession(s1))

		if len(reqs) != 2 || steer.result.TurnID != "turn_0" {
			t.Fatalf("requests %+v, steer %+v", reqs, steer.result)
		}
		evs := h.sessionEvents(0).Events
		if n := len(of(evs, protocol.TurnStarted)); n != 1 {
			t.Fatalf("%d turns: %s", n, join(evs))
		}
		rs := resolutions(t, evs)
		if len(rs) != 2 || rs[0].Outcome != protocol.OutcomeApproved || rs[1].RequestID != reqs[1].RequestID || rs[1].Outcome != protocol.OutcomeIgnored {
			t.Fatalf("input.resolved %+v", rs)
		}
		for _, ar := range results(t, evs) {
			switch ar.Result.CallID {
			case reqs[0].Action.CallID:
				if ar.Status != protocol.StatusCompleted {
					t.Fatalf("approved call %+v", ar)
				}
			case reqs[1].Action.CallID:
				if ar.Status != protocol.StatusRejected || !strings.Contains(string(ar.Result.Output), "ignored") {
					t.Fatalf("withdrawn call %+v", ar)
				}
			}
		}
		if got := h.executed(); !slices.Equal(got, []string{`refund:{"amount":1,"chargeId":"ch_a"}`}) {
			t.Fatalf("executed %v", got)
		}
		if got := join(evs); !strings.Contains(got, "step.completed message.received step.started") {
			t.Fatalf("the steering message did not enter at the step boundary: %s", got)
		}
		if r := reply(t, evs); r != "sunny in Oslo" {
			t.Fatalf("reply %q", r)
		}
		if !slices.Equal(h.turns[0].Taken, []string{"dlv_steer"}) {
			t.Fatalf("taken %v", h.turns[0].Taken)
		}
	})
}

// With turnPolicy queue, a message that answers nothing leaves an open
// question alone and runs as the next turn; one that answers it still does,
// although it came after one waiting for the turn's end: the turn cannot
// end without it.
func TestSessionQueuedMessageWaits(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(2))
		var parked, later []protocol.Event
		var queued *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "choose a plan"}) })
		h.at(2*time.Minute, func() {
			h.parkedOn(turnWorkflowID(0), "input")
			parked = h.turnEvents(turnWorkflowID(0))
			queued = h.send(signals.SendRequest{Message: "weather in Rome", DeliveryID: "dlv_rome", TurnPolicy: signals.TurnPolicyQueue})
		})
		h.at(3*time.Minute, func() {
			// The session offered the message and the turn declined it.
			later = h.turnEvents(turnWorkflowID(0))
			h.send(signals.SendRequest{Message: "pro", TurnPolicy: signals.TurnPolicyQueue})
		})
		continuedWith(t, h.runSession(s1))

		if len(later) != len(parked) {
			t.Fatalf("a queued message changed the turn: %s", join(later[len(parked):]))
		}
		// Its answer names the turn that read it: turn_0 left it.
		if !queued.accepted || queued.result.TurnID != "turn_1" {
			t.Fatalf("queued %+v", queued)
		}
		if len(h.turns) != 2 || h.turns[0].Outcome.Reply != "picked pro" || h.turns[1].Outcome.Reply != "sunny in Rome" {
			t.Fatalf("turns %+v", h.turns)
		}
		if rs := resolutions(t, h.turns[0].Events); len(rs) != 1 || rs[0].Outcome != protocol.OutcomeAnswered {
			t.Fatalf("input.resolved %+v", rs)
		}
		if ids := h.turns[1].Events[0].Meta.DeliveryIDs; !slices.Equal(ids, []string{"dlv_rome"}) {
			t.Fatalf("turn 1 delivery ids %v", ids)
		}
	})
}

// Another person's message, even one that names an option, waits for the
// turn's end.
func TestSessionOtherPersonsMessageWaits(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(2))
		bob := &auth.Principal{ID: "bob", Type: "user"}
		var parked, later []protocol.Event
		var bobs *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "refund ch_9 9"}) })
		h.at(2*time.Minute, func() {
			parked = h.turnEvents(turnWorkflowID(0))
			bobs = h.send(signals.SendRequest{Message: "approve", Caller: bob})
		})
		h.at(3*time.Minute, func() {
			later = h.turnEvents(turnWorkflowID(0))
			if reqs := h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 1 {
				h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
			}
		})
		continuedWith(t, h.runSession(s1))

		if bobs.result.TurnID != "turn_1" || len(later) != len(parked) {
			t.Fatalf("bob's message went to %s and changed the turn: %s", bobs.result.TurnID, join(later))
		}
		if len(h.turns) != 2 || h.turns[1].Outcome.Reply != "Hello." {
			t.Fatalf("turns %+v", h.turns)
		}
		var started protocol.TurnRef
		decode(t, h.turns[1].Events[0], &started)
		if started.TurnID != "turn_1" {
			t.Fatalf("turn 1 started %+v", started)
		}
	})
}

// Another person's answer to the turn's question waits for the turn's
// end too: only the person the turn serves answers it.
func TestSessionOtherPersonsAnswerWaits(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(2))
		bob := &auth.Principal{ID: "bob", Type: "user"}
		var parked, later []protocol.Event
		var bobs *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "choose a plan"}) })
		h.at(2*time.Minute, func() {
			h.parkedOn(turnWorkflowID(0), "input")
			parked = h.turnEvents(turnWorkflowID(0))
			bobs = h.send(signals.SendRequest{Message: "pro", Caller: bob})
		})
		h.at(3*time.Minute, func() {
			later = h.turnEvents(turnWorkflowID(0))
			h.send(signals.SendRequest{Message: "basic"})
		})
		continuedWith(t, h.runSession(s1))

		if bobs.result.TurnID != "turn_1" || len(later) != len(parked) {
			t.Fatalf("bob's answer went to %s and changed the turn: %s", bobs.result.TurnID, join(later[len(parked):]))
		}
		if len(h.turns) != 2 || h.turns[0].Outcome.Reply != "picked basic" {
			t.Fatalf("turns %+v", h.turns)
		}
	})
}

// A sender who waits on a message the running turn takes (here a steer)
// hears when the turn parks again: a turn tells its session of its parks
// once it took a message someone waits on (signals.TurnMessage.Report).
func TestSessionSteerWaitsForThePark(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, afterTurns(1))
		var steer *update[signals.SendResult]
		var waitedAtPark bool
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "refund ch_1 5"}) })
		h.at(2*time.Minute, func() {
			h.parkedOn(turnWorkflowID(0), "input")
			steer = h.send(signals.SendRequest{Message: "choose a plan", DeliveryID: "dlv_steer", Wait: true})
		})
		h.at(3*time.Minute, func() {
			if reqs := h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 1 && reqs[0].Kind != protocol.KindToolApproval {
				waitedAtPark = steer.completed && steer.result.Outcome != nil && steer.result.Outcome.Status == signals.TurnStatusWaiting
				h.send(signals.SendRequest{Message: "pro"})
			}
		})
		continuedWith(t, h.runSession(s1))

		if !waitedAtPark {
			t.Fatalf("the steer's sender did not hear of the park: %+v (%+v)", steer, steer.result.Outcome)
		}
		if steer.result.TurnID != "turn_0" || len(h.turns) != 1 || h.turns[0].Outcome.Reply != "picked pro" {
			t.Fatalf("steer %+v, turns %+v", steer.result, h.turns)
		}
	})
}

var _ payloadstore.Store = (*memStore)(nil)
