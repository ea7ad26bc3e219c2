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

// A session lets its running turn decide the messages that arrive while it
// runs (eve-turn-decides; docs/architecture.md): a park nobody waits on
// tells the session nothing, and a typed answer still reaches the turn,
// which takes it. A park someone waits on (SendRequest.Wait) is told once:
// the answered un-park is quiet, as before.
func TestTurnDecidesParks(t *testing.T) {
	env := demoEnv(t)
	id, turn := parkUnwatched(t, env, "refund ch_7 7")
	if _, err := env.Sessions.Send(env.Ctx(30*time.Second), id, signals.SendRequest{Message: "approve", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	evs := waitFor(t, env, id, idle(1))
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 || lastReply(t, evs) != "Refund of ch_7: 7" {
		t.Fatalf("%d turns, reply %q: %s", n, lastReply(t, evs), evetest.Join(evs))
	}
	if rs := resolutions(evs); len(rs) != 1 || rs[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("resolutions %+v", rs)
	}
	if sent, failed := signalsSent(t, env, turn, signals.SignalTurnInputs); sent != 0 || failed != 0 {
		t.Errorf("a park nobody waits on: %d %s signals to the session (%d failed tasks), want none", sent, signals.SignalTurnInputs, failed)
	}

	watched, d := startParked(t, env, "refund ch_8 8")
	respond(t, env, watched, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.WaitIdle(watched)
	if sent, failed := signalsSent(t, env, watched+"/turn_0", signals.SignalTurnInputs); sent != 1 || failed != 0 {
		t.Errorf("a park someone waits on: %d %s signals to the session (%d failed tasks), want 1", sent, signals.SignalTurnInputs, failed)
	}
}

// parkUnwatched creates a session with msg, as the HTTP API does (no one
// waits on the outcome), and waits for its turn to park.
func parkUnwatched(t *testing.T, env *evetest.Env, msg string) (id, turn string) {
	t.Helper()
	res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, res.SessionID, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.TurnWaiting })
	return res.SessionID, signals.TurnWorkflowID(res.SessionID, res.TurnID)
}

// TestRecordTurnDecides records the histories of eve-turn-decides: a park
// nobody waits on, answered by a typed message, and one a sender waits on,
// answered through the turn's Update. The change's subagent histories (a
// typed answer to a proxied approval) are TestSubagentTypedApproval's,
// recorded with EVE_RECORD_PREFIX=v0.5.0-turn-decides-:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordTurnDecides
func TestRecordTurnDecides(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	env := demoEnv(t)
	save := func(name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	id, turn := parkUnwatched(t, env, "refund ch_7 7")
	if _, err := env.Sessions.Send(env.Ctx(30*time.Second), id, signals.SendRequest{Message: "approve", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id, idle(1))
	save("turn-decides-session-typed", id)
	save("turn-decides-turn-typed", turn)

	watched, d := startParked(t, env, "refund ch_8 8")
	respond(t, env, watched, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.WaitIdle(watched)
	save("turn-decides-session-watched", watched)
	save("turn-decides-turn-watched", watched+"/turn_0")
}
