package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
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
	// RunID is the run Visibility listed (a session continued as new
	// lists once per run).
	RunID string
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
	case "running":
		// A session whose turn resumed may still say waiting-input in its
		// attributes (its status memo says running): List keeps the rows
		// whose current status matches.
		parts = append(parts, `ExecutionStatus = "Running"`, `EveStatus IN ("running", "waiting-input")`)
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
		l := Listed{SessionID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime(),
			Initiator: initiatorOf(e)}
		if e.GetCloseTime() != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			l.CloseTime, l.Status = e.GetCloseTime().AsTime(), "closed"
		}
		sa := e.GetSearchAttributes().GetIndexedFields()
		if f, ok := sa["EveStatus"]; ok && l.Status == "" {
			_ = dc.FromPayload(f, &l.Status)
		}
		if f, ok := sa["EveTools"]; ok {
			_ = dc.FromPayload(f, &l.Tools)
		}
		if f, ok := e.GetMemo().GetFields()[signals.MemoStatus]; ok && l.Status != "closed" {
			// The attributes may lag (signals.MemoStatus): the memo is current.
			var m signals.StatusMemo
			if dc.FromPayload(f, &m) == nil && m.Status != "" {
				l.Status, l.Tools = m.Status, m.Tools
			}
		}
		out = append(out, l)
	}
	if err := s.confirmWaiting(ctx, out); err != nil {
		return nil, nil, err
	}
	kept := out[:0]
	for _, l := range out {
		if q.matches(l) {
			kept = append(kept, l)
		} // else the attributes lagged; a page may hold fewer rows
	}
	return kept, resp.GetNextPageToken(), nil
}

// confirmWaiting reads the sessions that say waiting-input against their
// running turns' inbox memos (one Visibility query, only when a row says
// so): a turn whose last request closed does not tell its session
// (eve-quiet-resume), so the session says waiting-input until its turn
// ends or parks again, while the turn's memo already lists no open
// request, its own or one its subagents proxied. Such a session is
// running. A session whose turn has no inbox memo keeps what it says.
func (s *Service) confirmWaiting(ctx context.Context, rows []Listed) error {
	var ids []string
	for _, l := range rows {
		if l.Status == "waiting-input" {
			ids = append(ids, quote(l.SessionID))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	parts := []string{`WorkflowType = ` + quote(signals.TurnWorkflow), `ExecutionStatus = "Running"`, `EveSessionId IN (` + strings.Join(ids, ", ") + `)`}
	if s.TaskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(s.TaskQueue))
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: strings.Join(parts, " AND "), PageSize: int32(len(ids) * 2)})
	if err != nil {
		return fmt.Errorf("list the running turns of waiting sessions from Visibility: %w", err)
	}
	dc := converter.GetDefaultDataConverter()
	resumed := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		f, ok := e.GetMemo().GetFields()[signals.MemoInbox]
		if !ok {
			continue
		}
		var m signals.InboxMemo
		if dc.FromPayload(f, &m) == nil && len(m.Items) == 0 && m.Relayed == 0 && m.SessionID != "" {
			resumed[m.SessionID] = true
		}
	}
	for i := range rows {
		if rows[i].Status == "waiting-input" && resumed[rows[i].SessionID] {
			rows[i].Status, rows[i].Tools = "running", nil
		}
	}
	return nil
}

// matches reports whether a listed session's current status and tools
// (memo over attributes) are what q asks for.
func (q ListQuery) matches(l Listed) bool {
	if q.Status != "" && l.Status != q.Status {
		return false
	}
	return q.Tool == "" || slices.Contains(l.Tools, q.Tool)
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

// JobTurn is a running turn that waits on delegated jobs.
type JobTurn struct {
	SessionID, TurnID, WorkflowID string
}

// JobTurns reads one page of turns waiting on delegated jobs: one
// Visibility query. TurnJobs reads a turn's jobs.
func (s *Service) JobTurns(ctx context.Context, q JobsQuery) ([]JobTurn, []byte, error) {
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
	out := make([]JobTurn, 0, len(resp.GetExecutions()))
	for _, e := range resp.GetExecutions() {
		wid := e.GetExecution().GetWorkflowId()
		if sid, tid, ok := strings.Cut(wid, "/"); ok {
			out = append(out, JobTurn{SessionID: sid, TurnID: tid, WorkflowID: wid})
		}
	}
	return out, resp.GetNextPageToken(), nil
}

// TurnJobs reads the delegated actions a turn waits on (those of tool
// only, when set): the activities' heartbeats from Temporal and each
// action's deadline from the turn. A turn that ended meanwhile has none.
func (s *Service) TurnJobs(ctx context.Context, jt JobTurn, tool string) []Job {
	d, err := s.Client.DescribeWorkflowExecution(ctx, jt.WorkflowID, "")
	if err != nil {
		return nil // it ended meanwhile
	}
	var out []Job
	for _, pa := range d.GetPendingActivities() {
		aid, ok := signals.ActionIDOfActivity(jt.WorkflowID, pa.GetActivityId())
		if !ok {
			continue
		}
		var st signals.ActionState
		v, err := query.Value(ctx, s.Client, jt.WorkflowID, "", signals.QueryAction, aid)
		if err != nil || v.Get(&st) != nil || st.ActionID == "" || st.Ended() {
			continue // not a delegated call's activity, or no longer pending
		}
		if tool != "" && st.Tool != tool {
			continue
		}
		j := Job{SessionID: jt.SessionID, TurnID: jt.TurnID, WorkflowID: jt.WorkflowID, ActionState: st}
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
	return out
}

// initiatorOf reads a session execution's initiator from its memo (nil
// for a session started without one).
func initiatorOf(e *workflowpb.WorkflowExecutionInfo) *auth.Principal {
	f, ok := e.GetMemo().GetFields()[MemoInitiator]
	if !ok {
		return nil
	}
	var p auth.Principal
	if converter.GetDefaultDataConverter().FromPayload(f, &p) != nil || p.ID == "" {
		return nil
	}
	return &p
}

// ownersBatch is how many session ids one Owners query names.
const ownersBatch = 100

// Owners reads the initiators of sessions from their memos in Visibility:
// one query per 100 ids, where a state query per session would ask its
// workers. A session without an initiator, or that Visibility does not
// list (yet), is absent from the map.
func (s *Service) Owners(ctx context.Context, ids []string) (map[string]*auth.Principal, error) {
	out := map[string]*auth.Principal{}
	for len(ids) > 0 {
		n := min(len(ids), ownersBatch)
		quoted := make([]string, n)
		for i, id := range ids[:n] {
			quoted[i] = quote(id)
		}
		q := `WorkflowType = ` + quote(signals.SessionWorkflow) + ` AND WorkflowId IN (` + strings.Join(quoted, ", ") + `)`
		var token []byte
		for {
			resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: int32(2 * n), NextPageToken: token})
			if err != nil {
				return nil, fmt.Errorf("read sessions' owners from Visibility: %w", err)
			}
			for _, e := range resp.GetExecutions() {
				if p := initiatorOf(e); p != nil {
					out[e.GetExecution().GetWorkflowId()] = p
				}
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		ids = ids[n:]
	}
	return out, nil
}
