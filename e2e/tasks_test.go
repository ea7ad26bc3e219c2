package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Tasks on a real dev server (docs/tasks.md): calls that return a receipt
// at once and keep working while the conversation goes on.

func taskE2ERules() string {
	many := make([]string, tools.MaxWorkingTasks+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{tool: hold, input: {n: %d}}`, i)
	}
	return `
name: tasks
default: "Hello."
rules:
  - match: '^wait (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - text: "Deploying {{svc}}."
        calls: [{tool: eve__task_wait, input: {}}]
      - reply: "{{svc}}: {{task.deploy.url}}{{task.deploy.error}}"
  - match: '^reply (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - reply: "Started deploying {{svc}}."
      - reply: "{{svc}}: {{task.deploy.url}}{{task.deploy.error}}"
  - match: '^stop (?P<svc>\w+)'
    steps:
      - calls: [{tool: deploy, input: {service: "{{svc}}"}}]
      - calls: [{tool: eve__task_cancel, input: {taskId: "{{taskId.deploy}}"}}]
      - reply: "{{result.eve__task_cancel}}"
  - match: '^pause'
    steps:
      - calls: [{tool: worker, input: {}}]
      - calls: [{tool: eve__task_cancel, input: {taskId: "{{taskId.worker}}"}}]
      - reply: "{{result.eve__task_cancel}}"
  - match: '^expire'
    steps:
      - calls: [{tool: expire, input: {}}]
      - reply: "Started."
      - reply: "{{task.expire.error}}"
  - match: '^three'
    steps:
      - calls: [{tool: hold, input: {n: 1}}, {tool: hold, input: {n: 2}}, {tool: hold, input: {n: 3}}]
      - reply: "Three started."
      - reply: "Done: {{task.hold.n}}"
  - match: '^watch'
    steps:
      - calls: [{tool: hold, input: {n: 11}}, {tool: hold, input: {n: 12}}]
      - reply: "Two started."
      - reply: "One: {{task.hold.n}}"
      - reply: "Other: {{task.hold.error}}"
  - match: '^many'
    steps:
      - calls: [` + strings.Join(many, ", ") + `]
      - reply: "{{results.32.code}}"
`
}

// taskTools are the e2e tasks: deploy works until the test releases its
// service, hold until released ("hold-N") or cancelled, expire never
// returns and has a 3 s deadline. Each heartbeats, so a cancel reaches it.
type taskTools struct {
	mu       sync.Mutex
	released map[string]bool
	runs     map[string]int
	// all: every key is released (a survivor worker's tools return at
	// once); markers: a file per started call is left there.
	all     bool
	markers string
}

func newTaskTools() *taskTools {
	return &taskTools{released: map[string]bool{}, runs: map[string]int{}}
}

func (tt *taskTools) release(key string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.released[key] = true
}

func (tt *taskTools) runCount(key string) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.runs[key]
}

// work blocks until key is released (or the call is cancelled).
func (tt *taskTools) work(ctx *tools.Context, key string) error {
	tt.mu.Lock()
	tt.runs[key]++
	tt.mu.Unlock()
	if tt.markers != "" {
		_ = os.WriteFile(filepath.Join(tt.markers, key), nil, 0o644)
	}
	for {
		tt.mu.Lock()
		done := tt.released[key] || tt.all
		tt.mu.Unlock()
		if done {
			return nil
		}
		ctx.ReportProgress(1, 0, "working on "+key)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (tt *taskTools) agent(t testing.TB) *agent.Agent {
	a, err := tt.newAgent()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (tt *taskTools) newAgent() (*agent.Agent, error) {
	deploy := tools.AsTask(tools.Func("deploy", "Deploy a service.", func(ctx *tools.Context, in struct {
		Service string `json:"service"`
	}) (map[string]string, error) {
		if err := tt.work(ctx, in.Service); err != nil {
			return nil, err
		}
		return map[string]string{"url": "https://" + in.Service + ".example"}, nil
	}), tools.Task{})
	hold := tools.AsTask(tools.Func("hold", "Hold.", func(ctx *tools.Context, in struct {
		N int `json:"n"`
	}) (map[string]int, error) {
		if err := tt.work(ctx, fmt.Sprintf("hold-%d", in.N)); err != nil {
			return nil, err
		}
		return map[string]int{"n": in.N}, nil
	}), tools.Task{})
	expire := tools.AsTask(tools.Func("expire", "Never returns.", func(ctx *tools.Context, _ struct{}) (map[string]int, error) {
		return nil, tt.work(ctx, "never")
	}), tools.Task{Deadline: 3 * time.Second})
	worker := tools.AsTask(tools.Func("worker", "Works until stopped.", func(ctx *tools.Context, _ struct{}) (map[string]int, error) {
		return nil, tt.work(ctx, "worker")
	}), tools.Task{Resumable: true})
	for _, x := range []*tools.Tool{deploy, hold, expire, worker} {
		x.HeartbeatTimeout = 2 * time.Second
		x.Timeout = 2 * time.Minute
		x.Idempotent = true // an attempt lost with its worker runs again
	}
	m, err := scripted.Parse([]byte(taskE2ERules()))
	if err != nil {
		return nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(deploy, hold, expire, worker); err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "tasks", Model: m, Tools: reg, LocalModel: true}, nil
}

// taskSummary is the session's task events and turn ends, in order.
func taskSummary(evs []protocol.Event) []string {
	var out []string
	for _, e := range evs {
		switch e.Type {
		case protocol.TaskStarted:
			var d protocol.TaskStartedData
			_ = e.Decode(&d)
			out = append(out, "started "+d.Name)
		case protocol.TaskSettled:
			var d protocol.TaskSettledData
			_ = e.Decode(&d)
			s := "settled " + d.Name + " " + d.Status
			if d.Cancel != nil {
				s += " " + d.Cancel.Reason
			}
			out = append(out, s)
		case protocol.TurnWaiting:
			var d protocol.TurnWaitingData
			_ = e.Decode(&d)
			out = append(out, "waiting "+d.On)
		case protocol.TurnCompleted, protocol.TurnCancelled, protocol.TurnFailed, protocol.SessionWaiting:
			out = append(out, e.Type)
		}
	}
	return out
}

// waitTaskEvent waits until the session has n events of type typ.
func waitTaskEvent(t *testing.T, env *evetest.Env, id, typ string, n int) []protocol.Event {
	t.Helper()
	return waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, typ)) >= n })
}

// saveTaskHistory saves the turn's history when recording
// (EVE_RECORD_HISTORIES=1, EVE_RECORD_PREFIX).
func saveTaskHistory(t *testing.T, env *evetest.Env, wid, name string) {
	t.Helper()
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" || prefix == "" {
		return
	}
	if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
		t.Fatal(err)
	}
}

// The turn rules of tasks, one session each. With EVE_RECORD_HISTORIES=1
// and EVE_RECORD_PREFIX=v0.5.0- it saves the turns' histories
// (v0.5.0-turn-task-*.json, replayed by TestReplaySavedHistories):
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestTasks
func TestTasks(t *testing.T) {
	env := evetest.New(t)
	tt := newTaskTools()
	env.StartWorker(tt.agent(t))
	start := func(t *testing.T, msg string) string {
		t.Helper()
		id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
		if err != nil {
			t.Fatal(err)
		}
		send(t, env, id, signals.SendRequest{Message: msg, Caller: alice})
		return id
	}

	t.Run("settled while waiting", func(t *testing.T) {
		id := start(t, "wait alpha")
		waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
		tt.release("alpha")
		evs := waitFor(t, env, id, idle(1))
		if got := lastReply(t, evs); got != "alpha: https://alpha.example" {
			t.Fatalf("reply %q: %s", got, evetest.Join(evs))
		}
		want := []string{"started deploy", "waiting tasks", "settled deploy completed", protocol.TurnCompleted, protocol.SessionWaiting}
		if diff := cmp.Diff(want, taskSummary(evs)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		saveTaskHistory(t, env, id+"/turn_0", "turn-task-waited")
	})

	t.Run("settled after the reply", func(t *testing.T) {
		id := start(t, "reply beta")
		evs := waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
		if n := len(evetest.Of(evs, protocol.SessionWaiting)); n != 0 {
			t.Fatalf("session.waiting before the task settled: %s", evetest.Join(evs))
		}
		tt.release("beta")
		evs = waitFor(t, env, id, idle(1))
		if got := lastReply(t, evs); got != "beta: https://beta.example" {
			t.Fatalf("reply %q: %s", got, evetest.Join(evs))
		}
		if n := len(evetest.Of(evs, protocol.MessageCompleted)); n != 2 {
			t.Errorf("%d message.completed (the reply before the wait and the one after)", n)
		}
		saveTaskHistory(t, env, id+"/turn_0", "turn-task-replied")
	})

	t.Run("steered during a wait", func(t *testing.T) {
		id := start(t, "wait gamma")
		waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
		if res := send(t, env, id, signals.SendRequest{Message: "how is it going", Caller: alice}); res.TurnID != "turn_0" {
			t.Fatalf("the steering message went to %s", res.TurnID)
		}
		waitTaskEvent(t, env, id, protocol.TurnWaiting, 2)
		tt.release("gamma")
		evs := waitFor(t, env, id, idle(1))
		want := []string{"started deploy", "waiting tasks", "waiting tasks", "settled deploy completed", protocol.TurnCompleted, protocol.SessionWaiting}
		if diff := cmp.Diff(want, taskSummary(evs)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if tt.runCount("gamma") != 1 {
			t.Errorf("the deploy ran %d times", tt.runCount("gamma"))
		}
		saveTaskHistory(t, env, id+"/turn_0", "turn-task-steered")
	})

	t.Run("eve__task_cancel", func(t *testing.T) {
		id := start(t, "stop delta")
		evs := waitFor(t, env, id, idle(1))
		var started protocol.TaskStartedData
		_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&started)
		if got, want := lastReply(t, evs), "Stopped "+started.TaskID+"; it won't report back."; got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
		want := []string{"started deploy", "settled deploy cancelled task_cancel", protocol.TurnCompleted, protocol.SessionWaiting}
		if diff := cmp.Diff(want, taskSummary(evs)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		saveTaskHistory(t, env, id+"/turn_0", "turn-task-cancel")
	})

	t.Run("eve__task_cancel of a resumable task", func(t *testing.T) {
		id := start(t, "pause")
		evs := waitFor(t, env, id, idle(1))
		var started protocol.TaskStartedData
		_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&started)
		want := "Stopped " + started.TaskID + "'s current work; it won't report back. To give it new work, call worker again with taskId " + started.TaskID + "."
		if got := lastReply(t, evs); got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
		// The idle task holds no turn: the turn ends.
		if diff := cmp.Diff([]string{"started worker", "settled worker cancelled task_cancel", protocol.TurnCompleted, protocol.SessionWaiting}, taskSummary(evs)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("cancel the session's turn", func(t *testing.T) {
		id := start(t, "three")
		waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
		if res, err := env.Sessions.Control(env.Ctx(30*time.Second), id, signals.ControlRequest{Op: signals.ControlCancel}); err != nil || res.Status != signals.ControlAccepted {
			t.Fatalf("cancel: %+v %v", res, err)
		}
		evs := waitFor(t, env, id, idle(1))
		want := []string{"started hold", "started hold", "started hold", "waiting tasks",
			"settled hold cancelled turn_cancelled", "settled hold cancelled turn_cancelled", "settled hold cancelled turn_cancelled",
			protocol.TurnCancelled, protocol.SessionWaiting}
		if diff := cmp.Diff(want, taskSummary(evs)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		saveTaskHistory(t, env, id+"/turn_0", "turn-task-session-cancel")
	})

	t.Run("32 working, then TOO_MANY_TASKS", func(t *testing.T) {
		id := start(t, "many")
		evs := waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
		if got := lastReply(t, evs); got != protocol.CodeTooManyTasks {
			t.Fatalf("reply %q: %s", got, evetest.Join(evs))
		}
		if n := len(evetest.Of(evs, protocol.TaskStarted)); n != tools.MaxWorkingTasks {
			t.Fatalf("%d task.started", n)
		}
		if _, err := env.Sessions.Control(env.Ctx(30*time.Second), id, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
			t.Fatal(err)
		}
		evs = waitFor(t, env, id, idle(1))
		if n := len(evetest.Of(evs, protocol.TaskSettled)); n != tools.MaxWorkingTasks {
			t.Fatalf("%d task.settled", n)
		}
	})
}

// A task whose deadline passes while its worker is stopped settles failed
// (TASK_DEADLINE_EXCEEDED) once a worker runs again, and the turn goes on.
func TestTaskDeadlineWhileWorkerStopped(t *testing.T) {
	env := evetest.New(t)
	tt := newTaskTools()
	stop := env.StartWorker(tt.agent(t))
	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "expire", Caller: alice})
	waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
	stop()
	time.Sleep(4 * time.Second) // past the task's 3 s deadline, with no worker
	env.StartWorker(newTaskTools().agent(t))
	evs := waitFor(t, env, id, idle(1))
	if got := lastReply(t, evs); !strings.HasPrefix(got, "task expire-") || !strings.Contains(got, "passed its deadline (3s)") {
		t.Fatalf("reply %q: %s", got, evetest.Join(evs))
	}
	var settled protocol.TaskSettledData
	_ = evetest.Of(evs, protocol.TaskSettled)[0].Decode(&settled)
	if settled.Status != protocol.TaskFailed || settled.Error == nil || len(evetest.Of(evs, protocol.TaskSettled)) != 1 || len(evetest.Of(evs, protocol.TurnCompleted)) != 1 {
		t.Fatalf("settled %+v: %s", settled, evetest.Join(evs))
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-task-expired")
}

// The demo's deploy: "deploy web" starts the task, the model says so and
// waits, then replies with the result, all in one turn.
func TestDemoDeploy(t *testing.T) {
	env := demoEnv(t)
	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "deploy web", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	var texts []string
	for _, e := range evetest.Of(evs, protocol.MessageCompleted) {
		var d protocol.MessageCompletedData
		_ = e.Decode(&d)
		texts = append(texts, d.Message)
	}
	want := []string{"Started deploying web; I'll tell you when it is live.", "web is live at https://web.demo.eve.dev"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != 1 {
		t.Errorf("%d turn.completed", n)
	}
	var settled protocol.TaskSettledData
	_ = evetest.Of(evs, protocol.TaskSettled)[0].Decode(&settled)
	if settled.Status != protocol.TaskCompleted || !json.Valid(settled.Output) {
		t.Errorf("task.settled %+v", settled)
	}
}

// doomedTaskAgent is the task agent of a worker the test SIGKILLs: its
// tasks never return, and each leaves a marker when it starts.
func doomedTaskAgent(markers string) *agent.Agent {
	tt := newTaskTools()
	tt.markers = markers
	a, err := tt.newAgent()
	if err != nil {
		panic(err)
	}
	return a
}

// A worker SIGKILLed while three tasks work, and the API server stopped
// meanwhile: a new worker runs each task's lost attempt again (their tools
// are Idempotent), all three settle once, the model is called once per
// batch of results, and the turn ends once; a new API server serves the
// stream the old one served, with the same ids, and the rest.
func TestTasksWorkerKilled(t *testing.T) {
	env := evetest.New(t)
	markers := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
		"EVE_E2E_WORKER_MARKERS="+markers, "EVE_E2E_WORKER_AGENT=tasks", env.Server.PayloadStoreEnv())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", nil) // the open API's anonymous person
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "three"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, k := range []string{"hold-1", "hold-2", "hold-3"} {
			if _, err := os.Stat(filepath.Join(markers, k)); err == nil {
				n++
			}
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the three tasks never started in the doomed worker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)
	first := newAPIEnv(t, env, nil)
	before := first.snapshot(t, id)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	first.HTTP.Close() // the API server goes away while no worker runs

	survivor := newTaskTools()
	survivor.all = true
	env.StartWorker(survivor.agent(t))
	evs := waitFor(t, env, id, idle(1))
	settled := map[string]int{}
	for _, e := range evetest.Of(evs, protocol.TaskSettled) {
		var d protocol.TaskSettledData
		_ = e.Decode(&d)
		if d.Status != protocol.TaskCompleted {
			t.Errorf("task.settled %+v", d)
		}
		settled[d.TaskID+"/"+d.CallID]++
	}
	if len(settled) != 3 {
		t.Fatalf("settled %v: %s", settled, evetest.Join(evs))
	}
	for k, n := range settled {
		if n != 1 {
			t.Errorf("%s settled %d times", k, n)
		}
	}
	for _, k := range []string{"hold-1", "hold-2", "hold-3"} {
		if n := survivor.runCount(k); n != 1 {
			t.Errorf("%s ran %d times on the survivor", k, n)
		}
	}
	// The model: one step of calls, the reply before the wait, then one
	// step per batch of results (at most three).
	if n := len(evetest.Of(evs, protocol.StepStarted)); n < 3 || n > 5 {
		t.Errorf("%d model steps: %s", n, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != 1 {
		t.Errorf("%d turn.completed", n)
	}
	if got := lastReply(t, evs); !strings.HasPrefix(got, "Done: ") {
		t.Errorf("reply %q", got)
	}
	after := newAPIEnv(t, env, nil).snapshot(t, id)
	if len(after) != len(evs) || !slices.Equal(ids(after[:len(before)]), ids(before)) || !slices.Equal(ids(after), ids(evs)) {
		t.Errorf("the new API server's stream differs:\n before %s\n after %s", evetest.Join(before), evetest.Join(after))
	}
}

// The demo's resumable research task, continued in a later turn by its
// taskId: the session keeps the idle task between turns, and the second
// call starts from the state the first saved. Recording saves the session
// and the later turn (v0.5.0-session-task-resumed, v0.5.0-turn-task-resumed).
func TestDemoResearchResumed(t *testing.T) {
	env := demoEnv(t)
	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "research tidal power", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	var started protocol.TaskStartedData
	_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&started)
	if got, want := lastReply(t, evs), "round 1 on tidal power: 3 sources agree. For more, say: more "+started.TaskID; got != want {
		t.Fatalf("reply %q, want %q: %s", got, want, evetest.Join(evs))
	}
	send(t, env, id, signals.SendRequest{Message: "more " + started.TaskID, Caller: alice})
	evs = waitFor(t, env, id, idle(2))
	if got := lastReply(t, evs); got != "round 2 on tidal power: 5 sources agree" {
		t.Fatalf("reply %q: %s", got, evetest.Join(evs))
	}
	all := evetest.Of(evs, protocol.TaskStarted)
	var again protocol.TaskStartedData
	_ = all[len(all)-1].Decode(&again)
	if again.TaskID != started.TaskID || again.TurnID != "turn_1" {
		t.Errorf("the later call's task.started %+v", again)
	}
	var res []protocol.ActionResultData
	for _, e := range evetest.Of(evs, protocol.ActionResult) {
		var d protocol.ActionResultData
		_ = e.Decode(&d)
		res = append(res, d)
	}
	var receipt string
	_ = json.Unmarshal(res[2].Result.Output, &receipt)
	if want := "Sent to task " + started.TaskID + ". Its reply will arrive in a <task_result> message."; receipt != want {
		t.Errorf("receipt %q", receipt)
	}
	saveTaskHistory(t, env, id, "session-task-resumed")
	saveTaskHistory(t, env, id+"/turn_1", "turn-task-resumed")
}

// A task's work asks its person (tools.Context.Ask): input.requested
// carries the task's id, the turn waits on input, and the answer reaches
// the task, whose result the model reads in the same turn.
func TestTaskAsks(t *testing.T) {
	env := evetest.New(t)
	greet := tools.AsTask(tools.Func("greet", "Greet the user by name, asking for it.",
		func(ctx *tools.Context, _ struct{}) (map[string]any, error) {
			ans, err := ctx.Ask(tools.InputRequest{Prompt: "What is your name?", AllowFreeform: true})
			if err != nil {
				return nil, err
			}
			return map[string]any{"outcome": ans.Outcome, "greeting": "Hello, " + ans.Text}, nil
		}), tools.Task{})
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: greet
    steps:
      - calls: [{tool: greet}]
      - reply: "Asking."
      - reply: "{{task.greet.outcome}}: {{task.greet.greeting}}"
`, greet))
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	q := waitAsked(t, env, sid)
	evs := env.Events(ctx, sid)
	var asked protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&asked)
	var started protocol.TaskStartedData
	_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&started)
	if asked.TaskID == "" || asked.TaskID != started.TaskID {
		t.Fatalf("input.requested taskId %q, task %q", asked.TaskID, started.TaskID)
	}
	if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, Text: "Ada"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	evs = env.WaitIdle(sid)
	if r := env.Reply(sid); r != "answered: Hello, Ada" {
		t.Fatalf("reply %q, events %s", r, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != 1 {
		t.Fatalf("%d turn.completed: %s", n, evetest.Join(evs))
	}
}
