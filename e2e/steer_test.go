package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Messages answer prompts and steer turns as in eve 0.80.1
// (docs/tools/human-in-the-loop.md, docs/concepts/sessions-runs-and-streaming.md).

// steerRules: the demo's rules plus one step with two approvals.
const steerRules = `
name: steer
default: "Hello."
rules:
  - match: '^refund both'
    steps:
      - calls:
          - {tool: refund_charge, input: {chargeId: ch_a, amount: 1}}
          - {tool: refund_charge, input: {chargeId: ch_b, amount: 2}}
      - reply: "Refunds: {{results.0.refunded}}{{results.0.message}} / {{results.1.refunded}}{{results.1.message}}"
  - match: '^refund (?P<charge>ch_\w+) (?:for )?(?P<amount>[0-9.]+)'
    steps:
      - calls: [{tool: refund_charge, inputJSON: '{"chargeId": "{{charge}}", "amount": {{amount}}}'}]
      - reply: "Refund of {{charge}}: {{result.refund_charge.refunded}}{{result.refund_charge.message}}"
  - match: 'weather (?:in|for|at) (?P<city>[\p{L} .''-]+?)[?.!]*$'
    calls:
      - tool: get_weather
        input: { city: "{{city}}" }
    reply: "It is {{result.get_weather.condition}} in {{result.get_weather.city}}."
  - match: 'choose (?:a )?plan'
    steps:
      - calls: [{tool: choose_plan, input: {accountId: "acct_1"}}]
      - reply: "You picked {{result.choose_plan.optionId}}{{result.choose_plan.text}}."
`

func steerEnv(t *testing.T) *evetest.Env {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, steerRules, demo.Tools()...))
	return env
}

func send(t *testing.T, env *evetest.Env, id string, req signals.SendRequest) signals.SendResult {
	t.Helper()
	res, err := env.Sessions.Send(env.Ctx(30*time.Second), id, req)
	if err != nil {
		t.Fatalf("send %q: %v", req.Message, err)
	}
	return res
}

func resolutions(evs []protocol.Event) []protocol.InputResolution {
	var out []protocol.InputResolution
	for _, e := range evetest.Of(evs, protocol.InputResolved) {
		var d protocol.InputResolvedData
		e.Decode(&d)
		out = append(out, d.Resolutions...)
	}
	return out
}

func lastReply(t *testing.T, evs []protocol.Event) string {
	t.Helper()
	mc := evetest.Of(evs, protocol.MessageCompleted)
	if len(mc) == 0 {
		t.Fatalf("no message.completed: %s", evetest.Join(evs))
	}
	var d protocol.MessageCompletedData
	mc[len(mc)-1].Decode(&d)
	return d.Message
}

func idle(n int) func([]protocol.Event) bool {
	return func(evs []protocol.Event) bool {
		return len(evetest.Of(evs, protocol.SessionWaiting)) >= n && evs[len(evs)-1].Type == protocol.SessionWaiting
	}
}

// A message answers an approval by option id, label or 1-based number.
func TestMessageAnswersApproval(t *testing.T) {
	env := steerEnv(t)
	for _, tc := range []struct{ text, outcome, reply string }{
		{"approve", protocol.OutcomeApproved, "Refund of ch_1: 5"},
		{"Approve", protocol.OutcomeApproved, "Refund of ch_1: 5"},
		{"1", protocol.OutcomeApproved, "Refund of ch_1: 5"},
		{"cancel", protocol.OutcomeDenied, "Refund of ch_1: The call to refund_charge was denied by the user. The tool did not run."},
		{"2", protocol.OutcomeDenied, "Refund of ch_1: The call to refund_charge was denied by the user. The tool did not run."},
	} {
		id, d := startParked(t, env, "refund ch_1 5")
		sent := send(t, env, id, signals.SendRequest{Message: tc.text, DeliveryID: "dlv_" + tc.text})
		if sent.TurnID != "turn_0" {
			t.Fatalf("%q started %s", tc.text, sent.TurnID)
		}
		evs := waitFor(t, env, id, idle(1))
		if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
			t.Fatalf("%q: %d turns: %s", tc.text, n, evetest.Join(evs))
		}
		// message.received (with the delivery id), then input.resolved.
		got := evetest.Join(evs)
		if !strings.Contains(got, "turn.waiting message.received approval.settled input.resolved decision.recorded action.result") {
			t.Fatalf("%q: events %s", tc.text, got)
		}
		mr := evetest.Of(evs, protocol.MessageReceived)
		var m protocol.MessageReceivedData
		mr[1].Decode(&m)
		if m.Message != tc.text || !containsStr(mr[1].Meta.DeliveryIDs, "dlv_"+tc.text) {
			t.Fatalf("%q: message.received %+v %v", tc.text, m, mr[1].Meta.DeliveryIDs)
		}
		rs := resolutions(evs)
		if len(rs) != 1 || rs[0].RequestID != d.Requests[0].RequestID || rs[0].Outcome != tc.outcome {
			t.Fatalf("%q: resolutions %+v", tc.text, rs)
		}
		if r := lastReply(t, evs); r != tc.reply {
			t.Fatalf("%q: reply %q, want %q", tc.text, r, tc.reply)
		}
	}
}

// With two approvals open, a message answers only the first.
func TestMessageAnswersFirstOpenPromptOnly(t *testing.T) {
	env := steerEnv(t)
	id, d := startParked(t, env, "refund both")
	if len(d.Requests) != 2 {
		t.Fatalf("requests %+v", d.Requests)
	}
	send(t, env, id, signals.SendRequest{Message: "cancel"})
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.ActionResult)) == 1 })
	rs := resolutions(evs)
	if len(rs) != 1 || rs[0].RequestID != d.Requests[0].RequestID || rs[0].Outcome != protocol.OutcomeDenied {
		t.Fatalf("first message resolved %+v", rs)
	}
	// The turn parks again on the second approval.
	if got := evetest.Join(evs); !strings.Contains(got, "input.resolved decision.recorded turn.waiting") || strings.Contains(got, "step.completed") {
		t.Fatalf("the second approval is no longer open: %s", got)
	}
	send(t, env, id, signals.SendRequest{Message: "approve"})
	evs = waitFor(t, env, id, idle(1))
	rs = resolutions(evs)
	if len(rs) != 2 || rs[1].RequestID != d.Requests[1].RequestID || rs[1].Outcome != protocol.OutcomeApproved {
		t.Fatalf("resolutions %+v", rs)
	}
	if r := lastReply(t, evs); !strings.HasSuffix(r, "/ 2") || !strings.Contains(r, "denied") {
		t.Fatalf("reply %q", r)
	}
}

// A message that answers nothing steers: the pending approval is withdrawn
// (ignored, the call does not run), an approved call of the batch still
// runs, and the model reads the message next, in the same turn.
func TestSteeringWithdrawsPendingApprovals(t *testing.T) {
	env := steerEnv(t)
	id, d := startParked(t, env, "refund both")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	sent := send(t, env, id, signals.SendRequest{Message: "what's the weather in Oslo", DeliveryID: "dlv_steer"})
	if sent.TurnID != "turn_0" {
		t.Fatalf("the steering message started %s", sent.TurnID)
	}
	evs := waitFor(t, env, id, idle(1))
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Fatalf("%d turns: %s", n, evetest.Join(evs))
	}
	rs := resolutions(evs)
	if len(rs) != 2 || rs[1].RequestID != d.Requests[1].RequestID || rs[1].Outcome != protocol.OutcomeIgnored {
		t.Fatalf("resolutions %+v", rs)
	}
	var ran, ignored bool
	for _, e := range evetest.Of(evs, protocol.ActionResult) {
		var ar protocol.ActionResultData
		e.Decode(&ar)
		switch ar.Result.CallID {
		case d.Requests[0].Action.CallID:
			ran = ar.Status == protocol.StatusCompleted && strings.Contains(string(ar.Result.Output), `"refunded":1`)
		case d.Requests[1].Action.CallID:
			// eve's shape: the approval was ignored, the tool did not run.
			want := protocol.DeniedResult{Approval: &protocol.DeniedApproval{RequestID: d.Requests[1].RequestID, Status: "ignored"},
				Code: protocol.CodeToolDenied, Message: ar.Error.Message, Tool: protocol.DeniedTool{Result: "not_run"}}
			if diff := cmp.Diff(want, deniedOutput(t, ar.Result.Output)); diff != "" {
				t.Errorf("withdrawn call's result (-want +got):\n%s", diff)
			}
			ignored = ar.Status == protocol.StatusRejected
		}
	}
	if !ran || !ignored {
		t.Fatalf("approved call ran %v, withdrawn call rejected %v: %s", ran, ignored, evetest.Join(evs))
	}
	// The steering message enters the turn at the next step boundary.
	got := evetest.Join(evs)
	if !strings.Contains(got, "step.completed message.received step.started") {
		t.Fatalf("events %s", got)
	}
	mr := evetest.Of(evs, protocol.MessageReceived)
	if len(mr) != 2 || !containsStr(mr[1].Meta.DeliveryIDs, "dlv_steer") {
		t.Fatalf("message.received %d", len(mr))
	}
	if r := lastReply(t, evs); !strings.HasSuffix(r, "in Oslo.") {
		t.Fatalf("the model did not read the steering message: %q", r)
	}
}

// Steering withdraws a pending question as cancelled; turnPolicy "queue"
// leaves it open and the message waits for the turn's end.
func TestTurnPolicyQueueAndSteer(t *testing.T) {
	env := steerEnv(t)
	// steer (the default): the question is withdrawn, the model reads the message.
	id, d := startParked(t, env, "choose a plan")
	send(t, env, id, signals.SendRequest{Message: "what's the weather in Rome", TurnPolicy: signals.TurnPolicySteer})
	evs := waitFor(t, env, id, idle(1))
	rs := resolutions(evs)
	if len(rs) != 1 || rs[0].RequestID != d.Requests[0].RequestID || rs[0].Outcome != protocol.OutcomeCancelled {
		t.Fatalf("resolutions %+v", rs)
	}
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 || !strings.HasSuffix(lastReply(t, evs), "in Rome.") {
		t.Fatalf("%d turns, reply %q", n, lastReply(t, evs))
	}

	// queue: a message that answers nothing waits for the turn's end.
	id, d = startParked(t, env, "choose a plan")
	sent := send(t, env, id, signals.SendRequest{Message: "what's the weather in Rome", TurnPolicy: signals.TurnPolicyQueue})
	// The session offered it to the turn (a question is open); once the
	// offer is in the turn's history, the events query sees what the turn
	// did with it.
	waitOffered(t, env, id, 1)
	evs = env.Events(env.Ctx(10*time.Second), id)
	if evs[len(evs)-1].Type != protocol.TurnWaiting || len(resolutions(evs)) != 0 {
		t.Fatalf("a queued message changed the turn: %s", evetest.Join(evs))
	}
	// ...but one that answers the first prompt still answers it.
	send(t, env, id, signals.SendRequest{Message: "pro", TurnPolicy: signals.TurnPolicyQueue})
	evs = waitFor(t, env, id, idle(2))
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 2 {
		t.Fatalf("%d turns: %s", n, evetest.Join(evs))
	}
	var replies []string
	for _, e := range evetest.Of(evs, protocol.MessageCompleted) {
		var m protocol.MessageCompletedData
		e.Decode(&m)
		replies = append(replies, m.Message)
	}
	if len(replies) != 2 || replies[0] != "You picked pro." || !strings.HasSuffix(replies[1], "in Rome.") {
		t.Fatalf("replies %q (sent as %s)", replies, sent.TurnID)
	}

	// queue still steers a turn held on an approval: it cannot end otherwise.
	id, d = startParked(t, env, "refund ch_3 3")
	send(t, env, id, signals.SendRequest{Message: "what's the weather in Lima", TurnPolicy: signals.TurnPolicyQueue})
	evs = waitFor(t, env, id, idle(1))
	rs = resolutions(evs)
	if len(rs) != 1 || rs[0].RequestID != d.Requests[0].RequestID || rs[0].Outcome != protocol.OutcomeIgnored || !strings.HasSuffix(lastReply(t, evs), "in Lima.") {
		t.Fatalf("resolutions %+v reply %q", rs, lastReply(t, evs))
	}
}

// A message from someone other than the person the turn serves waits for
// the turn's end, even one that matches an option.
func TestOtherPrincipalsMessageWaits(t *testing.T) {
	env := steerEnv(t)
	bob := &auth.Principal{ID: "bob", Type: "user"}
	id, d := startParked(t, env, "refund ch_9 9")
	sent := send(t, env, id, signals.SendRequest{Message: "approve", Caller: bob})
	// The session routes a message in the send Update itself: bob's waits
	// for a turn of its own and is never offered to alice's.
	if sent.TurnID != "turn_1" {
		t.Fatalf("bob's message went to %s", sent.TurnID)
	}
	evs := env.Events(env.Ctx(10*time.Second), id)
	if evs[len(evs)-1].Type != protocol.TurnWaiting || len(resolutions(evs)) != 0 {
		t.Fatalf("bob's message changed alice's turn: %s", evetest.Join(evs))
	}
	// alice's approval is still open (respond fails otherwise) and hers is
	// the turn's only resolution.
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	evs = waitFor(t, env, id, idle(2))
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 2 || lastReply(t, evs) != "Hello." {
		t.Fatalf("%d turns, reply %q: %s", n, lastReply(t, evs), evetest.Join(evs))
	}
	if rs := resolutions(evs); len(rs) != 1 || rs[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("resolutions %+v", rs)
	}
}

// waitOffered waits until the running turn of session id holds n messages
// offered by its session (signals in the turn's history). A query after
// that answers only once the turn has processed them.
func waitOffered(t *testing.T, env *evetest.Env, id string, n int) {
	t.Helper()
	ctx := env.Ctx(30 * time.Second)
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil || sum.ActiveTurn == nil {
		t.Fatalf("no running turn: %+v %v", sum, err)
	}
	for {
		got := 0
		it := env.Client.GetWorkflowHistory(ctx, sum.ActiveTurn.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == signals.SignalTurnMessage {
				got++
			}
		}
		if got >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the turn received %d offered messages, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Assistant text always streams: every message.completed follows
// message.appended deltas that add up to its text, also for a scripted
// model in a local activity, which does not stream.
func TestScriptedTextStreams(t *testing.T) {
	env := steerEnv(t)
	id, d := startParked(t, env, "refund ch_1 5")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	evs := waitFor(t, env, id, idle(1))
	checkStreamed(t, evs)
}

func checkStreamed(t *testing.T, evs []protocol.Event) {
	t.Helper()
	var streamed strings.Builder
	n := 0
	for _, e := range evs {
		switch e.Type {
		case protocol.StepStarted:
			streamed.Reset()
		case protocol.MessageAppended:
			var d protocol.MessageAppendedData
			e.Decode(&d)
			streamed.WriteString(d.MessageDelta)
		case protocol.MessageCompleted:
			var d protocol.MessageCompletedData
			e.Decode(&d)
			if streamed.String() != d.Message {
				t.Fatalf("message.completed %q after deltas %q: %s", d.Message, streamed.String(), evetest.Join(evs))
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no message.completed: %s", evetest.Join(evs))
	}
}
