package e2e

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Subagents (docs/subagents.md): the demo agent delegates to its declared
// subagent researcher with "ask researcher <topic>". The root turn records
// agent.started once, the child session has a stream and a turn of its
// own, and the child's reply reaches the model in the same root turn; a
// later turn continues the same child by taskId; a child that ended is
// UNKNOWN_TASK. Recording (EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0-)
// saves the parent's turns and the child session
// (v0.5.0-turn-subagent-*.json, v0.5.0-session-subagent-child.json).
func TestDemoSubagent(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "ask researcher tidal power", Caller: alice})
	evs := waitFor(t, env, id, idle(1))

	started := evetest.Of(evs, protocol.AgentStarted)
	if len(started) != 1 {
		t.Fatalf("%d agent.started: %s", len(started), evetest.Join(evs))
	}
	var as protocol.AgentStartedData
	_ = started[0].Decode(&as)
	ts, child := firstChild(t, id, evs)
	want := protocol.AgentStartedData{CallID: ts.CallID, TurnID: "turn_0", TaskID: ts.TaskID, Name: "researcher",
		SessionID: child, StreamPath: "/eve/v1/session/" + child + "/stream"}
	if diff := cmp.Diff(want, as); diff != "" {
		t.Errorf("agent.started (-want +got):\n%s", diff)
	}
	if ts.Kind != "agent" || ts.Name != "researcher" || !strings.HasPrefix(ts.TaskID, "researcher-") {
		t.Errorf("task.started %+v", ts)
	}
	var settled protocol.TaskSettledData
	_ = evetest.Of(evs, protocol.TaskSettled)[0].Decode(&settled)
	var out string
	_ = json.Unmarshal(settled.Output, &out)
	if settled.Kind != "agent" || settled.Status != protocol.TaskCompleted || out != "3 sources on tidal power agree it is promising" {
		t.Errorf("task.settled %+v (output %q)", settled, out)
	}
	if got, want := lastReply(t, evs), "The researcher says: 3 sources on tidal power agree it is promising. To follow up, say: tell "+ts.TaskID+" <message>"; got != want {
		t.Errorf("reply %q, want %q", got, want)
	}
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Errorf("%d turns on the parent, want 1 (the reply arrives in the root turn)", n)
	}

	// The child is a session of its own: its stream, its own turn, its tool.
	cevs := waitFor(t, env, child, idle(1))
	if got := typesOf(cevs, protocol.SessionStarted, protocol.TurnStarted, protocol.TurnCompleted); !cmp.Equal(got, []string{protocol.SessionStarted, protocol.TurnStarted, protocol.TurnCompleted}) {
		t.Errorf("child events %v: %s", got, evetest.Join(cevs))
	}
	if got := lastReply(t, cevs); got != "3 sources on tidal power agree it is promising" {
		t.Errorf("child reply %q", got)
	}
	var first protocol.MessageReceivedData
	_ = evetest.Of(cevs, protocol.MessageReceived)[0].Decode(&first)
	if !strings.HasPrefix(first.Message, `You are the subagent "researcher".`) || !strings.HasSuffix(first.Message, "Caller message:\ntidal power") {
		t.Errorf("the child's first message %q", first.Message)
	}

	// The usual stream route serves the child's stream at streamPath, to
	// the parent session's initiator (alice) and nobody else.
	srv := newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys })
	r := srv.do(t, "GET", as.StreamPath+"?follow=false", nil, map[string]string{"Authorization": "Bearer key-alice"})
	if r.Status != 200 || strings.Count(string(r.Body), `"type":"turn.started"`) != 1 || !strings.Contains(string(r.Body), "3 sources on tidal power") {
		t.Errorf("GET %s as alice: %d %s", as.StreamPath, r.Status, r.Body)
	}
	if r := srv.do(t, "GET", as.StreamPath+"?follow=false", nil, map[string]string{"Authorization": "Bearer key-bob"}); r.Status != 403 {
		t.Errorf("GET %s as bob: %d, want 403", as.StreamPath, r.Status)
	}

	// A later turn continues the same child by taskId.
	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " dig deeper", Caller: alice})
	evs = waitFor(t, env, id, idle(2))
	if got := lastReply(t, evs); got != "The researcher says: On dig deeper: 2 more sources, both recent." {
		t.Errorf("continued reply %q: %s", got, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.AgentStarted)); n != 1 {
		t.Errorf("%d agent.started after the continuation, want 1", n)
	}
	cevs = waitFor(t, env, child, idle(2))
	if n := len(evetest.Of(cevs, protocol.TurnStarted)); n != 2 {
		t.Errorf("the child has %d turns, want 2", n)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-answered")
	saveTaskHistory(t, env, id+"/turn_1", "turn-subagent-continued")
	saveTaskHistory(t, env, child, "session-subagent-child")

	// A child that ended: the call settles UNKNOWN_TASK and the task ends,
	// so the next call by its taskId is refused at once.
	if err := env.Client.TerminateWorkflow(ctx, child, "", "test: the child ends"); err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " are you there", Caller: alice})
	evs = waitFor(t, env, id, idle(3))
	if got := lastReply(t, evs); !strings.Contains(got, `No task \"`+ts.TaskID+`\" is available to researcher`) {
		t.Errorf("reply after the child ended %q", got)
	}
	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " again", Caller: alice})
	evs = waitFor(t, env, id, idle(4))
	results := evetest.Of(evs, protocol.ActionResult)
	var last protocol.ActionResultData
	_ = results[len(results)-2].Decode(&last) // the researcher call's (then eve__task_wait's)
	if last.Error == nil || last.Error.Code != protocol.CodeUnknownTask {
		t.Errorf("the call after the task ended: %+v", last)
	}
}

// typesOf lists evs' types among keep, in order.
func typesOf(evs []protocol.Event, keep ...string) []string {
	var out []string
	for _, e := range evs {
		for _, k := range keep {
			if e.Type == k {
				out = append(out, e.Type)
			}
		}
	}
	return out
}

// A workflow task that starts the child fails (a panic after the start
// command, before the task completes) and is retried: the child's id is
// derived, the start is a command of the task, so the retry starts the
// child once and the call answers once.
func TestSubagentStartsOnce(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	failer := &failChildStart{}
	env.StartWorkerWith(a, worker.Options{Interceptors: []interceptor.WorkerInterceptor{failer}})
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "ask researcher wind farms", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	if failer.failed.Load() != 1 {
		t.Fatalf("the start's workflow task failed %d times, want 1", failer.failed.Load())
	}
	if got := lastReply(t, evs); !strings.HasPrefix(got, "The researcher says: 3 sources on wind farms agree") {
		t.Errorf("reply %q", got)
	}
	_, child := firstChild(t, id, evs)
	failedTasks, starts := 0, 0
	it := env.Client.GetWorkflowHistory(ctx, id+"/turn_0", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			failedTasks++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			if e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId() == child {
				starts++
			}
		}
	}
	if failedTasks < 1 || starts != 1 {
		t.Errorf("turn history: %d failed workflow tasks, %d starts of the child; want ≥1 and 1", failedTasks, starts)
	}
	cevs := waitFor(t, env, child, idle(1))
	if n, m := len(evetest.Of(cevs, protocol.SessionStarted)), len(evetest.Of(cevs, protocol.TurnStarted)); n != 1 || m != 1 {
		t.Errorf("child: %d session.started, %d turns; want 1 and 1", n, m)
	}
	if n := len(evetest.Of(evs, protocol.AgentStarted)); n != 1 {
		t.Errorf("%d agent.started, want 1", n)
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, child, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the child session is %s, want running (ABANDON: it outlives the turn)", st)
	}
}

// failChildStart fails the first workflow task of a turn that starts a
// child session, after the start command: the task is retried.
type failChildStart struct {
	interceptor.WorkerInterceptorBase
	failed atomic.Int32
}

func (f *failChildStart) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != signals.TurnWorkflow {
		return next
	}
	return &failChildInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, f: f}
}

type failChildInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	f *failChildStart
}

func (i *failChildInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&failChildOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, f: i.f})
}

type failChildOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	f *failChildStart
}

func (o *failChildOutbound) ExecuteChildWorkflow(ctx workflow.Context, typ string, args ...any) workflow.ChildWorkflowFuture {
	fut := o.Next.ExecuteChildWorkflow(ctx, typ, args...)
	if typ == signals.SessionWorkflow && !workflow.IsReplaying(ctx) && o.f.failed.CompareAndSwap(0, 1) {
		panic("test: the workflow task that starts the child fails")
	}
	return fut
}

// firstChild is the first task.started among a root session's events and
// the child session that task's subagent call started.
// delegateParked opens a session of alice's that asks the demo's
// researcher to fetch topic, and waits until the child's approval is
// proxied to it: the session, its events, the delegating task and the
// child session.
func delegateParked(t *testing.T, env *evetest.Env, topic string) (id string, evs []protocol.Event, ts protocol.TaskStartedData, child string) {
	t.Helper()
	id, evs = parkedOn(t, env, "ask researcher fetch "+topic)
	ts, child = firstChild(t, id, evs)
	return id, evs, ts, child
}

// parkedOn opens a session of alice's, sends it message and waits until
// its stream asks a person something: the session and its events.
func parkedOn(t *testing.T, env *evetest.Env, message string) (string, []protocol.Event) {
	t.Helper()
	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: message, Caller: alice})
	return id, waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
}

func firstChild(t *testing.T, id string, evs []protocol.Event) (protocol.TaskStartedData, string) {
	t.Helper()
	started := evetest.Of(evs, protocol.TaskStarted)
	if len(started) == 0 {
		t.Fatalf("no task.started in %s: %s", id, evetest.Join(evs))
	}
	var ts protocol.TaskStartedData
	if err := started[0].Decode(&ts); err != nil {
		t.Fatal(err)
	}
	return ts, signals.SubagentSessionID(id, ts.TaskID)
}
