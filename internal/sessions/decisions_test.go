package sessions

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// listRecorder answers ListWorkflow, refusing STARTS_WITH when old is set
// (a Visibility store before it), and records the queries it was asked.
type listRecorder struct {
	client.Client
	old     bool
	queries []string
}

func (l *listRecorder) ListWorkflow(_ context.Context, r *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	l.queries = append(l.queries, r.GetQuery())
	if l.old && strings.Contains(r.GetQuery(), "STARTS_WITH") {
		return nil, serviceerror.NewInvalidArgument("operator 'starts_with' not allowed")
	}
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

// The export across sessions reads the subagents' queues (q/…) too; a
// store that refuses STARTS_WITH gets the agent's own queue.
func TestDecisionSessionsQueues(t *testing.T) {
	since := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		old  bool
		want []string
	}{
		{"subagents' queues", false, []string{`(TaskQueue = "support" OR TaskQueue STARTS_WITH "support/")`}},
		{"a store without STARTS_WITH", true, []string{`STARTS_WITH "support/"`, `AND TaskQueue = "support" AND`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &listRecorder{old: tc.old}
			s := &Service{Client: l, TaskQueue: "support"}
			if _, _, err := s.DecisionSessions(context.Background(), since, time.Time{}, nil); err != nil {
				t.Fatal(err)
			}
			if len(l.queries) != len(tc.want) {
				t.Fatalf("queries %q, want %d", l.queries, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(l.queries[i], w) {
					t.Errorf("query %d %q lacks %q", i, l.queries[i], w)
				}
			}
		})
	}
}
