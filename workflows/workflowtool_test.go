package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// wfRules drive a turn that calls a workflow tool.
const wfRules = `
name: wftest
rules:
  - match: '^provision (?P<name>\w+)'
    steps:
      - calls: [{tool: provision, input: {name: "{{name}}"}}]
      - reply: "provisioned {{result.provision.id}}{{result.provision.code}}"
`

// provisionDeadline is the provision tool's execution timeout.
const provisionDeadline = time.Hour

// wfChild is the app's workflow behind the provision tool, as a test
// drives it: what it saw, and how it behaves.
type wfChild struct {
	mu        sync.Mutex
	starts    []string // the workflow ids it ran under
	inputs    []string
	cancelled bool
	// wait is how long it works before it answers; result what it answers.
	wait   time.Duration
	result map[string]any
	fail   string
}

func (w *wfChild) run(ctx workflow.Context, in struct{ Name string }) (map[string]any, error) {
	w.mu.Lock()
	w.starts = append(w.starts, workflow.GetInfo(ctx).WorkflowExecution.ID)
	w.inputs = append(w.inputs, in.Name)
	w.mu.Unlock()
	if err := workflow.Sleep(ctx, w.wait); err != nil {
		w.mu.Lock()
		w.cancelled = true
		w.mu.Unlock()
		return nil, err
	}
	if w.fail != "" {
		return nil, errors.New(w.fail)
	}
	return w.result, nil
}

// newWorkflowHarness is the harness with the provision workflow tool
// (policy pol) backed by child, and the rules above.
func newWorkflowHarness(t *testing.T, child *wfChild, pol approval.Policy) *harness {
	t.Helper()
	h := newHarness(t, func(a *agent.Agent) {
		m, err := scripted.Parse([]byte(wfRules))
		if err != nil {
			t.Fatal(err)
		}
		a.Model = m
		tool := tools.DefineWorkflow("provision", "Provision a resource by running the Provision workflow.",
			json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
			json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			tools.Workflow{Type: "Provision", ExecutionTimeout: provisionDeadline})
		tool.Approval = pol
		if err := a.Tools.Register(tool); err != nil {
			t.Fatal(err)
		}
	})
	h.RegisterWorkflowWithOptions(child.run, workflow.RegisterOptions{Name: "Provision"})
	// The child's failures are the test's subject, not a failed turn.
	h.SetOnChildWorkflowCompletedListener(func(*workflow.Info, converter.EncodedValue, error) {})
	return h
}

// A workflow tool's call starts its workflow once, as a child whose id
// derives from the turn and the call, and settles with its result,
// checked against the output schema. (Its deadline, the child's execution
// timeout, is Temporal's to enforce, which the test environment does not:
// e2e/workflowtool_test.go covers it.)
func TestTurnWorkflowTool(t *testing.T) {
	const childID = "s1/turn_0/tool/call_1_0"
	for _, c := range []struct {
		name   string
		child  *wfChild
		status string
		code   string
		output string
		reply  string
	}{
		{name: "completed", child: &wfChild{wait: time.Minute, result: map[string]any{"id": "res-db"}},
			status: protocol.StatusCompleted, output: `{"id":"res-db"}`, reply: "provisioned res-db"},
		{name: "invalid output", child: &wfChild{wait: time.Minute, result: map[string]any{"id": 7}},
			status: protocol.StatusFailed, code: protocol.CodeToolOutputInvalid, reply: "provisioned " + protocol.CodeToolOutputInvalid},
		{name: "failed", child: &wfChild{wait: time.Minute, fail: "no capacity"},
			status: protocol.StatusFailed, code: protocol.CodeToolExecution, reply: "provisioned " + protocol.CodeToolExecution},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newWorkflowHarness(t, c.child, approval.Never())
			out := h.runTurn(turnInput("provision db"))

			wantTypes(t, out.Events,
				protocol.TurnStarted, protocol.MessageReceived,
				protocol.StepStarted, protocol.ActionsRequested, protocol.TaskStarted, protocol.TurnWaiting,
				protocol.TaskSettled, protocol.ActionResult, protocol.StepCompleted,
				protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
				protocol.TurnCompleted)
			if diff := cmp.Diff([]string{childID}, c.child.starts); diff != "" {
				t.Errorf("child starts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"db"}, c.child.inputs); diff != "" {
				t.Errorf("child inputs (-want +got):\n%s", diff)
			}
			var started protocol.TaskStartedData
			decode(t, of(out.Events, protocol.TaskStarted)[0], &started)
			if started.TaskID != childID {
				t.Errorf("task.started %+v", started)
			}
			ar := results(t, out.Events)
			got := struct{ Status, Code, Output string }{Status: ar[0].Status}
			if ar[0].Error != nil {
				got.Code = ar[0].Error.Code
			}
			if c.output != "" {
				got.Output = string(ar[0].Result.Output)
			}
			if diff := cmp.Diff(struct{ Status, Code, Output string }{c.status, c.code, c.output}, got); diff != "" {
				t.Errorf("action.result (-want +got):\n%s", diff)
			}
			if out.Outcome.Reply != c.reply {
				t.Errorf("reply %q, want %q", out.Outcome.Reply, c.reply)
			}
		})
	}
}

// An approval gates a workflow tool: nothing starts until a person
// approves, and a denied call starts nothing.
func TestTurnWorkflowToolApproval(t *testing.T) {
	for _, c := range []struct {
		option string
		starts int
		reply  string
	}{
		{"approve", 1, "provisioned res-db"},
		{"deny", 0, "provisioned " + protocol.CodeToolDenied},
	} {
		t.Run(c.option, func(t *testing.T) {
			child := &wfChild{wait: time.Minute, result: map[string]any{"id": "res-db"}}
			h := newWorkflowHarness(t, child, approval.Always())
			wid := turnWorkflowID(0)
			var before int
			h.at(time.Minute, func() {
				reqs := h.parkedOn(wid, "input")
				before = len(child.starts)
				if len(reqs) == 1 {
					h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: c.option})
				}
			})
			out := h.runTurn(turnInput("provision db"))
			if before != 0 || len(child.starts) != c.starts {
				t.Errorf("child starts: %d before the answer, %d after; want 0, %d", before, len(child.starts), c.starts)
			}
			if out.Outcome.Reply != c.reply {
				t.Errorf("reply %q, want %q", out.Outcome.Reply, c.reply)
			}
		})
	}
}

// Cancelling the turn while its workflow tool runs cancels the child and
// settles the call as cancelled.
func TestTurnWorkflowToolCancel(t *testing.T) {
	child := &wfChild{wait: provisionDeadline / 2, result: map[string]any{"id": "res-db"}}
	h := newWorkflowHarness(t, child, approval.Never())
	wid := turnWorkflowID(0)
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		h.CancelWorkflow()
	})
	out := h.runTurn(turnInput("provision db"))
	evs := out.Events
	if evs[len(evs)-1].Type != protocol.TurnCancelled {
		t.Fatalf("events %s", join(evs))
	}
	ar := results(t, evs)
	if len(ar) != 1 || ar[0].Error == nil || ar[0].Error.Code != protocol.CodeToolCancelled {
		t.Fatalf("action.result %+v", ar)
	}
	var settled protocol.TaskSettledData
	decode(t, of(evs, protocol.TaskSettled)[0], &settled)
	if settled.Status != protocol.TaskCancelled {
		t.Errorf("task.settled %+v", settled)
	}
	child.mu.Lock()
	defer child.mu.Unlock()
	if !child.cancelled {
		t.Error("the child workflow was not cancelled")
	}
}

// The child's id is the turn's id and the call's.
func TestWorkflowToolID(t *testing.T) {
	if got := signals.WorkflowToolID("s1/turn_2", "call_1"); got != "s1/turn_2/tool/call_1" {
		t.Fatal(got)
	}
}

// A reviewer's edit reaches the workflow: the child starts with the
// edited input.
func TestTurnWorkflowToolEdited(t *testing.T) {
	child := &wfChild{wait: time.Minute, result: map[string]any{"id": "res-cache"}}
	h := newWorkflowHarness(t, child, approval.Always().Editable())
	wid := turnWorkflowID(0)
	h.at(time.Minute, func() {
		reqs := h.parkedOn(wid, "input")
		if len(reqs) == 1 {
			h.respond(wid, edit(reqs[0].RequestID, `{"name":"cache"}`))
		}
	})
	out := h.runTurn(turnInput("provision db"))
	if diff := cmp.Diff([]string{"cache"}, child.inputs); diff != "" {
		t.Errorf("child inputs (-want +got):\n%s", diff)
	}
	if out.Outcome.Reply != "provisioned res-cache" {
		t.Errorf("reply %q", out.Outcome.Reply)
	}
}

// A Nexus tool's call runs its operation through the endpoint and settles
// with its result, checked against the output schema; a failing
// operation fails the call with the handler's message.
func TestTurnNexusTool(t *testing.T) {
	for _, c := range []struct {
		name, fail, reply string
		status, code      string
	}{
		{name: "completed", reply: "provisioned nx-db", status: protocol.StatusCompleted},
		{name: "failed", fail: "no capacity", reply: "provisioned " + protocol.CodeToolExecution, status: protocol.StatusFailed, code: protocol.CodeToolExecution},
	} {
		t.Run(c.name, func(t *testing.T) {
			var inputs []string
			h := newHarness(t, func(a *agent.Agent) {
				m, err := scripted.Parse([]byte(wfRules))
				if err != nil {
					t.Fatal(err)
				}
				a.Model = m
				if err := a.Tools.Register(tools.DefineNexus("provision", "Provision through the platform team's endpoint.",
					json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
					json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
					tools.Nexus{Endpoint: "platform", Service: "provisioning", Operation: "provision", ScheduleToClose: time.Hour})); err != nil {
					t.Fatal(err)
				}
			})
			svc := nexus.NewService("provisioning")
			if err := svc.Register(nexus.NewSyncOperation("provision", func(_ context.Context, in struct{ Name string }, _ nexus.StartOperationOptions) (map[string]any, error) {
				inputs = append(inputs, in.Name)
				if c.fail != "" {
					return nil, nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "%s", c.fail)
				}
				return map[string]any{"id": "nx-" + in.Name}, nil
			})); err != nil {
				t.Fatal(err)
			}
			h.RegisterNexusService(svc)
			out := h.runTurn(turnInput("provision db"))
			if diff := cmp.Diff([]string{"db"}, inputs); diff != "" {
				t.Errorf("operation inputs (-want +got):\n%s", diff)
			}
			ar := results(t, out.Events)
			got := struct{ Status, Code string }{Status: ar[0].Status}
			if ar[0].Error != nil {
				got.Code = ar[0].Error.Code
				if !strings.Contains(ar[0].Error.Message, c.fail) {
					t.Errorf("message %q lacks %q", ar[0].Error.Message, c.fail)
				}
			}
			if diff := cmp.Diff(struct{ Status, Code string }{c.status, c.code}, got); diff != "" {
				t.Errorf("action.result (-want +got):\n%s", diff)
			}
			if out.Outcome.Reply != c.reply {
				t.Errorf("reply %q, want %q", out.Outcome.Reply, c.reply)
			}
		})
	}
}

// A workflow tool can run as a task (tools.AsTask): the call's result is
// the receipt, the child starts once under the same derived id, and its
// result reaches the model in a <task_result> of the same turn.
func TestTurnWorkflowToolAsTask(t *testing.T) {
	const rules = `
name: wftask
rules:
  - match: '^provision (?P<name>\w+)'
    steps:
      - calls: [{tool: provision, input: {name: "{{name}}"}}]
      - reply: "Provisioning {{name}}."
      - reply: "provisioned {{task.provision.id}}{{task.provision.error}}"
`
	child := &wfChild{wait: time.Minute, result: map[string]any{"id": "res-db"}}
	h := newHarness(t, func(a *agent.Agent) {
		m, err := scripted.Parse([]byte(rules))
		if err != nil {
			t.Fatal(err)
		}
		a.Model = m
		tool := tools.AsTask(tools.DefineWorkflow("provision", "Provision a resource by running the Provision workflow.",
			json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
			json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			tools.Workflow{Type: "Provision", ExecutionTimeout: provisionDeadline}), tools.Task{})
		if err := a.Tools.Register(tool); err != nil {
			t.Fatal(err)
		}
	})
	h.RegisterWorkflowWithOptions(child.run, workflow.RegisterOptions{Name: "Provision"})
	h.SetOnChildWorkflowCompletedListener(func(*workflow.Info, converter.EncodedValue, error) {})

	out := h.runTurn(turnInput("provision db"))

	if diff := cmp.Diff([]string{"s1/turn_0/tool/call_1_0"}, child.starts); diff != "" {
		t.Errorf("child starts (-want +got):\n%s", diff)
	}
	if got := out.Outcome.Reply; got != "provisioned res-db" {
		t.Fatalf("reply %q; events %s", got, join(out.Events))
	}
	var started []protocol.TaskStartedData
	for _, e := range of(out.Events, protocol.TaskStarted) {
		var d protocol.TaskStartedData
		decode(t, e, &d)
		started = append(started, d)
	}
	if len(started) != 1 || !strings.HasPrefix(started[0].TaskID, "provision-") || started[0].Kind != "tool" {
		t.Fatalf("task.started %+v", started)
	}
	var receipt string
	_ = json.Unmarshal(results(t, out.Events)[0].Result.Output, &receipt)
	if want := "Started task " + started[0].TaskID + ". Its result will arrive in a <task_result> message."; receipt != want {
		t.Errorf("receipt %q, want %q", receipt, want)
	}
	if n := len(of(out.Events, protocol.TurnCompleted)); n != 1 {
		t.Errorf("%d turn.completed", n)
	}
}
