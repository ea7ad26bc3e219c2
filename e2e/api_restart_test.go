package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
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

// Sessions continue as new between turns; the stream still replays the
// whole history from any index, and a stream that follows across the
// continue-as-new misses nothing.
func TestAPIStreamAcrossContinueAsNew(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.ContinueAsNewAfterTurns = 2
	env.StartWorker(a)
	e := newAPIEnv(t, env, func(o *api.Options) { o.LeaseDuration = time.Second })
	ctx := e.Ctx(2 * time.Minute)
	id, err := e.C.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st := e.C.Stream(sctx, id, 0, nil)
	followed := make(chan []protocol.Event, 1)
	go func() {
		var got []protocol.Event
		waits := 0
		for st.Next() {
			got = append(got, st.Event())
			if st.Event().Type == protocol.SessionWaiting {
				if waits++; waits == 5 {
					break
				}
			}
		}
		followed <- got
	}()
	for _, city := range []string{"Oslo", "Rome", "Lima", "Pune", "Kyiv"} {
		if turn, err := e.C.SendAndWait(ctx, id, "what's the weather in "+city, nil); err != nil || turn.Status != client.TurnCompleted {
			t.Fatalf("turn in %s: %+v, %v", city, turn, err)
		}
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if desc.WorkflowExecutionInfo.GetFirstRunId() == desc.WorkflowExecutionInfo.Execution.RunId {
		t.Fatal("the session never continued as new")
	}
	all := e.snapshot(t, id)
	direct := env.Events(ctx, id)
	if !slices.Equal(ids(all), ids(direct)) || len(evetest.Of(all, protocol.TurnCompleted)) != 5 || all[0].Type != protocol.SessionStarted {
		t.Fatalf("replay over HTTP: %s", evetest.Join(all))
	}
	for _, from := range []int{1, 5, len(all) / 2, len(all) - 1} {
		evs, tail, err := e.C.Events(ctx, id, from)
		if err != nil || tail != len(all)-1 || !slices.Equal(ids(evs), ids(all[from:])) {
			t.Fatalf("from %d: %d events, tail %d, %v", from, len(evs), tail, err)
		}
	}
	select {
	case got := <-followed:
		if !slices.Equal(ids(got), ids(all)) {
			t.Fatalf("followed %d events, the session has %d", len(got), len(all))
		}
	case <-ctx.Done():
		t.Fatal("the follower never saw the fifth turn end")
	}
}
