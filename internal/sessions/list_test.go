package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/eve-temporal/eve/signals"
)

// listFake answers ListWorkflow with fixed executions (sessions, or turns
// for a query of turns) and keeps the queries.
type listFake struct {
	client.Client
	rows, turns    []*workflowpb.WorkflowExecutionInfo
	turnErr        error // a query of turns fails so
	sessionQueries []string
	turnQueries    []string
}

func (f *listFake) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if strings.HasPrefix(req.GetQuery(), `WorkflowType = "`+signals.TurnWorkflow+`"`) {
		f.turnQueries = append(f.turnQueries, req.GetQuery())
		if f.turnErr != nil {
			return nil, f.turnErr
		}
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.turns}, nil
	}
	f.sessionQueries = append(f.sessionQueries, req.GetQuery())
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.rows}, nil
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// execution is a running workflow id with search attributes status and
// tools (none when status is "") and the memo given.
func execution(t *testing.T, id, status string, tools []string, memo map[string]any) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	e := &workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r"},
		Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		StartTime:        timestamppb.New(time.Unix(1, 0)),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{}},
		Memo:             &commonpb.Memo{Fields: map[string]*commonpb.Payload{}},
	}
	if status != "" {
		e.SearchAttributes.IndexedFields[signals.SearchAttrStatus] = payload(t, status)
		e.SearchAttributes.IndexedFields["EveTools"] = payload(t, tools)
	}
	for k, v := range memo {
		e.Memo.Fields[k] = payload(t, v)
	}
	return e
}

// turn is session's running turn with attributes status and tools, its
// EveSessionId, and the memo given.
func turn(t *testing.T, session, status string, tools []string, memo map[string]any) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	e := execution(t, session+"/turn_0", status, tools, memo)
	e.SearchAttributes.IndexedFields[signals.SearchAttrSessionID] = payload(t, session)
	return e
}

func inbox(session string, open, relayed int) map[string]any {
	m := signals.InboxMemo{SessionID: session, TurnID: "turn_0", Items: []signals.InboxEntry{}, Relayed: relayed}
	for range open {
		m.Items = append(m.Items, signals.InboxEntry{})
	}
	return map[string]any{signals.MemoInbox: m}
}

// A session's status is its running turn's (eve-status-from-turns): a
// session that writes none and has no running turn is idle; a turn whose
// park was answered says so in its inbox memo (no open item, none
// proxied) or its status memo; a session that writes its own status (one
// started before) keeps it where its turn has none. A listing by status or
// tool pages over running turns and reads their sessions; the others page
// over sessions and read their running turns: one query each.
func TestListReadsTheTurns(t *testing.T) {
	refund := []string{"refund_charge"}
	rows := func(t *testing.T) []*workflowpb.WorkflowExecutionInfo {
		closed := execution(t, "ses_closed", "", nil, nil)
		closed.Status, closed.CloseTime = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, timestamppb.New(time.Unix(2, 0))
		return []*workflowpb.WorkflowExecutionInfo{
			execution(t, "ses_parked", "", nil, nil),
			execution(t, "ses_idle", "", nil, nil),
			execution(t, "ses_resumed", "", nil, nil),
			execution(t, "ses_proxied", "", nil, nil),
			execution(t, "ses_memo", "", nil, nil),
			execution(t, "ses_tasks", "", nil, nil),
			execution(t, "ses_old", "waiting-input", refund, nil),
			execution(t, "ses_lagging", "waiting-input", refund, map[string]any{signals.MemoStatus: signals.StatusMemo{Status: "running"}}),
			execution(t, "ses_old_idle", "idle", []string{}, nil),
			closed,
		}
	}
	turns := func(t *testing.T) []*workflowpb.WorkflowExecutionInfo {
		return []*workflowpb.WorkflowExecutionInfo{
			turn(t, "ses_parked", "waiting-input", refund, inbox("ses_parked", 1, 0)),
			turn(t, "ses_resumed", "waiting-input", refund, inbox("ses_resumed", 0, 0)),
			turn(t, "ses_proxied", "waiting-input", []string{"fetch_paper"}, inbox("ses_proxied", 0, 1)),
			turn(t, "ses_memo", "waiting-input", refund, map[string]any{signals.MemoStatus: signals.StatusMemo{Status: "running"}}),
			turn(t, "ses_tasks", "waiting-tasks", []string{"crunch"}, nil),
			turn(t, "ses_old", "", nil, nil), // a worker without search attributes
		}
	}
	const runningTurns = `WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveSessionId IN ("ses_parked", "ses_idle", "ses_resumed", "ses_proxied", "ses_memo", "ses_tasks", "ses_old", "ses_lagging", "ses_old_idle")`
	const sessionsOfTurns = `WorkflowType = "eve.Session" AND ExecutionStatus = "Running" AND WorkflowId IN ("ses_parked", "ses_resumed", "ses_proxied", "ses_memo", "ses_tasks", "ses_old")`
	all := []string{"ses_parked waiting-input [refund_charge]", "ses_idle idle []", "ses_resumed running []", "ses_proxied waiting-input [fetch_paper]",
		"ses_memo running []", "ses_tasks waiting-tasks [crunch]", "ses_old waiting-input [refund_charge]", "ses_lagging running []", "ses_old_idle idle []", "ses_closed closed []"}
	for _, c := range []struct {
		name                    string
		q                       ListQuery
		wantSessions, wantTurns []string
		wantListed              []string
	}{
		{"all", ListQuery{}, []string{`WorkflowType = "eve.Session"`}, []string{runningTurns}, all},
		{"idle", ListQuery{Status: "idle"}, []string{`WorkflowType = "eve.Session" AND ExecutionStatus = "Running"`}, []string{runningTurns},
			[]string{"ses_idle idle []", "ses_old_idle idle []"}},
		{"closed", ListQuery{Status: "closed"}, []string{`WorkflowType = "eve.Session" AND ExecutionStatus != "Running"`}, nil,
			[]string{"ses_closed closed []"}},
		{"running", ListQuery{Status: "running"}, []string{sessionsOfTurns},
			[]string{`WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveStatus IN ("running", "waiting-input")`},
			[]string{"ses_resumed running []", "ses_memo running []"}},
		{"waiting-input", ListQuery{Status: "waiting-input"}, []string{sessionsOfTurns},
			[]string{`WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveStatus = "waiting-input"`},
			[]string{"ses_parked waiting-input [refund_charge]", "ses_proxied waiting-input [fetch_paper]", "ses_old waiting-input [refund_charge]"}},
		{"waiting-tasks", ListQuery{Status: "waiting-tasks", Tool: "crunch"}, []string{sessionsOfTurns},
			[]string{`WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveStatus = "waiting-tasks" AND EveTools = "crunch"`},
			[]string{"ses_tasks waiting-tasks [crunch]"}},
		{"tool", ListQuery{Tool: "refund_charge"}, []string{sessionsOfTurns},
			[]string{`WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveTools = "refund_charge"`},
			[]string{"ses_parked waiting-input [refund_charge]", "ses_old waiting-input [refund_charge]"}},
		{"idle tool", ListQuery{Status: "idle", Tool: "refund_charge"}, nil, nil, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &listFake{rows: rows(t), turns: turns(t)}
			if c.q.Status == "closed" {
				f.rows = f.rows[len(f.rows)-1:] // what Visibility answers
			}
			s := &Service{Client: f}
			listed, _, err := s.List(context.Background(), c.q)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, l := range listed {
				got = append(got, fmt.Sprintf("%s %s %v", l.SessionID, l.Status, l.Tools))
			}
			if diff := cmp.Diff(c.wantListed, got); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantSessions, f.sessionQueries); diff != "" {
				t.Errorf("session queries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantTurns, f.turnQueries); diff != "" {
				t.Errorf("turn queries (-want +got):\n%s", diff)
			}
		})
	}
}

// Without eve's attributes on the namespace the query of turns fails: the
// unfiltered listing shows each session with no status (a closed one as
// closed), and a listing by status answers ErrStatusUnavailable, idle too.
func TestListWithoutAttributes(t *testing.T) {
	closed := execution(t, "ses_closed", "", nil, nil)
	closed.Status, closed.CloseTime = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, timestamppb.New(time.Unix(2, 0))
	unknown := serviceerror.NewInvalidArgument("invalid query: unknown or unsupported search attribute EveSessionId")
	for _, c := range []struct {
		name    string
		q       ListQuery
		want    []string
		wantErr error
	}{
		{"all", ListQuery{}, []string{"ses_a  []", "ses_closed closed []"}, nil},
		{"idle", ListQuery{Status: "idle"}, nil, ErrStatusUnavailable},
		{"waiting-input", ListQuery{Status: "waiting-input"}, nil, ErrStatusUnavailable},
		{"tool", ListQuery{Tool: "refund_charge"}, nil, ErrStatusUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &listFake{rows: []*workflowpb.WorkflowExecutionInfo{execution(t, "ses_a", "", nil, nil), closed}, turnErr: unknown}
			listed, _, err := (&Service{Client: f}).List(context.Background(), c.q)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			var got []string
			for _, l := range listed {
				got = append(got, fmt.Sprintf("%s %s %v", l.SessionID, l.Status, l.Tools))
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
}
