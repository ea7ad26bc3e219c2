package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// runNexus runs a Nexus tool's call (tools.DefineNexus): it schedules the
// operation through the tool's endpoint and waits for its result, its
// schedule-to-close timeout (the call's deadline) or the owner's
// cancellation.
//
//   - Exactly once: scheduling is a command of the owner's workflow task,
//     and Temporal starts the operation with the request id it recorded
//     for that command, so a retried start reaches the handler as the
//     same request.
//   - The deadline is the operation's ScheduleToCloseTimeout, enforced by
//     Temporal: the call fails with DEADLINE_EXCEEDED.
//   - Cancellation: a cancelled turn or execution sends the operation a
//     cancel request and settles the call as cancelled at once
//     (NexusOperationCancellationTypeTryCancel), as a workflow tool does.
func runNexus(ctx workflow.Context, h callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome {
	p := c.plan
	if p.Nexus == nil || workflow.GetVersion(ctx, changeNexusTools, workflow.DefaultVersion, 1) < 1 {
		return work.FailedOutcome(codeNotExecutable, fmt.Sprintf("tool %s (kind %q) has no runner: it cannot be executed", c.tool, p.Kind))
	}
	n := p.Nexus
	taskID := signals.WorkflowToolID(workflow.GetInfo(ctx).WorkflowExecution.ID, p.Call.ID)
	if t, ok := h.(*turn); ok {
		t.delegatedOpen++
		defer func() { t.delegatedOpen-- }()
	}
	tr, reports := h.(taskReporter)
	if reports {
		tr.taskStarted(ctx, c, taskID)
	}
	client := workflow.NewNexusClient(n.Endpoint, n.Service)
	fut := client.ExecuteOperation(ctx, n.Operation, in.Input, workflow.NexusOperationOptions{
		ScheduleToCloseTimeout: p.Deadline,
		CancellationType:       workflow.NexusOperationCancellationTypeTryCancel,
		Summary:                fmt.Sprintf("eve tool %s, call %s", p.Call.Name, p.Call.ID),
	})
	var raw json.RawMessage
	err := fut.Get(ctx, &raw)
	cancelled := ctx.Err() != nil
	var out work.ToolOutcome
	switch {
	case cancelled:
		out = work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled before its Nexus operation completed; the operation was asked to cancel", c.tool))
	case err != nil:
		out = nexusFailure(c.tool, p, err)
	default:
		out = workflowResult(p, raw)
	}
	if reports {
		tr.taskSettled(ctx, c, taskID, out, cancelled)
	}
	return out
}

// nexusFailure turns an operation that did not complete into the call's
// failure.
func nexusFailure(tool string, p work.CallPlan, err error) work.ToolOutcome {
	var (
		timeoutErr *temporal.TimeoutError
		canceled   *temporal.CanceledError
	)
	op := p.Nexus.Service + "/" + p.Nexus.Operation
	switch {
	case errors.As(err, &timeoutErr):
		return work.FailedOutcome(protocol.CodeDeadlineExceeded, fmt.Sprintf("deadline exceeded: the Nexus operation %s of tool %s did not complete within %s", op, tool, p.Deadline))
	case errors.As(err, &canceled):
		return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("the Nexus operation %s of tool %s was cancelled", op, tool))
	}
	return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("the Nexus operation %s of tool %s failed: %s", op, tool, errorMessage(err)))
}
