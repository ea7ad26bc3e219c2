package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Stopping a subagent's call (docs/subagents.md): the researcher waits for
// an approval of fetch_paper, proxied to the root; the call is stopped
// from outside (the task cancel API, the same path as eve__task_cancel).
// The root withdraws the proxied request (input.resolved cancelled, once),
// the child's turn is cancelled (its own request resolved cancelled, the
// tool never runs), the child session stays with its conversation, and a
// later call by taskId continues it. Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the root turn, the child's cancelled
// turn and the child session (v0.5.0-turn-subagent-cancel*.json,
// v0.5.0-session-subagent-cancelled-child.json).
func TestSubagentCancelled(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	failer := &failRule{why: "cancels the child's turn", match: func(name string, _ any) bool { return name == signals.SignalAgentCancel }}
	env.StartWorkerWith(a, worker.Options{Interceptors: []interceptor.WorkerInterceptor{&failTurnSignal{rules: []*failRule{failer}}}})
	ctx := env.Ctx(2 * time.Minute)
	id, evs, ts, child := delegateParked(t, env, "tidal power")
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	if len(req.Requests) != 1 {
		t.Fatalf("proxied input.requested %+v", req)
	}
	rid := req.Requests[0].RequestID
	waitFor(t, env, child, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })

	if _, err := env.Sessions.CancelTask(ctx, id, nil, signals.TaskCancelRequest{TaskID: ts.TaskID, Caller: alice}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id, idle(1))
	cevs := waitFor(t, env, child, idle(1))

	resolutions := func(evs []protocol.Event) []string {
		var out []string
		for _, e := range evetest.Of(evs, protocol.InputResolved) {
			var d protocol.InputResolvedData
			_ = e.Decode(&d)
			for _, res := range d.Resolutions {
				out = append(out, res.RequestID+" "+res.Outcome)
			}
		}
		return out
	}
	want := []string{rid + " " + protocol.OutcomeCancelled}
	if diff := cmp.Diff(want, resolutions(evs)); diff != "" {
		t.Errorf("root: the proxied request withdrawn once (-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
	if diff := cmp.Diff(want, resolutions(cevs)); diff != "" {
		t.Errorf("child: its request cancelled once (-want +got):\n%s\n%s", diff, evetest.Join(cevs))
	}
	var settled protocol.TaskSettledData
	_ = evetest.Of(evs, protocol.TaskSettled)[0].Decode(&settled)
	if settled.Status != protocol.TaskCancelled || settled.Cancel == nil || settled.Cancel.Reason != protocol.TaskCancelTaskCancel {
		t.Errorf("task.settled %+v", settled)
	}
	if got := typesOf(cevs, protocol.TurnStarted, protocol.TurnCancelled, protocol.TurnCompleted); !cmp.Equal(got, []string{protocol.TurnStarted, protocol.TurnCancelled}) {
		t.Errorf("child turns %v, want its turn cancelled: %s", got, evetest.Join(cevs))
	}
	for _, e := range evetest.Of(cevs, protocol.ActionResult) {
		if strings.Contains(string(e.Data), "12 pages") {
			t.Errorf("fetch_paper ran: %s", e.Data)
		}
	}
	sum, err := env.Sessions.Summary(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Conversation == nil || sum.Conversation.Messages == 0 {
		t.Fatalf("the cancelled child kept no conversation: %+v", sum.Conversation)
	}
	kept := sum.Conversation.Messages
	if failer.failed.Load() != 1 {
		t.Errorf("the workflow task that sends eve.agent.cancel failed %d times, want 1", failer.failed.Load())
	}
	sent, failed := signalsSent(t, env, id+"/turn_0", signals.SignalAgentCancel)
	if sent != 1 || failed < 1 {
		t.Errorf("root turn: %d eve.agent.cancel sent (want 1), %d failed workflow tasks (want ≥1)", sent, failed)
	}

	// A later call by taskId continues the same child, with its conversation.
	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " dig deeper", Caller: alice})
	evs = waitFor(t, env, id, idle(2))
	if got := lastReply(t, evs); got != "The researcher says: On dig deeper: 2 more sources, both recent." {
		t.Errorf("continued reply %q: %s", got, evetest.Join(evs))
	}
	cevs = waitFor(t, env, child, idle(2))
	if n := len(evetest.Of(cevs, protocol.SessionStarted)); n != 1 {
		t.Errorf("%d session.started on the child, want 1", n)
	}
	if sum, err = env.Sessions.Summary(ctx, child); err != nil {
		t.Fatal(err)
	}
	if sum.Conversation == nil || sum.Conversation.Messages <= kept {
		t.Errorf("the child's conversation after the continuation: %+v, want more than %d messages", sum.Conversation, kept)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-cancelled")
	saveTaskHistory(t, env, child+"/turn_0", "turn-subagent-cancelled-child")
	saveTaskHistory(t, env, child, "session-subagent-cancelled-child")
}

// signalsSent counts a workflow's signal commands of one name, and its
// failed workflow tasks.
func signalsSent(t *testing.T, env *evetest.Env, wid, signal string) (sent, failed int) {
	t.Helper()
	it := env.Client.GetWorkflowHistory(env.Ctx(30*time.Second), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			failed++
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			if e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == signal {
				sent++
			}
		}
	}
	return sent, failed
}

// A call to a working child joins its turn (docs/subagents.md): the
// researcher waits for an approval of fetch_paper; alice steers the root
// with "tell <taskId> dig deeper", and the root's model calls the
// researcher again by taskId while its task works. The child's running
// turn reads the message as a steering message (which withdraws its open
// approval: outcome ignored, on both streams), and its one reply settles
// both calls. Recording saves the root turn and the child session
// (v0.5.0-turn-subagent-joined.json, v0.5.0-session-subagent-joined-child.json).
func TestSubagentJoined(t *testing.T) {
	env := demoEnv(t)
	id, evs, ts, child := delegateParked(t, env, "tidal power")
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	rid := req.Requests[0].RequestID
	waitFor(t, env, child, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })

	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " dig deeper", Caller: alice})
	evs = waitFor(t, env, id, idle(1))
	cevs := waitFor(t, env, child, idle(1))

	const reply = "On dig deeper: 2 more sources, both recent."
	var got []string
	for _, e := range evetest.Of(evs, protocol.TaskSettled) {
		var d protocol.TaskSettledData
		_ = e.Decode(&d)
		var out string
		_ = json.Unmarshal(d.Output, &out)
		got = append(got, d.TaskID+" "+d.Status+" "+out)
	}
	want := []string{ts.TaskID + " completed " + reply, ts.TaskID + " completed " + reply}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task.settled: both calls settle with the child turn's reply (-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
	if got := lastReply(t, evs); got != "The researcher says: "+reply {
		t.Errorf("root reply %q", got)
	}
	if n := len(evetest.Of(cevs, protocol.TurnStarted)); n != 1 {
		t.Errorf("the child ran %d turns, want 1 (the call joined its turn): %s", n, evetest.Join(cevs))
	}
	if got := lastReply(t, cevs); got != reply {
		t.Errorf("child reply %q", got)
	}
	for name, evs := range map[string][]protocol.Event{"root": evs, "child": cevs} {
		var res []string
		for _, e := range evetest.Of(evs, protocol.InputResolved) {
			var d protocol.InputResolvedData
			_ = e.Decode(&d)
			for _, r := range d.Resolutions {
				res = append(res, r.RequestID+" "+r.Outcome)
			}
		}
		if diff := cmp.Diff([]string{rid + " " + protocol.OutcomeIgnored}, res); diff != "" {
			t.Errorf("%s: the approval withdrawn by the joined message (-want +got):\n%s", name, diff)
		}
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-joined")
	saveTaskHistory(t, env, child, "session-subagent-joined-child")
}
