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

// TestRecordDenied records only the histories of denied calls in eve's
// shape (0.5, eve-denied-result), which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordDenied
func TestRecordDenied(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordDenied(t, prefix)
}

// recordDenied: a person denies an approval (with a reason), a policy
// denies a call nobody is asked about, and a steering message withdraws
// an approval (ignored).
func recordDenied(t *testing.T, prefix string) {
	t.Helper()
	env := demoEnv(t)
	ctx := env.Ctx(2 * time.Minute)
	save := func(name, wid string) {
		if err := writeHistory(ctx, env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	id, d := startParked(t, env, "refund ch_1 10")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "cancel", Text: "needs a ticket"})
	env.WaitIdle(id)
	save("turn-denied-person", id+"/turn_0")

	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "credit t2 10", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitIdle(res.SessionID)
	save("turn-denied-policy", res.SessionID+"/turn_0")

	id2, _ := startParked(t, env, "refund ch_2 20")
	if res := send(t, env, id2, signals.SendRequest{Message: "what's the weather in Oslo", Caller: alice}); res.TurnID != "turn_0" {
		t.Fatalf("the steering message went to %s", res.TurnID)
	}
	env.WaitIdle(id2)
	if n := len(evetest.Of(env.Events(ctx, id2), protocol.ActionResult)); n != 2 {
		t.Fatalf("%d action results", n)
	}
	save("turn-denied-withdrawn", id2+"/turn_0")
}
