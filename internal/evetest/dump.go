package evetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// dumpOnFailure logs the histories of the test's workflows (those on its
// task queue) when the test fails: what each workflow did, and when, is
// what a failure on a loaded CI machine needs to be explained.
func dumpOnFailure(t interface {
	Failed() bool
	Logf(string, ...any)
}, c client.Client, namespace, taskQueue string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace,
		Query:     fmt.Sprintf("TaskQueue = '%s'", taskQueue),
		PageSize:  50,
	})
	if err != nil {
		t.Logf("histories of task queue %s: %v", taskQueue, err)
		return
	}
	for _, ex := range resp.GetExecutions() {
		wid, rid := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
		var b strings.Builder
		fmt.Fprintf(&b, "history of %s (run %s, %s):", wid, rid, ex.GetStatus())
		it := c.GetWorkflowHistory(ctx, wid, rid, false, 0)
		var first time.Time
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				fmt.Fprintf(&b, "\n  error: %v", err)
				break
			}
			ts := ev.GetEventTime().AsTime()
			if first.IsZero() {
				first = ts
			}
			fmt.Fprintf(&b, "\n  %3d %s +%7.1fms %s", ev.GetEventId(), ts.Format("15:04:05.000"), float64(ts.Sub(first).Microseconds())/1000, ev.GetEventType())
		}
		t.Logf("%s", b.String())
	}
}
