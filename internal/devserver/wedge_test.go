package devserver

import (
	"strings"
	"testing"
	"time"
)

// A burst of interrupted queries is a wedge; scattered ones, or other
// lines, are not.
func TestWedgeDetector(t *testing.T) {
	now := time.Unix(0, 0)
	calls := make(chan struct{}, 10)
	d := &wedgeDetector{now: func() time.Time { return now }, wedged: func() { calls <- struct{}{} }}
	line := `time=x level=ERROR msg="Operation failed with internal error." error="GetCurrentExecution operation failed. Error: interrupted (9)"` + "\n"
	// Scattered: one a second never makes a burst.
	for i := 0; i < 3*wedgeLines; i++ {
		d.Write([]byte(line))
		now = now.Add(time.Second)
	}
	d.Write([]byte(strings.Repeat("level=ERROR msg=\"Namespace default is not found.\"\n", 3*wedgeLines)))
	select {
	case <-calls:
		t.Fatal("scattered interrupts and other errors are not a wedge")
	case <-time.After(50 * time.Millisecond):
	}
	// A burst, written in pieces that split lines.
	burst := strings.Repeat(line, wedgeLines)
	for len(burst) > 0 {
		n := min(37, len(burst))
		d.Write([]byte(burst[:n]))
		burst = burst[n:]
	}
	select {
	case <-calls:
	case <-time.After(5 * time.Second):
		t.Fatal("a burst of interrupted queries is a wedge")
	}
}

func TestIsTaskQueuePoll(t *testing.T) {
	for m, want := range map[string]bool{
		"/temporal.api.workflowservice.v1.WorkflowService/PollWorkflowTaskQueue":       true,
		"/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue":       true,
		"/temporal.api.workflowservice.v1.WorkflowService/PollWorkflowExecutionUpdate": false,
		"/temporal.api.workflowservice.v1.WorkflowService/QueryWorkflow":               false,
	} {
		if got := isTaskQueuePoll(m); got != want {
			t.Errorf("%s: %v, want %v", m, got, want)
		}
	}
}
