package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/signals"
)

// ListQuery narrows List: every field is optional.
type ListQuery struct {
	// Status is an EveStatus value (idle, running, waiting-input,
	// waiting-tasks) or "closed" (the session workflow ended).
	Status string
	// Tool: sessions waiting on this tool (EveTools).
	Tool     string
	PageSize int
	Cursor   []byte
}

// DefaultListPageSize is the sessions one page reads.
const DefaultListPageSize = 50

// Listed is one session as Visibility knows it.
type Listed struct {
	SessionID string
	// Status is EveStatus, or "closed"; "" when the namespace lacks the
	// attribute.
	Status    string
	Tools     []string
	Initiator *auth.Principal
	StartTime time.Time
	CloseTime time.Time
}

// Statuses List accepts.
var ListStatuses = []string{"idle", "running", "waiting-input", "waiting-tasks", "closed"}

// Query renders q as a Visibility query over this service's sessions.
func (q ListQuery) Query(taskQueue string) string {
	parts := []string{`WorkflowType = ` + quote(signals.SessionWorkflow)}
	if taskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(taskQueue))
	}
	switch q.Status {
	case "":
	case "closed":
		parts = append(parts, `ExecutionStatus != "Running"`)
	default:
		parts = append(parts, `ExecutionStatus = "Running"`, `EveStatus = `+quote(q.Status))
	}
	if q.Tool != "" {
		parts = append(parts, `EveTools = `+quote(q.Tool))
	}
	return strings.Join(parts, " AND ")
}

// List reads one page of sessions (newest first): one Visibility query.
func (s *Service) List(ctx context.Context, q ListQuery) ([]Listed, []byte, error) {
	size := q.PageSize
	if size <= 0 {
		size = DefaultListPageSize
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q.Query(s.TaskQueue), PageSize: int32(size), NextPageToken: q.Cursor})
	if err != nil {
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && strings.Contains(inv.Error(), "Eve") {
			return nil, nil, fmt.Errorf("%w (%v)", ErrStatusUnavailable, err)
		}
		return nil, nil, fmt.Errorf("list sessions from Visibility: %w", err)
	}
	dc := converter.GetDefaultDataConverter()
	out := make([]Listed, 0, len(resp.GetExecutions()))
	for _, e := range resp.GetExecutions() {
		l := Listed{SessionID: e.GetExecution().GetWorkflowId(), StartTime: e.GetStartTime().AsTime()}
		if e.GetCloseTime() != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			l.CloseTime, l.Status = e.GetCloseTime().AsTime(), "closed"
		}
		if f, ok := e.GetMemo().GetFields()[MemoInitiator]; ok {
			var p auth.Principal
			if dc.FromPayload(f, &p) == nil && p.ID != "" {
				l.Initiator = &p
			}
		}
		sa := e.GetSearchAttributes().GetIndexedFields()
		if f, ok := sa["EveStatus"]; ok && l.Status == "" {
			_ = dc.FromPayload(f, &l.Status)
		}
		if f, ok := sa["EveTools"]; ok {
			_ = dc.FromPayload(f, &l.Tools)
		}
		out = append(out, l)
	}
	return out, resp.GetNextPageToken(), nil
}

// ErrStatusUnavailable: the namespace lacks eve's status attributes.
var ErrStatusUnavailable = errors.New("listing sessions by status or tool needs eve's search attributes (EveStatus, EveTools, EveSessionId) on the namespace: " +
	"run `eve doctor` for the commands that register them (eve dev registers them itself)")

// JobsQuery narrows Jobs.
type JobsQuery struct {
	SessionID string
	Tool      string
	PageSize  int
	Cursor    []byte
}

// Job is one delegated action a running turn waits on.
type Job struct {
	SessionID, TurnID, WorkflowID string
	signals.ActionState
	// StartedAt is when the call's activity was scheduled; LastHeartbeat
	// when its job last heartbeat (zero: never), with its details.
	StartedAt        time.Time
	LastHeartbeat    time.Time
	HeartbeatDetails []byte
}

// Jobs reads one page of turns waiting on delegated jobs (one Visibility
// query) and, for each, its pending actions: the activities' heartbeats
// from Temporal and each action's deadline from its turn.
func (s *Service) Jobs(ctx context.Context, q JobsQuery) ([]Job, []byte, error) {
	size := q.PageSize
	if size <= 0 {
		size = DefaultListPageSize
	}
	parts := []string{`WorkflowType = ` + quote(signals.TurnWorkflow), `ExecutionStatus = "Running"`, `EveStatus = "waiting-tasks"`}
	if s.TaskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(s.TaskQueue))
	}
	if q.SessionID != "" {
		parts = append(parts, `EveSessionId = `+quote(q.SessionID))
	}
	if q.Tool != "" {
		parts = append(parts, `EveTools = `+quote(q.Tool))
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: strings.Join(parts, " AND "), PageSize: int32(size), NextPageToken: q.Cursor})
	if err != nil {
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && strings.Contains(inv.Error(), "Eve") {
			return nil, nil, fmt.Errorf("%w (%v)", ErrStatusUnavailable, err)
		}
		return nil, nil, fmt.Errorf("list delegated jobs from Visibility: %w", err)
	}
	var out []Job
	for _, e := range resp.GetExecutions() {
		wid := e.GetExecution().GetWorkflowId()
		sid, tid, ok := strings.Cut(wid, "/")
		if !ok {
			continue
		}
		d, err := s.Client.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			continue // it ended meanwhile
		}
		for _, pa := range d.GetPendingActivities() {
			aid, ok := signals.ActionIDOfActivity(wid, pa.GetActivityId())
			if !ok {
				continue
			}
			var st signals.ActionState
			v, err := query.Value(ctx, s.Client, wid, "", signals.QueryAction, aid)
			if err != nil || v.Get(&st) != nil || st.ActionID == "" || st.Ended() {
				continue // not a delegated call's activity, or no longer pending
			}
			if q.Tool != "" && st.Tool != q.Tool {
				continue
			}
			j := Job{SessionID: sid, TurnID: tid, WorkflowID: wid, ActionState: st}
			if t := pa.GetScheduledTime(); t != nil {
				j.StartedAt = t.AsTime()
			}
			if t := pa.GetLastHeartbeatTime(); t != nil && !t.AsTime().IsZero() && t.AsTime().Unix() > 0 {
				j.LastHeartbeat = t.AsTime()
			}
			if hd := pa.GetHeartbeatDetails().GetPayloads(); len(hd) > 0 {
				j.HeartbeatDetails = hd[len(hd)-1].GetData()
			}
			out = append(out, j)
		}
	}
	return out, resp.GetNextPageToken(), nil
}
