package workflows_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// Messages in the order the session accepted them (eve-message-order).

// received lists the messages of message.received, in order.
func received(t *testing.T, evs []protocol.Event) []string {
	t.Helper()
	var out []string
	for _, e := range of(evs, protocol.MessageReceived) {
		var d protocol.MessageReceivedData
		decode(t, e, &d)
		out = append(out, d.Message)
	}
	return out
}

// A turn reads every message it took, in the order it took them, however
// it ends: at the next step boundary, or before turn.cancelled. On its last
// step, with nothing open, it takes none: no step of it would read one.
func TestTurnReadsEveryMessageItTakes(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxSteps int
		cancel   bool
		// want: what the turn read, what it took, how it ended.
		read  []string
		taken []string
		end   string
	}{
		{"at the step boundary", 0, false, []string{"report", "weather in Oslo", "weather in Rome"}, []string{"dlv_1", "dlv_2"}, protocol.TurnCompleted},
		{"cancelled", 0, true, []string{"report", "weather in Oslo", "weather in Rome"}, []string{"dlv_1", "dlv_2"}, protocol.TurnCancelled},
		{"on the last step", 1, false, []string{"report"}, nil, protocol.TurnFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			wid := turnWorkflowID(0)
			h.at(time.Minute, func() {
				h.parkedOn(wid, "tasks") // the delegated report runs
				for i, m := range []string{"weather in Oslo", "weather in Rome"} {
					h.SignalWorkflow(signals.SignalTurnMessage, signals.TurnMessage{Message: m, DeliveryID: fmt.Sprintf("dlv_%d", i+1), Caller: alice, TurnPolicy: signals.TurnPolicySteer, Ack: true})
				}
			})
			h.at(2*time.Minute, func() {
				if c.cancel {
					h.CancelWorkflow()
					return
				}
				h.completeJob(h.nextJob(), `{"rows": 3}`)
			})
			in := turnInput("report")
			in.Config.MaxSteps = c.maxSteps
			out := h.runTurn(in)

			if got := received(t, out.Events); !slices.Equal(got, c.read) {
				t.Errorf("read %q, want %q: %s", got, c.read, join(out.Events))
			}
			if !slices.Equal(out.Taken, c.taken) {
				t.Errorf("taken %v, want %v", out.Taken, c.taken)
			}
			if last := out.Events[len(out.Events)-1].Type; last != c.end {
				t.Errorf("the turn ended with %s, want %s: %s", last, c.end, join(out.Events))
			}
		})
	}
}

// A message waiting behind a session-limit prompt (it answers neither
// Continue nor Stop) is read before the Continue that came after it.
func TestSessionReadsSteeringBeforeALaterAnswer(t *testing.T) {
	forGenerations(t, func(t *testing.T, s1 workflows.SessionInput) {
		h := newHarness(t, func(a *agent.Agent) {
			a.ContinueAsNewAfterTurns = 1
			a.MaxInputTokensPerSession = 1
		})
		var hello, cont *update[signals.SendResult]
		h.at(time.Minute, func() { h.send(signals.SendRequest{Message: "loop"}) })
		h.at(2*time.Minute, func() {
			reqs := h.parkedOn(turnWorkflowID(0), "input")
			if len(reqs) != 1 || reqs[0].Kind != protocol.KindSessionLimit {
				t.Errorf("open %+v, want the session-limit prompt", reqs)
			}
			hello = h.send(signals.SendRequest{Message: "hello", DeliveryID: "dlv_hello"})
		})
		h.at(3*time.Minute, func() {
			cont = h.send(signals.SendRequest{Message: "continue", DeliveryID: "dlv_continue"})
		})
		continuedWith(t, h.runSession(s1))

		if len(h.turns) != 1 {
			t.Fatalf("%d turns", len(h.turns))
		}
		evs := h.turns[0].Events
		if got, want := received(t, evs), []string{"loop", "hello", "continue"}; !slices.Equal(got, want) {
			t.Errorf("read %q, want %q: %s", got, want, join(evs))
		}
		for _, u := range []*update[signals.SendResult]{hello, cont} {
			if u == nil || !u.completed || u.result.TurnID != "turn_0" {
				t.Errorf("answer %+v, want turn_0", u)
			}
		}
		if !slices.Equal(h.turns[0].Taken, []string{"dlv_hello", "dlv_continue"}) {
			t.Errorf("taken %v", h.turns[0].Taken)
		}
	})
}
