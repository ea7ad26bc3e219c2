// Package executions drives tool-execution workflows
// (signals.ExecutionWorkflow) through a Temporal client: start (or join),
// describe, await and cancel. It is to executions what internal/sessions is
// to sessions; the tools API (internal/toolsapi) and the MCP server
// (internal/mcpserver) both use it. It knows nothing of HTTP or of tools:
// callers decide the plan and map its errors.
package executions

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Driver talks to execution workflows.
type Driver struct {
	Client client.Client
	// TaskQueue of the workers that serve the agent.
	TaskQueue string
	Logger    *slog.Logger
}

// NotFoundError: no execution has that id (or the workflow is not an
// execution).
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("no execution %q", e.ID) }

// UnavailableError: Temporal could not be reached for Op (the cause is
// logged, not returned to callers, who show the error to clients).
type UnavailableError struct{ Op string }

func (e *UnavailableError) Error() string { return e.Op + ": could not reach Temporal; retry" }

// ID derives the id (the workflow ID) of a user's execution from the
// user, the tool and the idempotency key, within a scope: the task queue of
// the agent's workers, so two deployments sharing a namespace never join
// each other's executions.
func ID(scope, userID, tool, key string) string {
	return hashID("eve.execution/v1\x00" + scope + "\x00" + userID + "\x00" + tool + "\x00" + key)
}

// OwnerID derives an execution's id from its owner's full identity, so a
// service and a user that share an id never share an execution. A user's
// id is ID's, unchanged since before principal types counted, so retries
// across an upgrade still join.
func OwnerID(scope string, owner auth.Principal, tool, key string) string {
	if t := PrincipalType(owner.Type); t != auth.TypeUser {
		return hashID("eve.execution/v2\x00" + scope + "\x00" + t + "\x00" + owner.ID + "\x00" + tool + "\x00" + key)
	}
	return ID(scope, owner.ID, tool, key)
}

func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return signals.ExecutionIDPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20]))
}

// SamePrincipal: one identity, id and type (an unset type is a user).
func SamePrincipal(a, b auth.Principal) bool {
	return a.ID == b.ID && PrincipalType(a.Type) == PrincipalType(b.Type)
}

// PrincipalType reads an unset type as a user: the keys file's default,
// and what every execution ran as before types were recorded.
func PrincipalType(t string) string {
	if t == "" {
		return auth.TypeUser
	}
	return t
}

// Start starts the execution in.ExecutionID, or joins it when it exists
// (whatever its state: ids are never reused), and returns its run id.
func (d *Driver) Start(ctx context.Context, in signals.ExecutionInput) (string, error) {
	ptype := ""
	if in.Caller != nil {
		ptype = PrincipalType(in.Caller.Type)
	}
	run, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       in.ExecutionID,
		TaskQueue:                d.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo:                     map[string]any{"tool": in.Tool, "userId": in.UserID, "principalType": ptype, "inputHash": in.InputHash},
	}, signals.ExecutionWorkflow, in)
	if err != nil {
		return "", d.temporalError("start execution", err)
	}
	return run.GetRunID(), nil
}

// State is what Describe tells about an execution.
type State struct {
	Result        protocol.ExecutionResult
	UserID        string
	PrincipalType string // "" before types were recorded: a user
	InputHash     string
	RunID         string
	// StartedAt and ClosedAt are Temporal's times of the run (ClosedAt is
	// zero while it runs).
	StartedAt time.Time
	ClosedAt  time.Time
	// Progress is the running tool's latest report (its activity's last
	// heartbeat, tools.Context.ReportProgress), nil without one.
	Progress *protocol.Progress
}

// Owner is the principal the execution runs for.
func (s State) Owner() auth.Principal {
	return auth.Principal{ID: s.UserID, Type: PrincipalType(s.PrincipalType)}
}

// Describe reads an execution's state; terminal executions come with
// their result (and output). runID "" reads the latest run.
func (d *Driver) Describe(ctx context.Context, id, runID string) (State, signals.ExecutionOutput, error) {
	var out signals.ExecutionOutput
	if !strings.HasPrefix(id, signals.ExecutionIDPrefix) {
		return State{}, out, &NotFoundError{ID: id}
	}
	resp, err := d.Client.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return State{}, out, &NotFoundError{ID: id}
		}
		return State{}, out, d.temporalError("describe execution", err)
	}
	info := resp.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != signals.ExecutionWorkflow {
		return State{}, out, &NotFoundError{ID: id}
	}
	st := State{RunID: info.GetExecution().GetRunId(), StartedAt: info.GetStartTime().AsTime()}
	if ct := info.GetCloseTime(); ct != nil {
		st.ClosedAt = ct.AsTime()
	}
	dc := converter.GetDefaultDataConverter()
	for k, p := range info.GetMemo().GetFields() {
		var v string
		if dc.FromPayload(p, &v) != nil {
			continue
		}
		switch k {
		case "tool":
			st.Result.Tool = v
		case "userId":
			st.UserID = v
		case "principalType":
			st.PrincipalType = v
		case "inputHash":
			st.InputHash = v
		}
	}
	st.Result.ID = id
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		st.Result.Status = protocol.ExecutionRunning
		if info.GetHistoryLength() <= 2 {
			// Started and a first task scheduled: no worker has picked it up.
			st.Result.Status = protocol.ExecutionQueued
		}
		st.Progress = progressOf(resp.GetPendingActivities(), dc)
		return st, out, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if err := d.Client.GetWorkflow(ctx, id, st.RunID).Get(ctx, &out); err != nil {
			return st, out, d.temporalError("read execution result", err)
		}
		out.ExecutionResult.ID = id
		st.Result = out.ExecutionResult
		return st, out, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		st.Result.Status = protocol.ExecutionCanceled
		st.Result.Error = &protocol.ExecutionError{Code: protocol.ExecCodeCanceled, Message: "the execution was cancelled"}
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		st.Result.Status = protocol.ExecutionCanceled
		st.Result.Error = &protocol.ExecutionError{Code: "terminated", Message: "the execution was terminated by an operator"}
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		st.Result.Status = protocol.ExecutionTimedOut
		st.Result.Error = &protocol.ExecutionError{Code: protocol.ExecCodeTimeout, Message: "the execution timed out"}
	default:
		st.Result.Status = protocol.ExecutionFailed
		msg := "the execution failed"
		if err := d.Client.GetWorkflow(ctx, id, st.RunID).Get(ctx, nil); err != nil {
			msg = "the execution failed: " + errorMessage(err)
		}
		st.Result.Error = &protocol.ExecutionError{Code: protocol.ExecCodeExecutionFailed, Message: msg}
	}
	return st, out, nil
}

// Await waits up to wait (and ctx) for an execution to end. When it does
// not, the result is its current state and no error.
func (d *Driver) Await(ctx context.Context, id, runID string, wait time.Duration) (protocol.ExecutionResult, signals.ExecutionOutput, error) {
	var out signals.ExecutionOutput
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := d.Client.GetWorkflow(wctx, id, runID).Get(wctx, &out)
	if err == nil {
		out.ExecutionResult.ID = id
		return out.ExecutionResult, out, nil
	}
	if ctx.Err() != nil {
		return protocol.ExecutionResult{}, out, ctx.Err()
	}
	if wctx.Err() != nil || isDeadline(err) {
		st, _, derr := d.Describe(ctx, id, runID)
		if derr != nil {
			return protocol.ExecutionResult{}, out, derr
		}
		return st.Result, out, nil
	}
	// Closed without a result (cancelled before it ran, terminated, ...).
	st, out, derr := d.Describe(ctx, id, runID)
	if derr != nil {
		return protocol.ExecutionResult{}, out, derr
	}
	return st.Result, out, nil
}

// Wait blocks until the execution ends or ctx does, long-polling Temporal
// in rounds of at most round.
func (d *Driver) Wait(ctx context.Context, id string, round time.Duration) (protocol.ExecutionResult, error) {
	if !strings.HasPrefix(id, signals.ExecutionIDPrefix) {
		return protocol.ExecutionResult{}, &NotFoundError{ID: id}
	}
	for {
		res, _, err := d.Await(ctx, id, "", round)
		if err != nil || res.Status.Terminal() {
			return res, err
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
}

// Cancel asks an execution to stop and waits up to wait for it to end.
// Cancelling an ended execution changes nothing and returns its result.
func (d *Driver) Cancel(ctx context.Context, id string, wait time.Duration) (protocol.ExecutionResult, error) {
	st, _, err := d.Describe(ctx, id, "")
	if err != nil || st.Result.Status.Terminal() {
		return st.Result, err
	}
	if err := d.Client.CancelWorkflow(ctx, id, st.RunID); err != nil {
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return protocol.ExecutionResult{}, d.temporalError("cancel execution", err)
		}
	}
	res, _, err := d.Await(ctx, id, st.RunID, wait)
	if err == nil && res.Tool == "" {
		res.Tool = st.Result.Tool
	}
	return res, err
}

// Query asks a running execution for its current state (signals.QueryExecution):
// a pending approval shows only there. It waits at most wait for a worker.
func (d *Driver) Query(ctx context.Context, id, runID string, wait time.Duration) (signals.ExecutionOutput, error) {
	var out signals.ExecutionOutput
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v, err := d.Client.QueryWorkflow(qctx, id, runID, signals.QueryExecution)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return out, &NotFoundError{ID: id}
		}
		return out, d.temporalError("query execution", err)
	}
	if err := v.Get(&out); err != nil {
		return out, fmt.Errorf("executions: decode the state of %s: %w", id, err)
	}
	return out, nil
}

// Answer answers the approval an execution waits for and returns once the
// workflow has taken it (or refused it: it waits for nothing, or the
// answer is not its owner's).
func (d *Driver) Answer(ctx context.Context, id, runID string, a signals.ExecutionApprovalAnswer) error {
	return d.update(ctx, id, runID, signals.UpdateExecutionApproval, a, "answer execution approval")
}

// update runs one update of an execution; a refusal is a *RefusedError.
func (d *Driver) update(ctx context.Context, id, runID, name string, arg any, op string) error {
	h, err := d.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, RunID: runID, UpdateName: name,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return &NotFoundError{ID: id}
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return &RefusedError{Message: appErr.Message()}
		}
		return d.temporalError(op, err)
	}
	if err := h.Get(ctx, nil); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return &RefusedError{Message: appErr.Message()}
		}
		return d.temporalError(op, err)
	}
	return nil
}

// AnswerClient delivers answers to a task's pending client requests and
// returns once the workflow has taken them (or refused them).
func (d *Driver) AnswerClient(ctx context.Context, id, runID string, a signals.ExecutionClientAnswer) error {
	return d.update(ctx, id, runID, signals.UpdateExecutionClientInput, a, "answer execution client input")
}

// RefusedError: the execution refused an answer (its validator's reason).
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// RequestCancel asks a running execution to stop and returns at once;
// Describe shows it cancelled once the workflow has ended.
func (d *Driver) RequestCancel(ctx context.Context, id, runID string) error {
	if err := d.Client.CancelWorkflow(ctx, id, runID); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return &NotFoundError{ID: id}
		}
		return d.temporalError("cancel execution", err)
	}
	return nil
}

func (d *Driver) temporalError(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Error("executions: "+op, "err", err)
	return &UnavailableError{Op: op}
}

func isDeadline(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &de)
}

func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// progressOf reads a progress report from the pending activities'
// heartbeats: the first detail of the last heartbeat that decodes as one
// (other heartbeat details are not progress).
func progressOf(acts []*workflowpb.PendingActivityInfo, dc converter.DataConverter) *protocol.Progress {
	for _, a := range acts {
		ps := a.GetHeartbeatDetails().GetPayloads()
		if len(ps) == 0 {
			continue
		}
		var probe map[string]json.RawMessage
		if dc.FromPayload(ps[0], &probe) != nil || probe["progress"] == nil {
			continue
		}
		var p protocol.Progress
		if dc.FromPayload(ps[0], &p) == nil {
			return &p
		}
	}
	return nil
}
