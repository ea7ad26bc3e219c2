package e2e

import (
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
)

// The session's initiator stays in its memo across continue-as-new, so a
// closed session's owner is known whichever run closed (see
// TestSecurityClosedSessionReason).
func TestInitiatorMemoSurvivesContinueAsNew(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.ContinueAsNewAfterTurns = 1
	env.StartWorker(a)
	ctx := env.Ctx(60 * time.Second)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	env.SendAndWait(ctx, id, "what's the weather in Oslo")
	env.SendAndWait(ctx, id, "what's the weather in Rome")
	if runs := sessionRuns(t, ctx, env.Client, id); len(runs) < 2 {
		t.Fatalf("the session did not continue as new: runs %v", runs)
	}
	d, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[sessions.MemoInitiator]
	if !ok {
		t.Fatalf("the latest run's memo has no initiator: %v", d.GetWorkflowExecutionInfo().GetMemo())
	}
	var p auth.Principal
	if err := converter.GetDefaultDataConverter().FromPayload(f, &p); err != nil || p.ID != alice.ID || p.Type != alice.Type {
		t.Fatalf("initiator in the memo: %+v %v", p, err)
	}
}
