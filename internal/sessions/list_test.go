package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/signals"
)

// listFake answers ListWorkflow with fixed executions (sessions, or turns
// for a query of turns) and keeps the queries.
type listFake struct {
	client.Client
	rows, turns []*workflowpb.WorkflowExecutionInfo
	query       string // the first
	turnQueries []string
}

func (f *listFake) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if strings.HasPrefix(req.GetQuery(), `WorkflowType = "`+signals.TurnWorkflow+`"`) {
		f.turnQueries = append(f.turnQueries, req.GetQuery())
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.turns}, nil
	}
	f.query = req.GetQuery()
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.rows}, nil
}

// turnRow is a running turn of session with an inbox memo of open items.
func turnRow(t *testing.T, session string, open, relayed int) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	m := signals.InboxMemo{SessionID: session, TurnID: "turn_0", Items: []signals.InboxEntry{}, Relayed: relayed}
	for i := 0; i < open; i++ {
		m.Items = append(m.Items, signals.InboxEntry{})
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(m)
	if err != nil {
		t.Fatal(err)
	}
	return &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: session + "/turn_0", RunId: "r"},
		Memo:      &commonpb.Memo{Fields: map[string]*commonpb.Payload{signals.MemoInbox: p}},
	}
}

// listRow is a running session with attributes status and tools and, when
// memo is set, a status memo.
func listRow(t *testing.T, id, status string, tools []string, memo *signals.StatusMemo) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	p := func(v any) *commonpb.Payload {
		out, err := dc.ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	e := &workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r"},
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"EveStatus": p(status), "EveTools": p(tools)}},
		Memo:             &commonpb.Memo{Fields: map[string]*commonpb.Payload{}},
	}
	if memo != nil {
		e.Memo.Fields[signals.MemoStatus] = p(memo)
	}
	return e
}

// A session whose attributes lag (an answered park: EveStatus still
// waiting-input, its memo running) lists with the memo's status and only
// under the filters that status matches; one without the memo (recorded
// before changeParkWrites) lists as its attributes say. One whose turn
// resumed quietly (eve-quiet-resume: no memo, its running turn's inbox memo
// empty) lists as running, unless its turn waits on a request its
// subagent proxied (the memo's Relayed); the turns are read in one query.
func TestListReadsTheStatusMemo(t *testing.T) {
	rows := func(t *testing.T) []*workflowpb.WorkflowExecutionInfo {
		return []*workflowpb.WorkflowExecutionInfo{
			listRow(t, "ses_lagging", "waiting-input", []string{"refund_charge"}, &signals.StatusMemo{Status: "running"}),
			listRow(t, "ses_parked", "waiting-input", []string{"refund_charge"}, &signals.StatusMemo{Status: "waiting-input", Tools: []string{"refund_charge"}}),
			listRow(t, "ses_old", "waiting-input", []string{"refund_charge"}, nil),
			listRow(t, "ses_idle", "idle", []string{}, &signals.StatusMemo{Status: "idle"}),
			listRow(t, "ses_quiet", "waiting-input", []string{"refund_charge"}, nil),
			listRow(t, "ses_proxied", "waiting-input", []string{"fetch_paper"}, nil),
		}
	}
	turns := func(t *testing.T) []*workflowpb.WorkflowExecutionInfo {
		return []*workflowpb.WorkflowExecutionInfo{turnRow(t, "ses_parked", 1, 0), turnRow(t, "ses_quiet", 0, 0), turnRow(t, "ses_proxied", 0, 1)}
	}
	const turnQuery = `WorkflowType = "eve.Turn" AND ExecutionStatus = "Running" AND EveSessionId IN ("ses_parked", "ses_old", "ses_quiet", "ses_proxied")`
	for _, c := range []struct {
		name       string
		q          ListQuery
		wantQuery  string
		wantListed []string
	}{
		{"all", ListQuery{}, `WorkflowType = "eve.Session"`,
			[]string{"ses_lagging running []", "ses_parked waiting-input [refund_charge]", "ses_old waiting-input [refund_charge]", "ses_idle idle []", "ses_quiet running []", "ses_proxied waiting-input [fetch_paper]"}},
		{"running", ListQuery{Status: "running"}, `WorkflowType = "eve.Session" AND ExecutionStatus = "Running" AND EveStatus IN ("running", "waiting-input")`,
			[]string{"ses_lagging running []", "ses_quiet running []"}},
		{"waiting-input", ListQuery{Status: "waiting-input"}, `WorkflowType = "eve.Session" AND ExecutionStatus = "Running" AND EveStatus = "waiting-input"`,
			[]string{"ses_parked waiting-input [refund_charge]", "ses_old waiting-input [refund_charge]", "ses_proxied waiting-input [fetch_paper]"}},
		{"tool", ListQuery{Tool: "refund_charge"}, `WorkflowType = "eve.Session" AND EveTools = "refund_charge"`,
			[]string{"ses_parked waiting-input [refund_charge]", "ses_old waiting-input [refund_charge]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &listFake{rows: rows(t), turns: turns(t)}
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
			if diff := cmp.Diff(c.wantQuery, f.query); diff != "" {
				t.Errorf("query (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{turnQuery}, f.turnQueries); diff != "" {
				t.Errorf("turn queries (-want +got):\n%s", diff)
			}
		})
	}
}
