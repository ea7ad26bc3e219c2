package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"

	enumspb "go.temporal.io/api/enums/v1"
)

// Local activities through which a session and its turns reach each other
// without the tasks a child workflow or an external signal schedules on
// the caller (docs/performance.md, "Hops per turn").
const (
	StartWorkflowName  = "eve.StartWorkflow"
	SignalWorkflowName = "eve.SignalWorkflow"
	WorkflowClosedName = "eve.WorkflowClosed"
	// TurnEventsName reads the events of a turn that ended abnormally.
	TurnEventsName = "eve.TurnEvents"
)

// StartWorkflowInput starts one of eve's workflows (a session's turn) on the
// caller's task queue.
type StartWorkflowInput struct {
	WorkflowID string          `json:"workflowId"`
	Workflow   string          `json:"workflow"`
	TaskQueue  string          `json:"taskQueue"`
	Input      json.RawMessage `json:"input"`
}

// ErrTypeNoClient is the error type of these activities on a worker whose
// agent has no Temporal client.
const ErrTypeNoClient = "NoClient"

// client is the worker's client, which these activities need.
func (a *Activities) client() (client.Client, error) {
	if a.Client == nil {
		return nil, temporal.NewNonRetryableApplicationError("the worker's agent has no Temporal client (agent.Agent.Client)", ErrTypeNoClient, nil)
	}
	return a.Client, nil
}

// StartWorkflow starts in.Workflow under in.WorkflowID, eagerly when this
// worker polls its task queue (its first workflow task then runs here, with
// no trip through matching). A workflow id already used counts as started:
// this is the retry of a start that went through, and ids are never reused
// (a session's turn ids only grow).
func (a *Activities) StartWorkflow(ctx context.Context, in StartWorkflowInput) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	// Without the activity's values: the started workflow roots its own
	// trace (a turn's), not a span of the session that lives for days.
	_, err = c.ExecuteWorkflow(withoutValues{ctx}, client.StartWorkflowOptions{
		ID:                    in.WorkflowID,
		TaskQueue:             in.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		EnableEagerStart:      true,
	}, in.Workflow, in.Input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start workflow %s: %w", in.WorkflowID, err)
	}
	return nil
}

// SignalWorkflowInput is one signal to a running workflow (a turn's report
// to its session).
type SignalWorkflowInput struct {
	WorkflowID string          `json:"workflowId"`
	Signal     string          `json:"signal"`
	Payload    json.RawMessage `json:"payload"`
}

// SignalWorkflow sends the signal. A workflow that is gone has nobody to
// tell: that is not an error.
func (a *Activities) SignalWorkflow(ctx context.Context, in SignalWorkflowInput) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	err = c.SignalWorkflow(ctx, in.WorkflowID, "", in.Signal, in.Payload)
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal %s to %s: %w", in.Signal, in.WorkflowID, err)
	}
	return nil
}

// WorkflowClosed reports whether the workflow has closed (a gone workflow
// counts as closed).
func (a *Activities) WorkflowClosed(ctx context.Context, workflowID string) (bool, error) {
	c, err := a.client()
	if err != nil {
		return false, err
	}
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// withoutValues keeps a context's deadline and cancellation, not its values.
type withoutValues struct{ context.Context }

func (withoutValues) Value(any) any { return nil }

// TurnEvents reads the events a turn workflow holds, by its events query,
// page by page; a closed workflow answers from its replayed history. A
// session keeps the events of a turn that ended without a result
// (terminated by an operator, timed out), so the indexes a stream has read
// keep their events. It reads and changes nothing, so running it again
// when the session's workflow task fails is harmless.
func (a *Activities) TurnEvents(ctx context.Context, workflowID string) ([]protocol.Event, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	var all []protocol.Event
	for {
		v, err := c.QueryWorkflow(ctx, workflowID, "", signals.QueryTurnEvents, len(all))
		if err != nil {
			return nil, fmt.Errorf("query the events of %s: %w", workflowID, err)
		}
		var page []protocol.Event
		if err := v.Get(&page); err != nil {
			return nil, fmt.Errorf("decode the events of %s: %w", workflowID, err)
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
	}
}
