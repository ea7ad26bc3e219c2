package e2e

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// historyCounts counts a workflow's history events by type.
func historyCounts(t *testing.T, ctx context.Context, c client.Client, wid string) map[enumspb.EventType]int {
	t.Helper()
	n := map[enumspb.EventType]int{}
	it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", wid, err)
		}
		n[e.GetEventType()]++
	}
	return n
}

// Every turn is a child workflow of its session, even when the worker has
// a client, and everything the two tell each other commits with a workflow
// task (docs/architecture.md, "Exactly once"): the start is the session's
// StartChildWorkflowExecution command, the park report is the turn's
// SignalExternalWorkflow command, and the end is the child's completion. No local activity starts a turn or signals a session.
func TestTurnsAreCommittedChildren(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, d := startParked(t, env, "refund ch_5 5")
	res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("respond outcome %+v", res.Outcome)
	}
	// The answer's outcome is the turn's; the session records the child's
	// completion after it (session.waiting).
	env.WaitIdle(id)
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id+"/turn_0", "")
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.WorkflowExecutionInfo.GetParentExecution(); p.GetWorkflowId() != id {
		t.Fatalf("turn's parent %v, want the session %s", p, id)
	}
	sess := historyCounts(t, ctx, env.Client, id)
	turn := historyCounts(t, ctx, env.Client, id+"/turn_0")
	for _, c := range []struct {
		what string
		got  int
		want int
	}{
		{"child starts on the session", sess[enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED], 1},
		{"child completions on the session", sess[enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED], 1},
		// Parked; the resumption tells the session nothing
		// (eve-quiet-resume); the end is the completion.
		{"signals the turn sent", turn[enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED], 1},
		{"signals the session received", sess[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED], 1},
		// The config's SideEffect only: the session's version decisions
		// come from its input (eve-input-versions), and no local
		// activity's marker (a start or a describe).
		{"markers on the session", sess[enumspb.EVENT_TYPE_MARKER_RECORDED], 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
}

// An operator terminates a parked turn: the session hears the child's end
// at once, keeps the events the stream read of it at their indexes, ends
// the turn with turn.failed after them, and takes the next message.
func TestTerminatedTurnFreesSession(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, _ := startParked(t, env, "refund ch_6 6")
	before := env.Events(ctx, id)
	if err := env.Client.TerminateWorkflow(ctx, id+"/turn_0", "", "operator"); err != nil {
		t.Fatal(err)
	}
	evs := waitWithin(t, env, id, terminatedTurnBound, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	if len(evs) < len(before) {
		t.Fatalf("%d events before, %d after", len(before), len(evs))
	}
	for i, e := range before {
		if evs[i].Meta.ID != e.Meta.ID || evs[i].Type != e.Type {
			t.Fatalf("index %d was %s %s, now %s %s", i, e.Type, e.Meta.ID, evs[i].Type, evs[i].Meta.ID)
		}
	}
	if got := evetest.Join(evs[len(before):]); got != "turn.failed session.waiting" {
		t.Fatalf("after the terminated turn's events: %s", got)
	}
	failed := evetest.Of(evs, protocol.TurnFailed)
	if len(failed) != 1 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var f protocol.TurnFailedData
	failed[0].Decode(&f)
	if f.Code != "TURN_WORKFLOW_FAILED" || f.TurnID != "turn_0" {
		t.Fatalf("turn.failed %+v", f)
	}
	if r := env.SendAndWait(ctx, id, "what's the weather in Oslo"); r.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("next turn: %+v", r.Outcome)
	}
}
