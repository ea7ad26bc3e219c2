package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
)

// The stream replays a session's whole history with the same ids in the
// same order after the worker, the API server and the dev server (with its
// SQLite file) restart; the session then goes on.
func TestAPIStreamReplayAfterRestarts(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	env := evetest.NewOn(t, srv)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	stopWorker := env.StartWorker(a)
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(3 * time.Minute)

	t1, err := e.C.SendAndWait(ctx, "", "what's the weather in Paris", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := t1.SessionID
	parked := parkOver(t, ctx, e.C, id, "refund ch_3 for 3") // a turn still running, parked
	want := e.snapshot(t, id)
	if len(want) < 15 || want[len(want)-1].Type != protocol.TurnWaiting {
		t.Fatalf("events before restarts: %s", evetest.Join(want))
	}
	check := func(what string, c *client.Client) {
		t.Helper()
		var got []protocol.Event
		deadline := time.Now().Add(60 * time.Second)
		for {
			evs, _, err := c.Events(ctx, id, 0)
			if err == nil {
				got = evs
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: stream never came back: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !slices.Equal(ids(got), ids(want)) || evetest.Join(got) != evetest.Join(want) {
			t.Fatalf("%s: replay differs:\n got %s\nwant %s", what, evetest.Join(got), evetest.Join(want))
		}
		// A stream from the middle, too.
		mid := len(want) / 2
		evs, tail, err := c.Events(ctx, id, mid)
		if err != nil || tail != len(want)-1 || !slices.Equal(ids(evs), ids(want[mid:])) {
			t.Fatalf("%s: from %d: %d events, tail %d, %v", what, mid, len(evs), tail, err)
		}
	}

	// Worker restart (a new process would have an empty cache just the same).
	stopWorker()
	stopWorker = env.StartWorker(a)
	check("after a worker restart", e.C)

	// API server restart.
	e2 := newAPIEnv(t, env, nil)
	check("after an API server restart", e2.C)

	// Dev server restart, keeping its SQLite file.
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	if err := srv.Restart(rctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	check("after a dev server restart", e2.C)

	// Both at once: worker and dev server.
	stopWorker()
	rctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	if err := srv.Restart(rctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	env.StartWorker(a)
	check("after restarting the worker and the dev server", e2.C)

	// The parked turn still takes its answer, and the log only grows.
	_, rest, err := e2.C.RespondAndWait(ctx, id, []protocol.InputResponse{{RequestID: parked.Open[0].RequestID, OptionID: "approve"}}, nil)
	if err != nil || rest.Reply != "Refund of ch_3: 3" {
		t.Fatalf("answer after restarts: %+v, %v", rest, err)
	}
	final := e2.snapshot(t, id)
	if !slices.Equal(ids(final[:len(want)]), ids(want)) || final[len(final)-1].Type != protocol.SessionWaiting {
		t.Fatalf("the log changed its prefix: %s", evetest.Join(final))
	}
}
