package e2e

import (
	"testing"
	"time"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A session continues as new between turns; events recorded by earlier runs
// stay readable, with the same ids, and the conversation goes on.
func TestContinueAsNewKeepsEventsAndConversation(t *testing.T) {
	env := evetest.New(t)
	a, _ := demo.Agent()
	a.ContinueAsNewAfterTurns = 2
	env.StartWorker(a)
	ctx := env.Ctx(60 * time.Second)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	var snapshots [][]protocol.Event
	for _, city := range []string{"Oslo", "Rome", "Lima", "Pune", "Kyiv"} {
		r := env.SendAndWait(ctx, id, "what's the weather in "+city)
		if r.Outcome.Status != signals.TurnStatusCompleted {
			t.Fatalf("turn in %s: %+v", city, r.Outcome)
		}
		snapshots = append(snapshots, env.Events(ctx, id))
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	first := desc.WorkflowExecutionInfo.GetFirstRunId()
	if first == desc.WorkflowExecutionInfo.Execution.RunId {
		t.Fatal("the session never continued as new")
	}
	all := snapshots[len(snapshots)-1]
	if n := len(evetest.Of(all, protocol.TurnCompleted)); n != 5 {
		t.Fatalf("%d turns completed in the stream: %s", n, evetest.Join(all))
	}
	if n := len(evetest.Of(all, protocol.SessionStarted)); n != 1 {
		t.Fatalf("%d session.started events", n)
	}
	seen := map[string]bool{}
	for i, e := range all {
		if seen[e.Meta.ID] {
			t.Fatalf("event %d: duplicate id %s", i, e.Meta.ID)
		}
		seen[e.Meta.ID] = true
	}
	// Earlier reads are prefixes of later ones: same ids, same order.
	for _, snap := range snapshots {
		for i := range snap {
			if snap[i].Meta.ID != all[i].Meta.ID {
				t.Fatalf("event %d changed id across continue-as-new", i)
			}
		}
	}
	// Reading from the middle of an old run works too.
	mid, err := env.Sessions.Events(ctx, id, 5)
	if err != nil || len(mid) != len(all)-5 || mid[0].Meta.ID != all[5].Meta.ID {
		t.Fatalf("events from 5: %d events, %v", len(mid), err)
	}
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil || sum.Turns != 5 || sum.Conversation == nil || sum.Conversation.Messages != 20 {
		t.Fatalf("summary: turns %d, conversation %+v, %v", sum.Turns, sum.Conversation, err)
	}
}
