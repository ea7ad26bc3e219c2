package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/workflows"
)

// taskRules drive the scripted model through tasks (eve's tools/tasks.md).
func taskRules() string {
	many := make([]string, tools.MaxWorkingTasks+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{tool: hold, input: {n: %d}}`, i)
	}
	return `
name: tasktest
default: "Hello."
rules:
  - match: '^deploy and wait (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - text: "Deploying {{svc}}."
        calls: [{tool: eve__task_wait, input: {}}]
      - reply: "{{svc}}: {{task.deploy.url}}{{task.deploy.error}}"
  - match: '^deploy (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - reply: "Started deploying {{svc}}."
      - reply: "{{svc}}: {{task.deploy.url}}{{task.deploy.error}}"
  - match: '^cancel unknown'
    steps:
      - calls: [{tool: eve__task_cancel, input: {taskId: "deploy-zzzzzz"}}]
      - reply: "{{result.eve__task_cancel.code}}"
  - match: '^cancel (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - calls: [{tool: eve__task_cancel, input: {taskId: "{{taskId.deploy}}"}}]
      - reply: "{{result.eve__task_cancel}}"
  - match: '^note (?P<text>\w+)'
    steps:
      - calls: [{tool: notes, input: {text: "{{text}}"}}]
      - reply: "Started."
      - reply: "notes: {{task.notes.count}} {{task.notes.text}}"
  - match: '^more bad'
    steps:
      - calls: [{tool: notes, input: {taskId: "notes-zzzzzz", text: "x"}}]
      - reply: "{{result.notes.code}}"
  - match: '^more (?P<id>notes-\w+)'
    steps:
      - calls: [{tool: notes, input: {taskId: "{{id}}", text: "more"}}]
      - reply: "Sent."
      - reply: "notes: {{task.notes.count}} {{task.notes.text}}"
  - match: '^many'
    steps:
      - calls: [` + strings.Join(many, ", ") + `]
      - reply: "{{results.32.code}}"
`
}

// taskHarness is the harness with task tools: deploy (a delegated task
// whose job the test completes; Task.Deadline a minute with deadline set)
// and hold (a delegated task whose job never completes).
func taskHarness(t *testing.T, deadline time.Duration) *harness {
	t.Helper()
	return taskHarnessWith(t, newMemStore(), deadline)
}

// taskHarnessOn is taskHarness on a given conversation store (a later turn).
func taskHarnessOn(t *testing.T, store payloadstore.Store) *harness {
	return taskHarnessWith(t, store, 0)
}

func taskHarnessWith(t *testing.T, store payloadstore.Store, deadline time.Duration) *harness {
	t.Helper()
	var h *harness
	h = newHarnessOn(t, store, func(a *agent.Agent) {
		m, err := scripted.Parse([]byte(taskRules()))
		if err != nil {
			t.Fatal(err)
		}
		a.Model = m
		deploy := tools.AsTask(tools.DefineDelegated("deploy", "Deploy a service.",
			json.RawMessage(`{"type":"object","properties":{"service":{"type":"string"}},"required":["service"]}`),
			json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
			tools.Delegated{Deadline: time.Hour, Delegate: func(ctx *tools.Context, in json.RawMessage, a tools.Action) (tools.Pending, error) {
				h.jobs <- a
				return a.Pending(), nil
			}}), tools.Task{Deadline: deadline})
		hold := tools.AsTask(tools.DefineDelegated("hold", "Holds.",
			json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`), nil,
			tools.Delegated{Deadline: time.Hour, Delegate: func(ctx *tools.Context, in json.RawMessage, a tools.Action) (tools.Pending, error) {
				return a.Pending(), nil
			}}), tools.Task{})
		type noteState struct {
			Count int
			Texts []string
		}
		notes := tools.AsTask(tools.Func("notes", "Keep notes.", func(ctx *tools.Context, in struct {
			Text string `json:"text"`
		}) (map[string]any, error) {
			var st noteState
			ctx.TaskState(&st)
			st.Count++
			st.Texts = append(st.Texts, in.Text)
			if err := ctx.SaveTaskState(st); err != nil {
				return nil, err
			}
			return map[string]any{"count": st.Count, "text": strings.Join(st.Texts, "+"), "task": ctx.TaskID}, nil
		}), tools.Task{Resumable: true})
		a.Tools.MustRegister(deploy, hold, notes)
	})
	return h
}

// taskEvents are the task events of evs, as "type name status reason".
func taskEvents(t *testing.T, evs []protocol.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		switch e.Type {
		case protocol.TaskStarted:
			var d protocol.TaskStartedData
			decode(t, e, &d)
			out = append(out, fmt.Sprintf("started %s %s", d.Name, d.Kind))
		case protocol.TaskSettled:
			var d protocol.TaskSettledData
			decode(t, e, &d)
			s := fmt.Sprintf("settled %s %s", d.Name, d.Status)
			if d.Cancel != nil {
				s += " " + d.Cancel.Reason
			}
			if d.Error != nil {
				s += " " + strings.SplitN(d.Error.Message, " ", 2)[0]
			}
			out = append(out, s)
		case protocol.TurnWaiting:
			var d protocol.TurnWaitingData
			decode(t, e, &d)
			out = append(out, "waiting "+d.On)
		}
	}
	return out
}

// The model calls eve__task_wait after starting a task; the turn parks
// until the job completes, then the model reads the <task_result> and
// replies, all in one turn.
func TestTaskWait(t *testing.T) {
	h := taskHarness(t, 0)
	wid := turnWorkflowID(0)
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		h.completeJob(h.nextJob(), `{"url":"https://web.example"}`)
	})
	out := h.runTurn(turnInput("deploy and wait web"))

	if got := reply(t, out.Events); got != "web: https://web.example" {
		t.Fatalf("reply %q; events %s", got, join(out.Events))
	}
	if diff := cmp.Diff([]string{"started deploy tool", "waiting tasks", "settled deploy completed"}, taskEvents(t, out.Events)); diff != "" {
		t.Errorf("task events (-want +got):\n%s", diff)
	}
	res := results(t, out.Events)
	var receipt, waited string
	_ = json.Unmarshal(res[0].Result.Output, &receipt)
	_ = json.Unmarshal(res[1].Result.Output, &waited)
	var started protocol.TaskStartedData
	decode(t, of(out.Events, protocol.TaskStarted)[0], &started)
	if want := "Started task " + started.TaskID + ". Its result will arrive in a <task_result> message."; receipt != want {
		t.Errorf("receipt %q, want %q", receipt, want)
	}
	if want := started.TaskID + " completed; its result follows."; waited != want {
		t.Errorf("wait result %q, want %q", waited, want)
	}
	if !strings.HasPrefix(started.TaskID, "deploy-") || len(started.TaskID) != len("deploy-")+6 {
		t.Errorf("task id %q", started.TaskID)
	}
	var settled protocol.TaskSettledData
	decode(t, of(out.Events, protocol.TaskSettled)[0], &settled)
	want := protocol.TaskSettledData{CallID: started.CallID, Kind: "tool", Name: "deploy", TaskID: started.TaskID, TurnID: "turn_0",
		Status: protocol.TaskCompleted, Output: json.RawMessage(`{"url":"https://web.example"}`)}
	if diff := cmp.Diff(want, settled); diff != "" {
		t.Errorf("task.settled (-want +got):\n%s", diff)
	}
	if n := len(of(out.Events, protocol.TurnCompleted)); n != 1 {
		t.Errorf("%d turn.completed", n)
	}
	// What the model read: the [Tasks] note after the receipt, then the
	// task.result message and the note again, as eve writes them.
	msgs := h.storedMessages(t, out.Conversation)
	var framework []model.Message
	for _, m := range msgs {
		if m.Kind != "" {
			framework = append(framework, model.Message{Role: m.Role, Kind: m.Kind, Text: m.Text})
		}
	}
	wantMsgs := []model.Message{
		{Role: model.RoleUser, Kind: model.KindContextState, Text: "[Tasks]\n<tasks>\n<task id=\"" + started.TaskID + "\" tool=\"deploy\" status=\"working\"/>\n</tasks>"},
		{Role: model.RoleUser, Kind: model.KindTaskResult, Text: `<task_result id="` + started.TaskID + `" tool="deploy" status="completed">{"url":"https://web.example"}</task_result>`},
		{Role: model.RoleUser, Kind: model.KindContextState, Text: "[Tasks]\n<tasks>\n</tasks>"},
	}
	if diff := cmp.Diff(wantMsgs, framework); diff != "" {
		t.Errorf("the runtime's messages (-want +got):\n%s", diff)
	}
}

// storedMessages reads the conversation a turn stored.
func (h *harness) storedMessages(t *testing.T, ref *conversation.Ref) []model.Message {
	t.Helper()
	msgs, err := conversation.New(h.store).Load(context.Background(), *ref)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// The turn rule: the model replies while the task works; the turn parks
// (turn.waiting on tasks, no turn.completed) and calls the model again in
// the same turn once the result arrives.
func TestTaskHoldsTurn(t *testing.T) {
	h := taskHarness(t, 0)
	wid := turnWorkflowID(0)
	var mid []protocol.Event
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		mid = h.turnEvents(wid)
		h.completeJob(h.nextJob(), `{"url":"https://api.example"}`)
	})
	out := h.runTurn(turnInput("deploy api"))

	if n := len(of(mid, protocol.TurnCompleted)); n != 0 {
		t.Fatalf("the turn completed while its task worked: %s", join(mid))
	}
	if got := of(mid, protocol.MessageCompleted); len(got) != 1 {
		t.Fatalf("before the wait: %s", join(mid))
	}
	if got := reply(t, out.Events); got != "api: https://api.example" {
		t.Fatalf("reply %q; events %s", got, join(out.Events))
	}
	if out.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("outcome %+v", out.Outcome)
	}
	if diff := cmp.Diff([]string{"started deploy tool", "waiting tasks", "settled deploy completed"}, taskEvents(t, out.Events)); diff != "" {
		t.Errorf("task events (-want +got):\n%s", diff)
	}
}

// A steering message from the turn's caller ends eve__task_wait (never the
// task); the task's result still reaches the model in the same turn.
func TestTaskWaitSteered(t *testing.T) {
	h := taskHarness(t, 0)
	wid := turnWorkflowID(0)
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		job := h.nextJob()
		h.SignalWorkflow(signals.SignalTurnMessage, signals.TurnMessage{Message: "how is it going", DeliveryID: "dlv_1", Caller: alice, TurnPolicy: signals.TurnPolicySteer})
		h.at(time.Minute, func() {
			h.parkedOn(wid, "tasks")
			h.completeJob(job, `{"url":"https://web.example"}`)
		})
	})
	out := h.runTurn(turnInput("deploy and wait web"))

	res := results(t, out.Events)
	var waited string
	_ = json.Unmarshal(res[1].Result.Output, &waited)
	if want := "A new message arrived, so the wait ended after 1m; 1 task is still working. Read the message, answer it if it asks you something, and decide whether it changes this work: keep the task, call an agent again with its taskId to correct it, or stop a task with eve__task_cancel."; waited != want {
		t.Errorf("wait result\n%q, want\n%q", waited, want)
	}
	if diff := cmp.Diff([]string{"started deploy tool", "waiting tasks", "waiting tasks", "settled deploy completed"}, taskEvents(t, out.Events)); diff != "" {
		t.Errorf("task events (-want +got):\n%s", diff)
	}
	if n := len(of(out.Events, protocol.TurnCompleted)); n != 1 || out.Outcome.Status != signals.TurnStatusCompleted {
		t.Errorf("outcome %+v; events %s", out.Outcome, join(out.Events))
	}
}

// eve__task_cancel stops a working task: task.settled cancelled with
// reason task_cancel, eve's answer text, and no result ever reaches the
// model; a taskId that names no task is UNKNOWN_TASK.
func TestTaskCancel(t *testing.T) {
	t.Run("working", func(t *testing.T) {
		h := taskHarness(t, 0)
		out := h.runTurn(turnInput("cancel web"))
		var started protocol.TaskStartedData
		decode(t, of(out.Events, protocol.TaskStarted)[0], &started)
		if got, want := reply(t, out.Events), "Stopped "+started.TaskID+"; it won't report back."; got != want {
			t.Fatalf("reply %q, want %q; events %s", got, want, join(out.Events))
		}
		if diff := cmp.Diff([]string{"started deploy tool", "settled deploy cancelled task_cancel"}, taskEvents(t, out.Events)); diff != "" {
			t.Errorf("task events (-want +got):\n%s", diff)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		h := taskHarness(t, 0)
		out := h.runTurn(turnInput("cancel unknown"))
		if got := reply(t, out.Events); got != protocol.CodeUnknownTask {
			t.Fatalf("reply %q; events %s", got, join(out.Events))
		}
		res := results(t, out.Events)
		var refusal map[string]string
		_ = json.Unmarshal(res[0].Result.Output, &refusal)
		want := map[string]string{"code": "UNKNOWN_TASK", "message": `No task "deploy-zzzzzz" is in this session. Copy an id from a "Started task" receipt or the [Tasks] note.`}
		if diff := cmp.Diff(want, refusal); diff != "" || res[0].Status != protocol.StatusFailed {
			t.Errorf("refusal (-want +got):\n%s", diff)
		}
	})
}

// A task past its deadline settles failed with TASK_DEADLINE_EXCEEDED,
// which the model reads in its <task_result>.
func TestTaskDeadline(t *testing.T) {
	h := taskHarness(t, 5*time.Minute)
	out := h.runTurn(turnInput("deploy web"))
	got := reply(t, out.Events)
	if !strings.HasPrefix(got, "web: task deploy-") || !strings.Contains(got, "passed its deadline (5m0s)") {
		t.Fatalf("reply %q; events %s", got, join(out.Events))
	}
	if diff := cmp.Diff([]string{"started deploy tool", "waiting tasks", "settled deploy failed task"}, taskEvents(t, out.Events)); diff != "" {
		t.Errorf("task events (-want +got):\n%s", diff)
	}
}

// 32 tasks work; the 33rd call is TOO_MANY_TASKS. Cancelling the turn
// cancels every working task (turn_cancelled), once each.
func TestTaskLimitAndTurnCancel(t *testing.T) {
	h := taskHarness(t, 0)
	wid := turnWorkflowID(0)
	var tasks []protocol.TaskInfo
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		v, err := h.QueryWorkflowByID(wid, signals.QueryTurnTasks)
		if err != nil {
			t.Error(err)
		} else if err := v.Get(&tasks); err != nil {
			t.Error(err)
		}
		h.CancelWorkflow()
	})
	out := h.runTurn(turnInput("many"))

	if len(tasks) != tools.MaxWorkingTasks {
		t.Fatalf("%d tasks listed", len(tasks))
	}
	res := results(t, out.Events)
	if len(res) != tools.MaxWorkingTasks+1 || res[32].Error == nil || res[32].Error.Code != protocol.CodeTooManyTasks {
		t.Fatalf("results %+v", res)
	}
	if got := reply(t, out.Events); got != protocol.CodeTooManyTasks {
		t.Errorf("reply %q", got)
	}
	settled := of(out.Events, protocol.TaskSettled)
	if len(settled) != tools.MaxWorkingTasks {
		t.Fatalf("%d task.settled", len(settled))
	}
	for _, e := range settled {
		var d protocol.TaskSettledData
		decode(t, e, &d)
		if d.Status != protocol.TaskCancelled || d.Cancel == nil || d.Cancel.Reason != protocol.TaskCancelTurnCancelled {
			t.Fatalf("task.settled %+v", d)
		}
	}
	if out.Outcome.Status != signals.TurnStatusCancelled {
		t.Errorf("outcome %+v", out.Outcome)
	}
}

// A resumable task: its receipt says how to reach it again; the session
// keeps it idle between turns (turnOutput.Tasks), and a later turn's call
// by taskId runs it again with the state its last call saved. A taskId
// that names no task of the tool is UNKNOWN_TASK.
func TestTaskResumable(t *testing.T) {
	h := taskHarness(t, 0)
	out0 := h.runTurn(turnInput("note alpha"))
	var started protocol.TaskStartedData
	decode(t, of(out0.Events, protocol.TaskStarted)[0], &started)
	id := started.TaskID
	res := results(t, out0.Events)
	var receipt string
	_ = json.Unmarshal(res[0].Result.Output, &receipt)
	if want := "Started task " + id + ". Its result will arrive in a <task_result> message. To send it another message, call notes again with taskId " + id + "."; receipt != want {
		t.Errorf("receipt %q, want %q", receipt, want)
	}
	if got := reply(t, out0.Events); got != "notes: 1 alpha" {
		t.Fatalf("turn 0 reply %q: %s", got, join(out0.Events))
	}
	if len(out0.Tasks) != 1 || out0.Tasks[0].TaskID != id || !strings.Contains(out0.TasksNote, `<idle>`) {
		t.Fatalf("held tasks %+v, note %q", out0.Tasks, out0.TasksNote)
	}

	next := func(msg string) workflows.TurnOutput {
		h2 := taskHarnessOn(t, h.store)
		in := turnInput(msg)
		in.Sequence, in.TurnID, in.Conversation = 1, "turn_1", out0.Conversation
		in.Tasks, in.TasksNote = out0.Tasks, out0.TasksNote
		return h2.runTurn(in)
	}
	out1 := next("more " + id)
	if got := reply(t, out1.Events); got != "notes: 2 alpha+more" {
		t.Fatalf("turn 1 reply %q: %s", got, join(out1.Events))
	}
	res = results(t, out1.Events)
	_ = json.Unmarshal(res[0].Result.Output, &receipt)
	if want := "Sent to task " + id + ". Its reply will arrive in a <task_result> message."; receipt != want {
		t.Errorf("receipt %q, want %q", receipt, want)
	}
	var again protocol.TaskStartedData
	decode(t, of(out1.Events, protocol.TaskStarted)[0], &again)
	if again.TaskID != id || again.TurnID != "turn_1" || again.CallID == started.CallID {
		t.Errorf("task.started %+v", again)
	}

	bad := next("more bad")
	if got := reply(t, bad.Events); got != protocol.CodeUnknownTask {
		t.Fatalf("reply %q: %s", got, join(bad.Events))
	}
	var refusal map[string]string
	_ = json.Unmarshal(results(t, bad.Events)[0].Result.Output, &refusal)
	if want := `No task "notes-zzzzzz" is available to notes: it may have ended or belong to another tool. Start a new one by calling notes without taskId.`; refusal["message"] != want {
		t.Errorf("refusal %q", refusal["message"])
	}
	if len(bad.Tasks) != 1 || bad.Tasks[0].TaskID != id {
		t.Errorf("held tasks after a bad call %+v", bad.Tasks)
	}
}

// The turn's eve.task.cancel Update (POST …/tasks/{taskId}/cancel): its
// validator refuses a task the turn does not have, recording nothing;
// a working task's call settles cancelled (task_cancel) and the model,
// held for it, reads that it was stopped from outside.
func TestTaskCancelUpdate(t *testing.T) {
	h := taskHarness(t, 0)
	wid := turnWorkflowID(0)
	var unknown, known *update[signals.TaskCancelResult]
	var taskID string
	var before int
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		evs := h.turnEvents(wid)
		before = len(evs)
		var d protocol.TaskStartedData
		decode(t, of(evs, protocol.TaskStarted)[0], &d)
		taskID = d.TaskID
		unknown = sendUpdate[signals.TaskCancelResult](h, wid, signals.UpdateTaskCancel, signals.TaskCancelRequest{TaskID: "deploy-zzzzzz", Caller: alice})
	})
	h.at(2*time.Minute, func() {
		if n := len(h.turnEvents(wid)); n != before {
			t.Errorf("a refused cancel recorded %d events", n-before)
		}
		known = sendUpdate[signals.TaskCancelResult](h, wid, signals.UpdateTaskCancel, signals.TaskCancelRequest{TaskID: taskID, Caller: alice})
	})
	out := h.runTurn(turnInput("deploy api"))

	if unknown == nil || !unknown.rejected {
		t.Fatalf("cancel of an unknown task: %+v", unknown)
	}
	if known == nil || !known.completed || known.err != nil || known.result.TaskID != taskID || known.result.TurnID != "turn_0" {
		t.Fatalf("cancel: %+v", known)
	}
	if diff := cmp.Diff([]string{"started deploy tool", "waiting tasks", "settled deploy cancelled task_cancel"}, taskEvents(t, out.Events)); diff != "" {
		t.Errorf("task events (-want +got):\n%s", diff)
	}
	want := "api: " + taskID + " was stopped from outside this conversation (a cancel through eve's API); its work has no result."
	if got := reply(t, out.Events); got != want {
		t.Errorf("reply %q, want %q", got, want)
	}
	if out.Outcome.Status != signals.TurnStatusCompleted {
		t.Errorf("outcome %+v", out.Outcome)
	}
}
