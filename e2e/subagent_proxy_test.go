package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// requestTag is the tag a subagent's child session puts in its request ids
// (apr_<tag>_<call id>; docs/subagents.md): "s" and 8 hex digits of the
// SHA-256 of its session id.
func requestTag(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "s" + hex.EncodeToString(sum[:4])
}

// People in the loop from any depth (docs/subagents.md): the demo's
// researcher asks for approval of fetch_paper; the request is proxied on
// the root session's stream (the child's request id, the root's callId),
// the person answers through the root session, the child decides it, the
// root relays approval.settled and input.resolved, and the child's reply
// arrives in the root turn. Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the root turn and the child's turn
// (v0.5.0-turn-subagent-proxied-*.json).
func TestSubagentProxiedApproval(t *testing.T) {
	env := demoEnv(t)
	for _, tc := range []struct {
		name, option, reply, outcome, resolved string
		runs                                   int
	}{
		{name: "approved", option: "approve", outcome: protocol.OutcomeApproved, resolved: protocol.OutcomeApproved, runs: 1,
			reply: "The researcher says: Fetched: the paper on tidal power (12 pages)."},
		{name: "denied", option: "cancel", outcome: protocol.OutcomeCancelled, resolved: protocol.OutcomeDenied, runs: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := env.Ctx(2 * time.Minute)
			id, evs, ts, child := delegateParked(t, env, "tidal power")
			var req protocol.InputRequestedData
			_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
			if len(req.Requests) != 1 {
				t.Fatalf("proxied input.requested %+v", req)
			}
			r := req.Requests[0]
			if req.CallID != ts.CallID || req.TurnID != "turn_0" || r.Kind != protocol.KindToolApproval ||
				r.Action.ToolName != "fetch_paper" || r.RequestID != "apr_"+requestTag(child)+"_"+r.Action.CallID ||
				r.Prompt != "Let the researcher fetch a paper on tidal power?" {
				t.Fatalf("proxied input.requested %+v (request %+v)", req, r)
			}
			// The child asked the same request on its own stream.
			cevs := waitFor(t, env, child, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
			var creq protocol.InputRequestedData
			_ = evetest.Of(cevs, protocol.InputRequested)[0].Decode(&creq)
			if creq.CallID != "" || len(creq.Requests) != 1 || creq.Requests[0].RequestID != r.RequestID {
				t.Fatalf("child's input.requested %+v", creq)
			}

			// The person answers through the root session.
			if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: tc.option}}, Responder: alice}); err != nil {
				t.Fatal(err)
			}
			evs = waitFor(t, env, id, idle(1))
			cevs = waitFor(t, env, child, idle(1))
			if tc.reply != "" {
				if got, want := lastReply(t, evs), tc.reply+" To follow up, say: tell "+ts.TaskID+" <message>"; got != want {
					t.Errorf("reply %q, want %q", got, want)
				}
			}
			// The root relayed the child's settlement, once each.
			for _, evs := range [][]protocol.Event{evs, cevs} {
				var got []string
				for _, e := range evetest.Of(evs, protocol.ApprovalSettled) {
					var d protocol.ApprovalSettledData
					_ = e.Decode(&d)
					got = append(got, d.RequestID+" "+d.Outcome)
				}
				for _, e := range evetest.Of(evs, protocol.InputResolved) {
					var d protocol.InputResolvedData
					_ = e.Decode(&d)
					for _, res := range d.Resolutions {
						got = append(got, "resolved "+res.RequestID+" "+res.Outcome)
					}
				}
				want := []string{r.RequestID + " " + tc.outcome, "resolved " + r.RequestID + " " + tc.resolved}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("settlement (-want +got):\n%s\n%s", diff, evetest.Join(evs))
				}
			}
			if n := len(evetest.Of(evs, protocol.InputRequested)); n != 1 {
				t.Errorf("%d input.requested on the root, want 1", n)
			}
			// The child's tool ran once (or not at all, denied).
			runs := 0
			for _, e := range evetest.Of(cevs, protocol.ActionResult) {
				if strings.Contains(string(e.Data), `"fetch_paper"`) && strings.Contains(string(e.Data), "12 pages") {
					runs++
				}
			}
			if runs != tc.runs {
				t.Errorf("fetch_paper ran %d times, want %d: %s", runs, tc.runs, evetest.Join(cevs))
			}
			// An answer repeated through the root changes nothing.
			res, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: tc.option}}, Responder: alice})
			if err == nil && fmt.Sprint(res.Duplicates) != fmt.Sprint([]string{r.RequestID}) {
				t.Errorf("repeat: %+v", res)
			}
			if tc.name == "approved" {
				saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-proxied-approved")
				saveTaskHistory(t, env, child+"/turn_0", "turn-subagent-proxied-child")
				saveTaskHistory(t, env, child+"/turn_0", "turn-subagent-request-ids-child")
			}
		})
	}
}

// A grandchild's approval (depth 2) reaches the root: boss delegates to
// mid, mid to the demo's researcher, whose fetch_paper asks. The request
// is proxied twice (each parent records it with its own callId), the
// answer given to the root goes down through mid, and the settlement comes
// back up through mid to the root.
func TestSubagentProxiedApprovalDepth2(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(depth2Agent(t))
	ctx := env.Ctx(2 * time.Minute)
	id, evs := parkedOn(t, env, "delegate fetch tidal power")
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	var ts protocol.TaskStartedData
	_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&ts)
	if len(req.Requests) != 1 || req.CallID != ts.CallID || req.Requests[0].Action.ToolName != "fetch_paper" {
		t.Fatalf("proxied input.requested %+v: %s", req, evetest.Join(evs))
	}
	r := req.Requests[0]
	if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: "approve"}}, Responder: alice}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id, idle(1))
	if got, want := lastReply(t, evs), "boss: mid: Fetched: the paper on tidal power (12 pages)"; got != want {
		t.Errorf("reply %q, want %q: %s", got, want, evetest.Join(evs))
	}
	midID := signals.SubagentSessionID(id, ts.TaskID)
	for _, s := range []struct {
		name string
		evs  []protocol.Event
	}{{"root", evs}, {"mid", waitFor(t, env, midID, idle(1))}} {
		got := typesOf(s.evs, protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved)
		if diff := cmp.Diff([]string{protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s\n%s", s.name, diff, evetest.Join(s.evs))
		}
	}
}

// Exactly once: the child turn's workflow task that relays its request up,
// and the root's that routes the answer down, each fail once after issuing
// the signal and are retried. The root records the request once, the
// child's tool runs once, each side sends each signal once.
func TestSubagentProxiedOnce(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	relay := &failRule{why: "relays the request", match: func(name string, arg any) bool {
		in, ok := arg.(signals.AgentInput)
		return ok && name == signals.SignalAgentInput && in.Type == protocol.InputRequested
	}}
	down := &failRule{why: "routes the answer down", match: func(name string, _ any) bool { return name == signals.SignalRespond }}
	env.StartWorkerWith(a, worker.Options{Interceptors: []interceptor.WorkerInterceptor{&failTurnSignal{rules: []*failRule{relay, down}}}})
	ctx := env.Ctx(2 * time.Minute)
	id, evs := parkedOn(t, env, "ask researcher fetch wind farms")
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.Requests[0].RequestID, OptionID: "approve"}}, Responder: alice}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id, idle(1))
	if got := lastReply(t, evs); !strings.HasPrefix(got, "The researcher says: Fetched: the paper on wind farms (12 pages).") {
		t.Errorf("reply %q", got)
	}
	if got := []int32{relay.failed.Load(), down.failed.Load()}; !cmp.Equal(got, []int32{1, 1}) {
		t.Fatalf("failed tasks (relay, route down) %v, want [1 1]", got)
	}
	if got := typesOf(evs, protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved); !cmp.Equal(got, []string{protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved}) {
		t.Errorf("root %v: %s", got, evetest.Join(evs))
	}
	_, child := firstChild(t, id, evs)
	cevs := waitFor(t, env, child, idle(1))
	runs := 0
	for _, e := range evetest.Of(cevs, protocol.ActionResult) {
		if strings.Contains(string(e.Data), "12 pages") {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("fetch_paper ran %d times, want 1", runs)
	}
	count := func(wid, signal string) (sent, failed int) {
		it := env.Client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
	if sent, failed := count(child+"/turn_0", signals.SignalAgentInput); sent != 3 || failed < 1 {
		t.Errorf("child turn: %d relays sent (want 3: requested, settled, resolved), %d failed tasks", sent, failed)
	}
	if sent, failed := count(id+"/turn_0", signals.SignalRespond); sent != 1 || failed < 1 {
		t.Errorf("root turn: %d answers routed down (want 1), %d failed tasks", sent, failed)
	}
}

// failTurnSignal fails the workflow task of a turn that sends a signal one
// of its rules matches, after the signal command, once per rule: the task
// is retried, and the test checks the signal was sent once.
type failTurnSignal struct {
	interceptor.WorkerInterceptorBase
	rules []*failRule
}

// failRule is one signal to fail after; failed counts the tasks it failed.
type failRule struct {
	why    string
	match  func(name string, arg any) bool
	failed atomic.Int32
}

func (f *failTurnSignal) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != signals.TurnWorkflow {
		return next
	}
	return &failTurnSignalInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, f: f}
}

type failTurnSignalInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	f *failTurnSignal
}

func (i *failTurnSignalInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&failTurnSignalOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, f: i.f})
}

type failTurnSignalOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	f *failTurnSignal
}

func (o *failTurnSignalOutbound) SignalExternalWorkflow(ctx workflow.Context, wid, runID, name string, arg any) workflow.Future {
	fut := o.Next.SignalExternalWorkflow(ctx, wid, runID, name, arg)
	if workflow.IsReplaying(ctx) {
		return fut
	}
	for _, r := range o.f.rules {
		if r.match(name, arg) && r.failed.CompareAndSwap(0, 1) {
			panic("test: the workflow task that " + r.why + " fails")
		}
	}
	return fut
}
