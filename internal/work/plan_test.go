package work

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/tools"
)

// A workflow or Nexus tool's plan records what the workflow starts, its
// deadline and its output schema.
func TestPlanCallWorkflowAndNexus(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)
	out := json.RawMessage(`{"type":"object"}`)
	wf := tools.DefineWorkflow("provision", "d", in, out, tools.Workflow{Type: "Provision", TaskQueue: "ops", ExecutionTimeout: time.Minute,
		IDReuse: tools.IDReuseRejectDuplicate, Retry: &tools.RetryPolicy{InitialInterval: time.Second}})
	nx := tools.DefineNexus("provision_nx", "d", in, out, tools.Nexus{Endpoint: "platform", Service: "provisioning", Operation: "provision", ScheduleToClose: time.Hour})
	if err := tools.NewRegistry().Register(wf, nx); err != nil {
		t.Fatal(err)
	}
	type plan struct {
		Kind         string
		Deadline     time.Duration
		OutputSchema string
		Workflow     *WorkflowCall
		Nexus        *NexusCall
	}
	for _, c := range []struct {
		tool *tools.Tool
		want plan
	}{
		{wf, plan{Kind: KindWorkflow, Deadline: time.Minute, OutputSchema: string(out),
			Workflow: &WorkflowCall{Type: "Provision", TaskQueue: "ops", IDReuse: "reject-duplicate", Retry: &tools.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: tools.DefaultMaxAttempts}}}},
		{nx, plan{Kind: KindNexus, Deadline: time.Hour, OutputSchema: string(out), Nexus: &NexusCall{Endpoint: "platform", Service: "provisioning", Operation: "provision"}}},
	} {
		t.Run(c.tool.Name, func(t *testing.T) {
			p := PlanCall(c.tool, model.ToolCall{ID: "call_1", Name: c.tool.Name, Input: json.RawMessage(`{"name":"db"}`)})
			got := plan{Kind: p.Kind, Deadline: p.Deadline, OutputSchema: string(p.OutputSchema), Workflow: p.Workflow, Nexus: p.Nexus}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
