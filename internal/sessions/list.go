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
	// Status is a session's status (idle, running, waiting-input,
	// waiting-tasks: its running turn's EveStatus, or idle without one)
	// or "closed" (the session workflow ended).
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
	// Status is the session's: its running turn's, idle, or "closed" (see
	// List); "" when the namespace lacks eve's attributes.
	Status    string
	Tools     []string
	Initiator *auth.Principal
	StartTime time.Time
	CloseTime time.Time
}

// Statuses List accepts.
var ListStatuses = []string{"idle", "running", "waiting-input", "waiting-tasks", "closed"}

// A session's status is its running turn's (eve-status-from-turns): a
// session started with signals.SessionVersions = 3 writes none of its own,
// and its turn writes EveStatus and EveTools from its start (running) to its
// end; a session without a running turn is idle. A turn's attributes may
// lag after an answered park (eve-park-writes): its inbox memo with no open
// item, or its status memo (signals.MemoStatus), says that it runs on. A
// session started before writes its own status (its attributes, and its
// status memo over them); its running turn, when that has attributes, says
// the same or newer, so List reads the turn wherever there is one.
//
// So a listing by status or tool pages over running turns (their
// attributes name their session: EveSessionId) and reads their sessions,
// and one by neither, idle or closed pages over sessions and reads the
// running turns of a page's sessions: one Visibility query each.

// turnStatuses are the statuses a listing finds by its sessions' turns.
var turnStatuses = []string{"running", "waiting-input", "waiting-tasks"}

// byTurns reports whether q pages over running turns rather than sessions.
func (q ListQuery) byTurns() bool {
	return slices.Contains(turnStatuses, q.Status) || q.Tool != "" && q.Status == ""
}

// Query renders q as the Visibility query List pages over: sessions, or
// for a status or tool running turns (byTurns).
func (q ListQuery) Query(taskQueue string) string {
	if q.byTurns() {
		parts := []string{`WorkflowType = ` + quote(signals.TurnWorkflow), `ExecutionStatus = "Running"`}
		if taskQueue != "" {
			parts = append(parts, `TaskQueue = `+quote(taskQueue))
		}
		switch q.Status {
		case "":
		case "running":
			// A turn whose park was answered may still say waiting-input
			// (its memo says running): List keeps the rows whose current
			// status matches.
			parts = append(parts, `EveStatus IN ("running", "waiting-input")`)
		default:
			parts = append(parts, `EveStatus = `+quote(q.Status))
		}
		if q.Tool != "" {
			parts = append(parts, `EveTools = `+quote(q.Tool))
		}
		return strings.Join(parts, " AND ")
	}
	parts := []string{`WorkflowType = ` + quote(signals.SessionWorkflow)}
	if taskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(taskQueue))
	}
	switch q.Status {
	case "closed":
		parts = append(parts, `ExecutionStatus != "Running"`)
	case "idle":
		parts = append(parts, `ExecutionStatus = "Running"`)
	}
	return strings.Join(parts, " AND ")
}

// List reads one page of sessions, newest first (for a status or tool,
// those of the newest running turns first). A page may hold fewer rows
// than asked when Visibility lags behind a status (see above).
func (s *Service) List(ctx context.Context, q ListQuery) ([]Listed, []byte, error) {
	size := q.PageSize
	if size <= 0 {
		size = DefaultListPageSize
	}
	if q.Tool != "" && (q.Status == "idle" || q.Status == "closed") {
		return []Listed{}, nil, nil // such a session waits on no tool
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q.Query(s.TaskQueue), PageSize: int32(size), NextPageToken: q.Cursor})
	if err != nil {
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && strings.Contains(inv.Error(), "Eve") {
			return nil, nil, fmt.Errorf("%w (%v)", ErrStatusUnavailable, err)
		}
		return nil, nil, fmt.Errorf("list sessions from Visibility: %w", err)
	}
	var out []Listed
	if q.byTurns() {
		out, err = s.sessionsOfTurns(ctx, resp.GetExecutions())
	} else {
		out, err = s.withTurnStatus(ctx, resp.GetExecutions())
		if errors.Is(err, ErrStatusUnavailable) && q.Status != "idle" {
			// Without eve's attributes, sessions list with no status
			// (closed ones as closed); only a filter by status needs them.
			err = nil
		}
	}
	if err != nil {
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

// listed is a session execution as List shows it: closed, or its own
// status (attributes, the status memo over them) as a session before
// eve-status-from-turns writes it; "" when it has none.
func listed(e *workflowpb.WorkflowExecutionInfo) Listed {
	l := Listed{SessionID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime(),
		Initiator: initiatorOf(e)}
	if e.GetCloseTime() != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		l.CloseTime, l.Status = e.GetCloseTime().AsTime(), "closed"
		return l
	}
	l.Status, l.Tools = statusOf(e)
	return l
}

// statusOf reads a workflow's status and tools: its attributes, or its
// status memo when it has one (the attributes may lag: signals.MemoStatus).
func statusOf(e *workflowpb.WorkflowExecutionInfo) (status string, tools []string) {
	dc := converter.GetDefaultDataConverter()
	sa := e.GetSearchAttributes().GetIndexedFields()
	if f, ok := sa[signals.SearchAttrStatus]; ok {
		_ = dc.FromPayload(f, &status)
	}
	if f, ok := sa["EveTools"]; ok {
		_ = dc.FromPayload(f, &tools)
	}
	if f, ok := e.GetMemo().GetFields()[signals.MemoStatus]; ok {
		var m signals.StatusMemo
		if dc.FromPayload(f, &m) == nil && m.Status != "" {
			status, tools = m.Status, m.Tools
		}
	}
	return status, tools
}

// turnStatus reads a running turn's status and tools, and whether it has
// any (a turn of a worker without search attributes has none). A turn that
// says waiting-input while its inbox memo lists no open request, its own
// or one its subagents proxied, runs on (eve-quiet-resume).
func turnStatus(e *workflowpb.WorkflowExecutionInfo) (status string, tools []string, ok bool) {
	status, tools = statusOf(e)
	if status == "" {
		return "", nil, false
	}
	if status == "waiting-input" {
		if f, has := e.GetMemo().GetFields()[signals.MemoInbox]; has {
			var m signals.InboxMemo
			if converter.GetDefaultDataConverter().FromPayload(f, &m) == nil && len(m.Items) == 0 && m.Relayed == 0 && m.SessionID != "" {
				return "running", nil, true
			}
		}
	}
	if status == "running" {
		tools = nil
	}
	return status, tools, true
}

// sessionOfTurn names a turn's session: its EveSessionId, else its
// workflow id's (<session>/turn_<n>).
func sessionOfTurn(e *workflowpb.WorkflowExecutionInfo) string {
	var id string
	if f, ok := e.GetSearchAttributes().GetIndexedFields()[signals.SearchAttrSessionID]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(f, &id)
	}
	if id == "" {
		if i := strings.LastIndex(e.GetExecution().GetWorkflowId(), "/"); i > 0 {
			id = e.GetExecution().GetWorkflowId()[:i]
		}
	}
	return id
}

// withTurnStatus lists a page of sessions, each running one with its
// running turn's status (one Visibility query for the page), or idle
// without one. Where the namespace lacks eve's attributes, it answers the
// rows as they say of themselves (no status, or closed) with
// ErrStatusUnavailable.
func (s *Service) withTurnStatus(ctx context.Context, execs []*workflowpb.WorkflowExecutionInfo) ([]Listed, error) {
	out := make([]Listed, 0, len(execs))
	var running []string
	for _, e := range execs {
		l := listed(e)
		if l.Status != "closed" {
			running = append(running, l.SessionID)
		}
		out = append(out, l)
	}
	if len(running) == 0 {
		return out, nil
	}
	turns, err := s.runningTurns(ctx, running)
	if errors.Is(err, ErrStatusUnavailable) {
		return out, err
	}
	if err != nil {
		return nil, err
	}
	for i := range out {
		l := &out[i]
		if l.Status == "closed" {
			continue
		}
		if t, ok := turns[l.SessionID]; ok {
			if status, tools, ok := turnStatus(t); ok {
				l.Status, l.Tools = status, tools
				continue
			}
		}
		if l.Status == "" {
			l.Status = "idle" // a session that writes no status, between turns
		}
	}
	return out, nil
}

// runningTurns reads the running turns of sessions ids, by session: one
// Visibility query.
func (s *Service) runningTurns(ctx context.Context, ids []string) (map[string]*workflowpb.WorkflowExecutionInfo, error) {
	parts := []string{`WorkflowType = ` + quote(signals.TurnWorkflow), `ExecutionStatus = "Running"`, `EveSessionId IN (` + quoteList(ids) + `)`}
	if s.TaskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(s.TaskQueue))
	}
	// Twice the sessions: Visibility may list a turn that just ended
	// beside the next.
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: strings.Join(parts, " AND "), PageSize: int32(len(ids) * 2)})
	if err != nil {
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && strings.Contains(inv.Error(), "Eve") {
			return nil, fmt.Errorf("%w (%v)", ErrStatusUnavailable, err)
		}
		return nil, fmt.Errorf("list the running turns of sessions from Visibility: %w", err)
	}
	out := map[string]*workflowpb.WorkflowExecutionInfo{}
	for _, e := range resp.GetExecutions() {
		id := sessionOfTurn(e)
		if prev, ok := out[id]; !ok || e.GetStartTime().AsTime().After(prev.GetStartTime().AsTime()) {
			out[id] = e // the newest: a session runs one turn at a time
		}
	}
	return out, nil
}

// sessionsOfTurns lists the sessions of a page of running turns, in the
// turns' order, each once, with its turn's status: the sessions are read
// in one Visibility query. A session Visibility does not list (yet) is
// left out.
func (s *Service) sessionsOfTurns(ctx context.Context, turns []*workflowpb.WorkflowExecutionInfo) ([]Listed, error) {
	var ids []string
	for _, t := range turns {
		if id := sessionOfTurn(t); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return []Listed{}, nil
	}
	parts := []string{`WorkflowType = ` + quote(signals.SessionWorkflow), `ExecutionStatus = "Running"`, `WorkflowId IN (` + quoteList(ids) + `)`}
	if s.TaskQueue != "" {
		parts = append(parts, `TaskQueue = `+quote(s.TaskQueue))
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: strings.Join(parts, " AND "), PageSize: int32(len(ids) * 2)})
	if err != nil {
		return nil, fmt.Errorf("list the sessions of running turns from Visibility: %w", err)
	}
	sessions := map[string]*workflowpb.WorkflowExecutionInfo{}
	for _, e := range resp.GetExecutions() {
		sessions[e.GetExecution().GetWorkflowId()] = e
	}
	out := make([]Listed, 0, len(ids))
	seen := map[string]bool{}
	for _, t := range turns {
		id := sessionOfTurn(t)
		e, ok := sessions[id]
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		l := listed(e)
		if status, tools, ok := turnStatus(t); ok {
			l.Status, l.Tools = status, tools
		}
		out = append(out, l)
	}
	return out, nil
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
		q := `WorkflowType = ` + quote(signals.SessionWorkflow) + ` AND WorkflowId IN (` + quoteList(ids[:n]) + `)`
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
