package demo

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/tools"
)

// ProvisionWorkflowType is the workflow behind the provision tool.
const ProvisionWorkflowType = "demo.Provision"

// ProvisionInput is the provision workflow's input (the tool's input).
type ProvisionInput struct {
	Name string `json:"name"`
}

// ProvisionResult is the provision workflow's result (the tool's output).
type ProvisionResult struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	Status   string `json:"status"`
}

// ProvisionWorkflow is a workflow that knows nothing of eve: it reserves a
// resource, then configures it, each step an activity.
func ProvisionWorkflow(ctx workflow.Context, in ProvisionInput) (ProvisionResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out ProvisionResult
	if err := workflow.ExecuteActivity(ctx, "demo.ProvisionReserve", in.Name).Get(ctx, &out.ID); err != nil {
		return out, err
	}
	if err := workflow.ExecuteActivity(ctx, "demo.ProvisionConfigure", out.ID).Get(ctx, &out.Endpoint); err != nil {
		return out, err
	}
	out.Status = "ready"
	return out, nil
}

// provisionReserve reserves a resource for a name (deterministic, mock).
func provisionReserve(_ context.Context, name string) (string, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", temporal.NewNonRetryableApplicationError("the name is empty", "BadName", nil)
	}
	return "res-" + name, nil
}

// provisionConfigure configures a reserved resource (mock).
func provisionConfigure(_ context.Context, id string) (string, error) {
	return "https://" + id + ".demo.internal", nil
}

// RegisterProvision registers the provision workflow and its activities on
// a worker (the demo agent's RegisterWorker).
func RegisterProvision(w worker.Registry) {
	w.RegisterWorkflowWithOptions(ProvisionWorkflow, workflow.RegisterOptions{Name: ProvisionWorkflowType})
	w.RegisterActivityWithOptions(provisionReserve, activity.RegisterOptions{Name: "demo.ProvisionReserve"})
	w.RegisterActivityWithOptions(provisionConfigure, activity.RegisterOptions{Name: "demo.ProvisionConfigure"})
}

// Provision is a workflow tool: a call runs ProvisionWorkflow as a child
// of the turn (RegisterProvision must be on the agent's worker).
func Provision() *tools.Tool {
	return tools.DefineWorkflow("provision", "Provision a resource by name (a durable workflow: reserve, then configure).",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"description":"the resource's name, e.g. db"}},"required":["name"],"additionalProperties":false}`),
		json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"endpoint":{"type":"string"},"status":{"type":"string"}},"required":["id","endpoint","status"]}`),
		tools.Workflow{Type: ProvisionWorkflowType, ExecutionTimeout: 10 * time.Minute})
}
