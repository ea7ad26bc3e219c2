package e2e

import (
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
)

// An operator finds parked sessions by status and tool in the Temporal UI:
// their turns say so (a session's status is its running turn's,
// changeStatusFromTurns), and name their session.
func TestParkedSessionsFoundBySearchAttributes(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(60 * time.Second)
	if err := visibility.Register(ctx, env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	if missing, err := visibility.Missing(ctx, env.Client, "default"); err != nil || len(missing) > 0 {
		t.Fatalf("missing %v, %v", missing, err)
	}
	a, _ := demo.Agent()
	env.StartWorkerHost(a, agent.Host{SearchAttributes: true})
	id, _ := startParked(t, env, "refund ch_5 5")
	query := fmt.Sprintf(`EveStatus = "waiting-input" AND EveSessionId = %q AND EveTools = "refund_charge"`, id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, e := range resp.Executions {
			ids[e.Execution.WorkflowId] = true
		}
		if ids[id+"/turn_0"] && len(ids) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s found %v", query, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
