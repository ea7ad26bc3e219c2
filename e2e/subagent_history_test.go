package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TestSubagentHistoryFlat: a child's long conversation does not grow its
// parent's history. Two root sessions each delegate to the researcher and
// continue it in a second turn by taskId; before that second turn, one
// child has had 1 turn and the other 199 more (messages sent to it
// directly), so the second call is its 200th. The parent's turn that
// makes the call, and the parent session, come out the same size: the
// child's conversation lives in its own history and the store, and only
// its reply travels to the parent.
func TestSubagentHistoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("200 child turns")
	}
	env := demoEnv(t)
	type sizes struct{ turnBytes, turnEvents, sessionBytes, sessionEvents, childTurns int64 }
	run := func(t *testing.T, extra int) sizes {
		ctx := env.Ctx(5 * time.Minute)
		id, err := env.Sessions.Create(ctx, "", alice)
		if err != nil {
			t.Fatal(err)
		}
		send(t, env, id, signals.SendRequest{Message: "ask researcher tidal power", Caller: alice})
		evs := waitFor(t, env, id, idle(1))
		ts, child := firstChild(t, id, evs)
		waitFor(t, env, child, idle(1))
		for i := range extra {
			// One at a time: a session queues at most 100 messages.
			res, err := env.Sessions.Send(ctx, child, signals.SendRequest{Message: fmt.Sprintf("note %d on tidal power", i), Caller: alice, Wait: true})
			if err != nil || res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
				t.Fatalf("child message %d: %+v, %v", i, res.Outcome, err)
			}
		}
		send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " dig deeper", Caller: alice})
		evs = waitFor(t, env, id, idle(2))
		if got := lastReply(t, evs); got != "The researcher says: On dig deeper: 2 more sources, both recent." {
			t.Fatalf("reply %q", got)
		}
		cevs := waitFor(t, env, child, idle(extra+2))
		var s sizes
		s.childTurns = int64(len(evetest.Of(cevs, protocol.TurnStarted)))
		d, err := env.Client.DescribeWorkflowExecution(ctx, id+"/turn_1", "")
		if err != nil {
			t.Fatal(err)
		}
		s.turnBytes, s.turnEvents = d.WorkflowExecutionInfo.HistorySizeBytes, d.WorkflowExecutionInfo.HistoryLength
		if d, err = env.Client.DescribeWorkflowExecution(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		s.sessionBytes, s.sessionEvents = d.WorkflowExecutionInfo.HistorySizeBytes, d.WorkflowExecutionInfo.HistoryLength
		return s
	}
	short, long := run(t, 0), run(t, 198)
	t.Logf("the parent's calling turn: %d bytes / %d events after a child's 2 turns, %d bytes / %d events after its %d",
		short.turnBytes, short.turnEvents, long.turnBytes, long.turnEvents, long.childTurns)
	t.Logf("the parent session: %d bytes / %d events, and %d bytes / %d events", short.sessionBytes, short.sessionEvents, long.sessionBytes, long.sessionEvents)
	if short.childTurns != 2 || long.childTurns != 200 {
		t.Fatalf("child turns %d and %d, want 2 and 200", short.childTurns, long.childTurns)
	}
	// The same events, give or take one workflow task (its three events:
	// how a loaded server batches a signal with the next task), and the
	// same bytes within 5% (times, token counts, that task). The child's
	// conversation, were it to leak in, is tens of KB.
	flat := func(what string, a, b, ea, eb int64) {
		if eb-ea > 3 || ea-eb > 3 || b-a > a/20 || a-b > a/20 {
			t.Errorf("%s: %d bytes / %d events after 2 child turns, %d / %d after 200: not flat", what, a, ea, b, eb)
		}
	}
	flat("the parent's calling turn", short.turnBytes, long.turnBytes, short.turnEvents, long.turnEvents)
	flat("the parent session", short.sessionBytes, long.sessionBytes, short.sessionEvents, long.sessionEvents)
}
