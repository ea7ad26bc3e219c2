package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var obj = json.RawMessage(`{"type":"object"}`)

// Workflow and Nexus tools: their kind, deadline and registration rules.
func TestWorkflowAndNexusDefinitions(t *testing.T) {
	type got struct {
		Kind     Kind
		Info     KindInfo
		Deadline time.Duration
		Err      string
	}
	wfTimed := DefineWorkflow("provision", "d", obj, nil, Workflow{Type: "Provision", ExecutionTimeout: time.Minute})
	local := DefineWorkflow("provision", "d", obj, nil, Workflow{Type: "Provision"})
	local.Local, local.Timeout = true, time.Second
	for _, c := range []struct {
		name string
		tool *Tool
		want got
		errs []string
	}{
		{"workflow", wfTimed, got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: time.Minute}, nil},
		{"workflow default deadline", DefineWorkflow("provision", "d", obj, nil, Workflow{Type: "Provision"}),
			got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline}, nil},
		{"workflow without type", DefineWorkflow("provision", "d", obj, nil, Workflow{IDReuse: "sometimes", ExecutionTimeout: -1}),
			got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline},
			[]string{"Workflow.Type is required", "ExecutionTimeout must not be negative", `Workflow.IDReuse "sometimes"`}},
		{"local workflow", local, got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline},
			[]string{"cannot be Local", "has no activity"}},
		{"nexus", DefineNexus("provision", "d", obj, nil, Nexus{Endpoint: "e", Service: "s", Operation: "o", ScheduleToClose: time.Hour}),
			got{Kind: KindNexus, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: time.Hour}, nil},
		{"nexus without operation", DefineNexus("provision", "d", obj, nil, Nexus{Endpoint: "e"}),
			got{Kind: KindNexus, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline},
			[]string{"Nexus.Endpoint, Nexus.Service and Nexus.Operation are required"}},
		{"workflow as a task", AsTask(DefineWorkflow("provision", "d", obj, nil, Workflow{Type: "Provision"}), Task{}),
			got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline}, nil},
		{"resumable workflow task", AsTask(DefineWorkflow("provision", "d", obj, nil, Workflow{Type: "Provision"}), Task{Resumable: true}),
			got{Kind: KindWorkflow, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline},
			[]string{"cannot be a resumable task"}},
		{"resumable nexus task", AsTask(DefineNexus("provision", "d", obj, nil, Nexus{Endpoint: "e", Service: "s", Operation: "o"}), Task{Resumable: true}),
			got{Kind: KindNexus, Info: KindInfo{Async: true, OutsideSession: true, NeedsDeadline: true}, Deadline: DefaultDeadline},
			[]string{"cannot be a resumable task"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _ := c.tool.DeadlineOf(nil)
			g := got{Kind: c.tool.Kind(), Info: c.tool.Kind().Info(), Deadline: d}
			err := NewRegistry().Register(c.tool)
			if diff := cmp.Diff(c.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if (err != nil) != (len(c.errs) > 0) {
				t.Fatalf("register: %v", err)
			}
			for _, e := range c.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q lacks %q", err, e)
				}
			}
		})
	}
}
