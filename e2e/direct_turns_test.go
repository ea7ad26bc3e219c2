package e2e

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/demo"
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

// A session whose worker has a client starts each turn as a workflow of its
// own: no child events on the session, no external-signal events on the
// turn (each would cost a workflow task), and one version marker for the
// session's three.
func TestTurnsAreStartedNotChildren(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, d := startParked(t, env, "refund ch_5 5")
	res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("respond outcome %+v", res.Outcome)
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id+"/turn_0", "")
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.WorkflowExecutionInfo.GetParentExecution(); p != nil {
		t.Fatalf("turn has a parent %v: it was started as a child", p)
	}
	sess := historyCounts(t, ctx, env.Client, id)
	turn := historyCounts(t, ctx, env.Client, id+"/turn_0")
	for typ, n := range map[enumspb.EventType]int{
		enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:     sess[enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED],
		enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: turn[enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED],
	} {
		if n != 0 {
			t.Errorf("%d × %v, want none", n, typ)
		}
	}
	// The session heard the park, the resumption and the end by signal.
	if n := sess[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]; n != 3 {
		t.Errorf("session received %d signals, want 3 (parked, resumed, ended)", n)
	}
	if n := sess[enumspb.EVENT_TYPE_MARKER_RECORDED]; n != 3 {
		t.Errorf("session recorded %d markers, want 3 (config, one version, the turn's start)", n)
	}
}

// An operator terminates a parked turn: the session's cancel finds it gone
// and ends the turn with turn.failed, and the session takes the next message.
func TestCancelFreesSessionOfTerminatedTurn(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, _ := startParked(t, env, "refund ch_6 6")
	if err := env.Client.TerminateWorkflow(ctx, id+"/turn_0", "", "operator"); err != nil {
		t.Fatal(err)
	}
	res, err := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCancel})
	if err != nil || res.Status != signals.ControlAccepted {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
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

// Agent.ChildTurns keeps turns as child workflows.
func TestChildTurnsOption(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.ChildTurns = true
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	id, d := startParked(t, env, "refund ch_7 7")
	if res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"}); res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("respond outcome %+v", res.Outcome)
	}
	if r := env.SendAndWait(ctx, id, "what's the weather in Oslo"); r.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("second turn: %+v", r.Outcome)
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id+"/turn_1", "")
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.WorkflowExecutionInfo.GetParentExecution(); p.GetWorkflowId() != id {
		t.Fatalf("turn's parent %v, want the session %s", p, id)
	}
}
