package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/query"
)

// ErrEnded means the session's workflow is closed: it takes no messages,
// answers or controls, and its stream holds no more than it recorded
// (ReadEnded reads that). errors.Is(err, ErrEnded) holds for every
// *EndedError.
var ErrEnded = errors.New("session ended")

// Workflow close statuses, as EndedError.Status names them.
const (
	StatusTerminated = "terminated"
	StatusFailed     = "failed"
	StatusTimedOut   = "timed out"
	StatusCanceled   = "canceled"
	StatusCompleted  = "completed"
)

// EndedError is a session whose workflow is closed. Sessions never close by
// themselves (they continue as new), so this is an abnormal end: an
// operator terminated or cancelled the workflow, Temporal terminated it (a
// history over the size or event-count limit), or it failed or timed out.
type EndedError struct {
	SessionID string
	// Status is how the workflow closed: StatusTerminated, StatusFailed,
	// StatusTimedOut, StatusCanceled (or StatusCompleted).
	Status string
	// Reason is the termination reason, or the failure's message, when
	// Temporal recorded one ("" otherwise).
	Reason string
	// RunID is the closed run; CloseTime when it closed (zero if unknown).
	RunID     string
	CloseTime time.Time
	// Initiator is the session's owner as its memo records it (nil for
	// sessions started without one): whoever may not see the session
	// must not see Reason either.
	Initiator *auth.Principal
}

func (e *EndedError) Error() string {
	msg := fmt.Sprintf("session %s has ended: its workflow was %s", e.SessionID, e.Status)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is makes errors.Is(err, ErrEnded) true.
func (e *EndedError) Is(target error) bool { return target == ErrEnded }

func statusName(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return StatusTerminated
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return StatusFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return StatusTimedOut
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return StatusCanceled
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return StatusCompleted
	}
	return strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// isOpen reports statuses in which the latest run still takes messages
// (continued-as-new is only seen in a race: the new run is running).
func isOpen(st enumspb.WorkflowExecutionStatus) bool {
	return st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		st == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW ||
		st == enumspb.WORKFLOW_EXECUTION_STATUS_PAUSED ||
		st == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
}

// State says whether session id is open: nil while its workflow runs, an
// error wrapping ErrNotFound when no workflow has that id, *EndedError when
// it is closed, or the failure to find out.
func (s *Service) State(ctx context.Context, id string) error {
	d, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return fmt.Errorf("describe session %s: %w", id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if isOpen(info.GetStatus()) {
		return nil
	}
	e := &EndedError{SessionID: id, Status: statusName(info.GetStatus()), RunID: info.GetExecution().GetRunId()}
	if ct := info.GetCloseTime(); ct != nil {
		e.CloseTime = ct.AsTime()
	}
	e.Reason = s.closeReason(ctx, id, e.RunID)
	if f, ok := info.GetMemo().GetFields()[MemoInitiator]; ok {
		var p auth.Principal
		if converter.GetDefaultDataConverter().FromPayload(f, &p) == nil && p.ID != "" {
			e.Initiator = &p
		}
	}
	return e
}

// closeReason reads why a run closed from its close event ("" when it
// cannot be read or says nothing).
func (s *Service) closeReason(ctx context.Context, id, runID string) string {
	it := s.Client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return ""
		}
		if a := ev.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			return a.GetReason()
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return a.GetFailure().GetMessage()
		}
		if ev.GetWorkflowExecutionTimedOutEventAttributes() != nil {
			return "it ran past its execution timeout"
		}
	}
	return ""
}

// classify turns the failure of a write to session id into ErrNotFound or
// *EndedError when the session is unknown or closed (whatever Temporal
// answered: "workflow not found", "already completed", a failed start, an
// update the closing workflow dropped), and returns err otherwise.
func (s *Service) classify(ctx context.Context, id string, err error) error {
	if err == nil || errors.Is(err, ErrEnded) || errors.Is(err, ErrNotFound) {
		return err
	}
	if ctx.Err() != nil {
		// No time left to ask; a workflow that is gone says so at once,
		// so a timeout is not that.
		return err
	}
	switch st := s.State(ctx, id); {
	case st == nil:
		return err
	case errors.Is(st, ErrEnded), errors.Is(st, ErrNotFound):
		return st
	default:
		return err // could not tell: the original failure says more
	}
}

// querySession queries the session's latest run, refusing closed runs:
// a closed session answers *EndedError, an unknown one ErrNotFound.
func (s *Service) querySession(ctx context.Context, id, queryType string, args ...any) (converter.EncodedValue, error) {
	return s.queryRun(ctx, id, false, queryType, args...)
}

// queryRun is querySession; ended: the latest run may be closed (a worker
// answers by replaying its history, which Temporal keeps for the
// namespace's retention period).
func (s *Service) queryRun(ctx context.Context, id string, ended bool, queryType string, args ...any) (converter.EncodedValue, error) {
	reject := enumspb.QUERY_REJECT_CONDITION_NOT_OPEN
	if ended {
		reject = enumspb.QUERY_REJECT_CONDITION_NONE
	}
	resp, err := query.Workflow(ctx, s.Client, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID:           id,
		QueryType:            queryType,
		Args:                 args,
		QueryRejectCondition: reject,
	})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, fmt.Errorf("query %s of session %s: %w", queryType, id, err)
	}
	if rej := resp.QueryRejected; rej != nil {
		if st := s.State(ctx, id); st != nil {
			return nil, st
		}
		return nil, fmt.Errorf("query %s of session %s: rejected (%s); the session runs again: retry", queryType, id, statusName(rej.GetStatus()))
	}
	if resp.QueryResult == nil {
		return nil, fmt.Errorf("query %s of session %s: no result", queryType, id)
	}
	return resp.QueryResult, nil
}
