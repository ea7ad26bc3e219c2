package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A session reads its messages in the order it accepted them, in the turn
// its answer named (docs/architecture.md, "Exactly once").

// readOrder is the session's message.received events: the message's name
// and the turn that read it, in stream order.
func readOrder(evs []protocol.Event, name func(string) string) (msgs, turns []string) {
	for _, e := range evetest.Of(evs, protocol.MessageReceived) {
		var d protocol.MessageReceivedData
		e.Decode(&d)
		msgs = append(msgs, name(d.Message))
		turns = append(turns, d.TurnID)
	}
	return msgs, turns
}

// Names of messages: the whole text, or its first word ("m01 …").
func fullText(m string) string  { return m }
func firstWord(m string) string { return strings.Fields(m)[0] }

// sent is one accepted message: its name and the turn its answer named.
type sent struct{ name, turn string }

// checkOrder reports how the session read what it accepted: names read
// out of acceptance order, read other than once, and answers whose turnId
// is not the turn that read the message.
func checkOrder(evs []protocol.Event, accepted []sent, name func(string) string) (problems []string) {
	msgs, turns := readOrder(evs, name)
	readBy := map[string][]string{}
	for i, m := range msgs {
		readBy[m] = append(readBy[m], turns[i])
	}
	var order []string
	for _, a := range accepted {
		order = append(order, a.name)
		switch got := readBy[a.name]; {
		case len(got) != 1:
			problems = append(problems, fmt.Sprintf("%s read %d times %v", a.name, len(got), got))
		case got[0] != a.turn:
			problems = append(problems, fmt.Sprintf("%s: the answer named %s, %s read it", a.name, a.turn, got[0]))
		}
	}
	if !slices.Equal(msgs, order) {
		problems = append(problems, fmt.Sprintf("read %v, want the order accepted %v", msgs, order))
	}
	return problems
}

// One sender posts nine messages back to back, each after the previous
// answer, some of them 200 KB: the session reads them in that order, each
// once, in the turn each answer named; 20 sessions of it.
func TestBackToBackSendsReadInOrder(t *testing.T) {
	r := newRaceEnv(t)
	const runs, perRun = 20, 9
	big := strings.Repeat("x", 200<<10)
	bad := 0
	var took []time.Duration // each send's answer: it waits for the turn's decision
	for run := range runs {
		ctx := r.Ctx(2 * time.Minute)
		id, err := r.Sessions.Create(ctx, "", alice)
		if err != nil {
			t.Fatal(err)
		}
		var accepted []sent
		for j := range perRun {
			name := fmt.Sprintf("m%02d", j+1)
			msg := name + " please"
			if (run+j)%3 == 1 {
				msg += " " + big
			}
			start := time.Now()
			res, err := r.Sessions.Send(ctx, id, signals.SendRequest{Message: msg, Caller: alice})
			took = append(took, time.Since(start))
			if err != nil {
				t.Fatalf("run %d: send %s: %v", run, name, err)
			}
			accepted = append(accepted, sent{name, res.TurnID})
		}
		evs := r.settle(t, ctx, id)
		if p := checkOrder(evs, accepted, firstWord); len(p) > 0 {
			bad++
			t.Errorf("run %d (%s): %s", run, id, strings.Join(p, "; "))
		}
	}
	slices.Sort(took)
	t.Logf("%d of %d runs read out of order or in another turn than their answer named; answers took %s (median), %s (90th percentile), %s (max)",
		bad, runs, took[len(took)/2], took[len(took)*9/10], took[len(took)-1])
}

// A message arrives during a turn's workflow task, held there, while two
// more wait behind it; all three are read in order, each once, each in the
// turn its answer named. During the final task ("end") the task fails and
// its retry takes the message (the turn goes on) or leaves it; during the
// task that takes the approval's answer ("resume") a queued message is
// offered to the turn (the session offers every message to its running
// turn: eve-turn-decides), and the turn, its approval answered, leaves it:
// it and the two behind it run as turns of their own.
func TestMessagesBehindARaceKeepTheirOrder(t *testing.T) {
	for _, tc := range []struct {
		point, first, policy string
		want                 []string // the turns the answers name, when known
	}{
		{"end", "m01 starts a turn", "", nil},
		{"resume", "refund ch1", signals.TurnPolicyQueue, []string{"turn_0", "turn_1", "turn_2", "turn_3"}},
	} {
		t.Run(tc.point, func(t *testing.T) {
			r := newRaceEnv(t)
			ctx := r.Ctx(2 * time.Minute)
			id, err := r.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			watch := watchStream(t, r.Env, id)
			turn0 := signals.TurnWorkflowID(id, "turn_0")
			h := r.holds.arm(holdKey{turn0, tc.point})
			first, err := r.Sessions.Send(ctx, id, signals.SendRequest{Message: tc.first, Caller: alice})
			if err != nil {
				t.Fatal(err)
			}
			if tc.point == "resume" {
				evs := waitFor(t, r.Env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 1 })
				var d protocol.InputRequestedData
				evetest.Of(evs, protocol.InputRequested)[0].Decode(&d)
				go r.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: d.Requests[0].RequestID, OptionID: "approve"}}})
			}
			before := signalsDelivered(t, ctx, r.Client, id)
			var answers []<-chan sendOutcome
			waitHeld(t, h, func() {
				answers = append(answers, r.sendAsync(ctx, id, signals.SendRequest{Message: "m02 races the task", Caller: alice, TurnPolicy: tc.policy}))
				waitUntil(t, "the session offered m02 to the held turn", func() bool { return signalsDelivered(t, ctx, r.Client, id) > before })
				for i, m := range []string{"m03 waits behind it", "m04 waits too"} {
					answers = append(answers, r.sendAsync(ctx, id, signals.SendRequest{Message: m, Caller: alice}))
					waitUntil(t, "the session accepted "+m, func() bool {
						s, err := r.Sessions.Summary(ctx, id)
						return err == nil && s.Queued == 2+i
					})
				}
			})
			accepted := []sent{{firstWord(tc.first), first.TurnID}}
			for i, ch := range answers {
				select {
				case o := <-ch:
					if o.err != nil {
						t.Fatalf("send m0%d: %v", i+2, o.err)
					}
					accepted = append(accepted, sent{fmt.Sprintf("m0%d", i+2), o.res.TurnID})
				case <-time.After(60 * time.Second):
					t.Fatalf("send m0%d was never answered", i+2)
				}
			}
			evs := r.settle(t, ctx, id)
			watch.verify(t, r.Env.Events(ctx, id))
			if p := checkOrder(evs, accepted, firstWord); len(p) > 0 {
				t.Fatalf("%s: %s", strings.Join(p, "; "), evetest.Join(evs))
			}
			var turns []string
			for _, a := range accepted {
				turns = append(turns, a.turn)
			}
			if tc.want != nil && !slices.Equal(turns, tc.want) {
				t.Errorf("answers named %v, want %v", turns, tc.want)
			}
			if tc.point == "end" && unhandledCommandFailures(t, ctx, r.Client, turn0) == 0 {
				t.Errorf("m02 did not race the final workflow task of %s", turn0)
			}
			t.Logf("answers %v", turns)
		})
	}
}

// An operator terminates a turn that took two messages (it answered that
// it would read them) before it read them: they run first, in order, each
// as a turn of its own, before another person's message that waited for
// the turn's end, and each is read once. Their answers named the
// terminated turn, and the third's a turn that reads another: the one case
// where an answer does not name the reader (docs/architecture.md, "Exactly
// once").
func TestTerminatedTurnsTakenMessagesRunFirst(t *testing.T) {
	d := newDelegatedEnv(t, evetest.New(t), time.Hour, false)
	d.StartWorkerHost(d.mk(), d.host)
	id, _ := d.start(t) // the turn waits for its report job
	ctx := d.Ctx(time.Minute)
	for _, m := range []string{"m01 steers", "m02 steers too"} {
		res, err := d.Sessions.Send(ctx, id, signals.SendRequest{Message: m, Caller: alice})
		if err != nil {
			t.Fatal(err)
		}
		if res.TurnID != "turn_0" {
			t.Fatalf("%q went to %s, want the running turn_0", m, res.TurnID)
		}
	}
	if res, err := d.Sessions.Send(ctx, id, signals.SendRequest{Message: "m03 waits", Caller: bob}); err != nil || res.TurnID != "turn_1" {
		t.Fatalf("bob's message: %+v, %v; want it to wait for turn_1", res, err)
	}
	if err := d.Client.TerminateWorkflow(ctx, signals.TurnWorkflowID(id, "turn_0"), "", "operator"); err != nil {
		t.Fatal(err)
	}
	evs := waitWithin(t, d.Env, id, terminatedTurnBound, func(evs []protocol.Event) bool {
		return len(evetest.Of(evs, protocol.MessageReceived)) == 4 && evs[len(evs)-1].Type == protocol.SessionWaiting
	})
	msgs, turns := readOrder(evs, firstWord)
	if want := []string{"report", "m01", "m02", "m03"}; !slices.Equal(msgs, want) {
		t.Errorf("read %v, want %v: %s", msgs, want, evetest.Join(evs))
	}
	if want := []string{"turn_0", "turn_1", "turn_2", "turn_3"}; !slices.Equal(turns, want) {
		t.Errorf("read by %v, want %v", turns, want)
	}
}
