package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Workflow configures a workflow tool: a Temporal workflow of the app's
// own, which the turn (or a tools API execution) starts as a child
// workflow when the model calls the tool. The workflow receives the call's
// input (as JSON: a struct parameter decodes it) and its result is the
// call's output. It needs to know nothing of eve (docs/workflow-tools.md).
type Workflow struct {
	// Type is the workflow type to start (required): the name it is
	// registered under on its worker.
	Type string
	// TaskQueue is where its workers poll (default: the task queue of the
	// workflow that starts it, the agent's).
	TaskQueue string
	// ExecutionTimeout bounds the child's whole execution, retries
	// included, and is the call's deadline: a workflow still running then
	// is timed out by Temporal and the call fails with DEADLINE_EXCEEDED.
	// DefaultDeadline when zero.
	ExecutionTimeout time.Duration
	// IDReuse says whether the call may start a workflow whose id (derived
	// from the turn and the call, signals.WorkflowToolID) a closed
	// workflow already had (default IDReuseAllowDuplicate). A running one
	// is never started twice.
	IDReuse IDReuse
	// Retry retries the whole workflow when it fails (nil: it runs once,
	// which is Temporal's default for workflows). MaximumAttempts 0 means
	// DefaultMaxAttempts.
	Retry *RetryPolicy
}

// IDReuse is a workflow tool's id reuse policy (Temporal's
// WorkflowIdReusePolicy).
type IDReuse string

const (
	// IDReuseAllowDuplicate: a closed workflow's id may be used again.
	IDReuseAllowDuplicate IDReuse = ""
	// IDReuseAllowDuplicateFailedOnly: only if the closed workflow did not
	// complete successfully.
	IDReuseAllowDuplicateFailedOnly IDReuse = "allow-duplicate-failed-only"
	// IDReuseRejectDuplicate: never; the call fails.
	IDReuseRejectDuplicate IDReuse = "reject-duplicate"
)

// DefineWorkflow defines a workflow tool: a call starts the workflow type
// w.Type as a child workflow, exactly once, and settles with its result
// (checked against outputSchema, when given). Approval policies, response
// policies, edits and the rest of a Tool's fields apply as to any tool.
func DefineWorkflow(name, description string, inputSchema, outputSchema json.RawMessage, w Workflow) *Tool {
	return &Tool{Name: name, Description: description, InputSchema: inputSchema, OutputSchema: outputSchema, Workflow: &w}
}

// workflowDeadline is a workflow tool's deadline: its execution timeout.
func (t *Tool) workflowDeadline() time.Duration {
	if t.Workflow.ExecutionTimeout > 0 {
		return t.Workflow.ExecutionTimeout
	}
	return DefaultDeadline
}

func (t *Tool) compileWorkflow() []error {
	var errs []error
	w := t.Workflow
	if t.Execute != nil {
		errs = append(errs, errors.New("a workflow tool runs its Workflow.Type, not Execute: drop Execute"))
	}
	if w.Type == "" {
		errs = append(errs, errors.New("Workflow.Type is required: the workflow type to start"))
	}
	if w.ExecutionTimeout < 0 {
		errs = append(errs, errors.New("Workflow.ExecutionTimeout must not be negative (0 means DefaultDeadline)"))
	}
	switch w.IDReuse {
	case IDReuseAllowDuplicate, IDReuseAllowDuplicateFailedOnly, IDReuseRejectDuplicate:
	default:
		errs = append(errs, fmt.Errorf("Workflow.IDReuse %q: want %q, %q or empty (allow duplicate)", w.IDReuse, IDReuseAllowDuplicateFailedOnly, IDReuseRejectDuplicate))
	}
	if w.Retry != nil && w.Retry.MaximumAttempts < 0 {
		errs = append(errs, errors.New("Workflow.Retry: MaximumAttempts must not be negative"))
	}
	if t.Local {
		errs = append(errs, errors.New("a workflow tool cannot be Local: it runs as a child workflow"))
	}
	if t.Retry != nil || t.Idempotent || t.Timeout != 0 || t.HeartbeatTimeout != 0 {
		errs = append(errs, errors.New("a workflow tool has no activity: set Workflow.Retry and Workflow.ExecutionTimeout instead of Retry, Idempotent, Timeout or HeartbeatTimeout"))
	}
	return errs
}

// WorkflowRetry is the retry policy a workflow tool's child runs under
// (nil: none), with MaximumAttempts 0 read as DefaultMaxAttempts.
func (t *Tool) WorkflowRetry() *RetryPolicy {
	if t.Workflow == nil || t.Workflow.Retry == nil {
		return nil
	}
	r := *t.Workflow.Retry
	if r.MaximumAttempts == 0 {
		r.MaximumAttempts = DefaultMaxAttempts
	}
	return &r
}
