package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

// A deploy under Worker Versioning: a turn parked on build a stays pinned
// to a after build b becomes current and finishes there when approved,
// while new turns start on b and the sessions move to b.
func TestVersionedDeployFinishesParkedTurnOnItsBuild(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(2 * time.Minute)
	startBuild := func(build string, current bool) *workerhost.Worker {
		t.Helper()
		a, err := demo.Agent()
		if err != nil {
			t.Fatal(err)
		}
		return startVersioned(t, env, a, build, current)
	}
	a := startBuild("a", true)
	if d := a.Deployment(); d.Name != env.TaskQueue {
		t.Fatalf("deployment name %q, want the task queue %q", d.Name, env.TaskQueue)
	}

	park := func(msg string) (string, string) {
		t.Helper()
		res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: msg, Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
			t.Fatalf("%q: outcome %+v, want waiting", msg, res.Outcome)
		}
		return res.SessionID, signals.TurnWorkflowID(res.SessionID, res.TurnID)
	}
	s1, turn1 := park("refund ch_1 for 25")
	wantVersion(t, env, turn1, "a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	wantVersion(t, env, s1, "a", enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE)

	startBuild("b", false)
	if err := workerhost.MakeCurrent(ctx, env.Client, workerhost.Deployment{Name: env.TaskQueue, BuildID: "b"}, nil); err != nil {
		t.Fatal(err)
	}
	s2, turn2 := park("refund ch_2 for 30")
	wantVersion(t, env, turn2, "b", enumspb.VERSIONING_BEHAVIOR_PINNED)

	// The parked turn on a finishes on a, every task of it; its session has
	// moved to b by the time it hears the result.
	if out := approveAll(t, env, s1); out.Reply != "Refund of ch_1: 25" {
		t.Fatalf("turn on a: %+v", out)
	}
	wantVersion(t, env, turn1, "a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	wantTasksOn(t, env, turn1, "a")
	env.WaitIdle(s1)
	wantVersion(t, env, s1, "b", enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE)
	if out := approveAll(t, env, s2); out.Reply != "Refund of ch_2: 30" {
		t.Fatalf("turn on b: %+v", out)
	}
	wantTasksOn(t, env, turn2, "b")

	// A new turn of the old session runs on b.
	res, err := env.Sessions.Send(ctx, s1, signals.SendRequest{Message: "refund ch_3 for 5", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	wantVersion(t, env, signals.TurnWorkflowID(s1, res.TurnID), "b", enumspb.VERSIONING_BEHAVIOR_PINNED)
}

// startVersioned runs a worker of build for a on env's task queue (the
// deployment's name); current: it makes the build current before it
// returns.
func startVersioned(t *testing.T, env *evetest.Env, a *agent.Agent, build string, current bool) *workerhost.Worker {
	t.Helper()
	return startVersionedHost(t, env, a, agent.Host{}, build, current)
}

// startVersionedHost is startVersioned with what the worker wires in (an
// empty Store, Notifier or Client is the env's).
func startVersionedHost(t *testing.T, env *evetest.Env, a *agent.Agent, h agent.Host, build string, current bool) *workerhost.Worker {
	t.Helper()
	if h.Store == nil {
		h.Store = env.Server.PayloadStore()
	}
	if h.Notifier == nil {
		h.Notifier = env.Bus
	}
	if h.Client == nil {
		h.Client = env.Client
	}
	w, err := workerhost.New(env.Client, env.Server.Namespace, env.TaskQueue, a, h,
		workerhost.Limits{Activities: 10, LocalActivities: 10, WorkflowTasks: 4, CachedWorkflows: 100},
		workerhost.Deployment{BuildID: build, MakeCurrent: current})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil { // with MakeCurrent: returns once current
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// A delegated tools-API execution started on build a waits for its job
// across the deploy of b and finishes on a; the next one starts on b.
func TestVersionedDelegatedExecutionFinishesOnItsBuild(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(2 * time.Minute)
	e := &tapiEnv{Env: env, jobs: make(chan tools.Action, 10)}
	cfg, _, _ := env.Actions()
	newAgent := func() *agent.Agent {
		a := evetest.Agent(t, `rules: []`, e.tools()...)
		a.Name = "ops"
		return a
	}
	first := newAgent()
	startVersionedHost(t, env, first, agent.Host{Actions: cfg}, "a", true)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: first, RunTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := toolsclient.New(hs.URL, "", toolsclient.WithUserID("user_42"))
	execute := func(spec string) (string, tools.Action) {
		t.Helper()
		res, err := c.Tools.Execute(ctx, "ops.report", toolsclient.ExecuteToolOptions{Input: map[string]string{"spec": spec}})
		if err != nil || res.Status.Terminal() {
			t.Fatalf("execute %s = %+v %v", spec, res, err)
		}
		select {
		case a := <-e.jobs:
			return res.ID, a
		case <-ctx.Done():
			t.Fatalf("no job for %s", spec)
			return "", tools.Action{}
		}
	}
	finish := func(id string, a tools.Action) {
		t.Helper()
		if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": id}); err != nil {
			t.Fatal(err)
		}
		if done, err := c.Executions.Wait(ctx, id, 100*time.Millisecond); err != nil || done.Status != catalog.StatusSucceeded {
			t.Fatalf("%s: %+v %v", id, done, err)
		}
	}
	onA, jobA := execute("q3")
	wantVersion(t, env, onA, "a", enumspb.VERSIONING_BEHAVIOR_PINNED)

	startVersionedHost(t, env, newAgent(), agent.Host{Actions: cfg}, "b", false)
	if err := workerhost.MakeCurrent(ctx, env.Client, workerhost.Deployment{Name: env.TaskQueue, BuildID: "b"}, nil); err != nil {
		t.Fatal(err)
	}
	onB, jobB := execute("q4")
	wantVersion(t, env, onB, "b", enumspb.VERSIONING_BEHAVIOR_PINNED)
	finish(onA, jobA)
	wantTasksOn(t, env, onA, "a")
	finish(onB, jobB)
	wantTasksOn(t, env, onB, "b")
}

// approveAll approves the open requests of a session's parked turn and
// returns its outcome.
func approveAll(t *testing.T, env *evetest.Env, sessionID string) *signals.TurnOutcome {
	t.Helper()
	evs := env.Events(env.Ctx(30*time.Second), sessionID)
	var rs []protocol.InputResponse
	for _, e := range evetest.Of(evs, protocol.InputRequested) {
		var d protocol.InputRequestedData
		e.Decode(&d)
		for _, r := range d.Requests {
			rs = append(rs, protocol.InputResponse{RequestID: r.RequestID, OptionID: "approve"})
		}
	}
	res := respond(t, env, sessionID, rs...)
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("session %s after approval: %+v", sessionID, res.Outcome)
	}
	return res.Outcome
}

// wantVersion checks a workflow's deployment version (build) and
// versioning behaviour as the server records them.
func wantVersion(t *testing.T, env *evetest.Env, workflowID, build string, behavior enumspb.VersioningBehavior) {
	t.Helper()
	resp, err := env.Client.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	vi := resp.GetWorkflowExecutionInfo().GetVersioningInfo()
	if got := vi.GetDeploymentVersion(); got.GetBuildId() != build || got.GetDeploymentName() != env.TaskQueue || vi.GetBehavior() != behavior {
		t.Fatalf("%s: version %v behaviour %v, want build %q of %q, %v", workflowID, got, vi.GetBehavior(), build, env.TaskQueue, behavior)
	}
}

// wantTasksOn checks that every workflow task of a workflow completed on
// the given build.
func wantTasksOn(t *testing.T, env *evetest.Env, workflowID, build string) {
	t.Helper()
	it := env.Client.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			continue
		}
		n++
		v := ev.GetWorkflowTaskCompletedEventAttributes().GetDeploymentVersion()
		if !sameVersion(v, env.TaskQueue, build) {
			t.Fatalf("%s: workflow task %d completed on %v, want build %q", workflowID, ev.GetEventId(), v, build)
		}
	}
	if n < 2 {
		t.Fatalf("%s: %d workflow tasks, want the ones before and after the approval", workflowID, n)
	}
}

func sameVersion(v *deploymentpb.WorkerDeploymentVersion, name, build string) bool {
	return v.GetDeploymentName() == name && v.GetBuildId() == build
}
