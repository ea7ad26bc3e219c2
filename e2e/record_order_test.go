package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TestRecordOrder records only the histories of messages kept in order
// (0.5), which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordOrder
func TestRecordOrder(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordOrder(t, prefix)
}

// recordOrder: a message offered to a parked turn, which takes it (it
// steers) and says so; a queued message the turn leaves, then an answer
// offered behind it as an answer only; a message racing a turn's final
// workflow task with two more waiting behind it (replayed with the hold
// interceptor: "raced" in the name).
func recordOrder(t *testing.T, prefix string) {
	t.Helper()
	save := func(env *evetest.Env, name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	env := demoEnv(t)
	ctx := env.Ctx(2 * time.Minute)

	// Steered: the parked turn takes the message, withdrawing its approval.
	id, _ := startParked(t, env, "refund ch_1 10")
	if res := send(t, env, id, signals.SendRequest{Message: "what's the weather in Oslo", Caller: alice}); res.TurnID != "turn_0" {
		t.Fatalf("the steering message went to %s", res.TurnID)
	}
	env.WaitIdle(id)
	save(env, "session-ordered-steered", id)
	save(env, "turn-ordered-steered", id+"/turn_0")

	// Left, then an answer only: a queued message the question does not
	// take waits for the turn's end; "pro", behind it, answers the question.
	id2, _ := startParked(t, env, "choose a plan")
	if res := send(t, env, id2, signals.SendRequest{Message: "what's the weather in Rome", Caller: alice, TurnPolicy: signals.TurnPolicyQueue}); res.TurnID != "turn_1" {
		t.Fatalf("the queued message went to %s", res.TurnID)
	}
	if res := send(t, env, id2, signals.SendRequest{Message: "pro", Caller: alice, TurnPolicy: signals.TurnPolicyQueue}); res.TurnID != "turn_0" {
		t.Fatalf("the answer went to %s", res.TurnID)
	}
	waitFor(t, env, id2, idle(2))
	save(env, "session-ordered-answers", id2)
	save(env, "turn-ordered-answers", id2+"/turn_0")

	// Raced: a message during the final workflow task, two behind it.
	re := newRaceEnv(t)
	rid, err := re.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	turn0 := signals.TurnWorkflowID(rid, "turn_0")
	h := re.holds.arm(holdKey{turn0, "end"})
	if _, err := re.Sessions.Send(ctx, rid, signals.SendRequest{Message: "m01 starts a turn", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	before := signalsDelivered(t, ctx, re.Client, rid)
	var answers []<-chan sendOutcome
	waitHeld(t, h, func() {
		answers = append(answers, re.sendAsync(ctx, rid, signals.SendRequest{Message: "m02 races the task", Caller: alice}))
		waitUntil(t, "the session offered m02 to the held turn", func() bool { return signalsDelivered(t, ctx, re.Client, rid) > before })
		for i, m := range []string{"m03 waits behind it", "m04 waits too"} {
			answers = append(answers, re.sendAsync(ctx, rid, signals.SendRequest{Message: m, Caller: alice}))
			waitUntil(t, "the session accepted "+m, func() bool {
				s, err := re.Sessions.Summary(ctx, rid)
				return err == nil && s.Queued == 2+i
			})
		}
	})
	for _, ch := range answers {
		if o := <-ch; o.err != nil {
			t.Fatal(o.err)
		}
	}
	evs := re.settle(t, ctx, rid)
	if n := len(evetest.Of(evs, protocol.MessageReceived)); n != 4 || unhandledCommandFailures(t, ctx, re.Client, turn0) == 0 {
		t.Fatalf("%d messages read; the final task failed %d times", n, unhandledCommandFailures(t, ctx, re.Client, turn0))
	}
	save(re.Env, "session-ordered-raced-end", rid)
	save(re.Env, "turn-ordered-raced-end", turn0)
}
