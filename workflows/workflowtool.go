package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// runWorkflow runs a workflow tool's call (tools.DefineWorkflow): it
// starts the tool's workflow type as a child of the workflow that owns
// the call and waits for its result, its execution timeout (the call's
// deadline) or the owner's cancellation.
//
//   - Exactly once: the child's id derives from the owner's id and the
//     call id (signals.WorkflowToolID), and the start is a command of the
//     owner's workflow task: a task that fails starts nothing, and its
//     retry, or a replay on another worker after a crash, issues the same
//     start, which Temporal deduplicates by the running child's id.
//   - The deadline is the child's WorkflowExecutionTimeout, enforced by
//     Temporal: a child still running then is timed out and the call fails
//     with DEADLINE_EXCEEDED.
//   - Cancellation: a cancelled turn or execution requests the child's
//     cancellation and settles the call as cancelled at once, without
//     waiting for the child to acknowledge (WaitForCancellation false:
//     Temporal's TRY_CANCEL). The parent close policy is REQUEST_CANCEL:
//     a turn that ends without cancelling it (terminated, timed out) has
//     Temporal ask the child to cancel too.
func runWorkflow(ctx workflow.Context, h callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome {
	p := c.plan
	if p.Workflow == nil || workflow.GetVersion(ctx, changeWorkflowTools, workflow.DefaultVersion, 1) < 1 {
		return work.FailedOutcome(codeNotExecutable, fmt.Sprintf("tool %s (kind %q) has no runner: it cannot be executed", c.tool, p.Kind))
	}
	owner := workflow.GetInfo(ctx).WorkflowExecution.ID
	childID := signals.WorkflowToolID(owner, p.Call.ID)
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:               childID,
		TaskQueue:                p.Workflow.TaskQueue,
		WorkflowExecutionTimeout: p.Deadline,
		WorkflowIDReusePolicy:    idReusePolicy(p.Workflow.IDReuse),
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:      false,
		Memo: map[string]any{
			signals.MemoSession: in.Session.ID, signals.MemoTurn: in.TurnID,
			signals.MemoCall: p.Call.ID, signals.MemoTool: p.Call.Name,
		},
		StaticSummary: fmt.Sprintf("eve tool %s, call %s of %s", p.Call.Name, p.Call.ID, owner),
	}
	if in.AskTag != "" {
		opts.Memo[signals.MemoAskTag] = in.AskTag // its questions' ids (tools/wfcall)
	}
	if r := p.Workflow.Retry; r != nil {
		opts.RetryPolicy = &temporal.RetryPolicy{
			InitialInterval:    r.InitialInterval,
			BackoffCoefficient: r.BackoffCoefficient,
			MaximumInterval:    r.MaximumInterval,
			MaximumAttempts:    r.MaximumAttempts,
		}
	}
	t, isTurn := h.(*turn)
	if isTurn && t.cfg.SearchAttributes {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(searchSession.ValueSet(in.Session.ID))
	}
	if isTurn {
		// The turn says it waits on tasks while only such calls are left.
		t.delegatedOpen++
		defer func() { t.delegatedOpen-- }()
	}
	tr, reports := h.(taskReporter)
	if reports {
		tr.taskStarted(ctx, c, childID)
	}
	fut := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), p.Workflow.Type, in.Input)
	var raw json.RawMessage
	err := fut.Get(ctx, &raw)
	cancelled := ctx.Err() != nil
	var out work.ToolOutcome
	switch {
	case cancelled:
		out = work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("tool %s was cancelled before its workflow completed; the workflow %s was asked to cancel", c.tool, childID))
	case err != nil:
		out = childFailure(c.tool, childID, p, err)
	default:
		out = workflowResult(p, raw)
	}
	if reports {
		tr.taskSettled(ctx, c, childID, out, cancelled)
	}
	return out
}

// idReusePolicy is Temporal's policy for a tools.IDReuse.
func idReusePolicy(r string) enumspb.WorkflowIdReusePolicy {
	switch tools.IDReuse(r) {
	case tools.IDReuseAllowDuplicateFailedOnly:
		return enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
	case tools.IDReuseRejectDuplicate:
		return enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	return enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
}

// workflowResult is the call's outcome for the child's result, held to the
// tool's output limit and schema.
func workflowResult(p work.CallPlan, raw json.RawMessage) work.ToolOutcome {
	if len(raw) == 0 {
		raw = json.RawMessage("null") // a workflow that returns only an error
	}
	if err := work.CheckOutputSize(p.Call.Name, raw, p.MaxOutputBytes); err != nil {
		return work.FailedOutcome(protocol.CodeToolOutputTooLarge, err.Error())
	}
	a := &actionState{outputSchema: p.OutputSchema, ActionState: signals.ActionState{Tool: p.Call.Name}}
	if err := a.checkOutput(raw); err != nil {
		return work.FailedOutcome(protocol.CodeToolOutputInvalid, fmt.Sprintf("the workflow of tool %s returned a result that %v", p.Call.Name, err))
	}
	return work.ToolOutcome{Status: protocol.StatusCompleted, Output: raw}
}

// childFailure turns a child that did not complete into the call's
// failure: timed out (its deadline), cancelled or terminated by someone
// else, already started under a reused id, or failed.
func childFailure(tool, childID string, p work.CallPlan, err error) work.ToolOutcome {
	var (
		timeoutErr *temporal.TimeoutError
		canceled   *temporal.CanceledError
		terminated *temporal.TerminatedError
		started    *temporal.ChildWorkflowExecutionAlreadyStartedError
	)
	switch {
	case errors.As(err, &timeoutErr):
		return work.FailedOutcome(protocol.CodeDeadlineExceeded, fmt.Sprintf("deadline exceeded: the workflow %s of tool %s did not complete within %s", childID, tool, p.Deadline))
	case errors.As(err, &canceled):
		return work.FailedOutcome(protocol.CodeToolCancelled, fmt.Sprintf("the workflow %s of tool %s was cancelled", childID, tool))
	case errors.As(err, &terminated):
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("the workflow %s of tool %s was terminated", childID, tool))
	case errors.As(err, &started):
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s could not start its workflow: the id %s is taken (its id reuse policy refuses it)", tool, childID))
	}
	return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("the workflow %s of tool %s failed: %s", childID, tool, errorMessage(err)))
}
