package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// settlements lists a stream's approval.settled and input.resolved as
// "settled <id> <outcome>" and "resolved <id> <outcome>", in order.
func settlements(evs []protocol.Event) []string {
	var got []string
	for _, e := range evs {
		switch e.Type {
		case protocol.ApprovalSettled:
			var d protocol.ApprovalSettledData
			_ = e.Decode(&d)
			got = append(got, "settled "+d.RequestID+" "+d.Outcome)
		case protocol.InputResolved:
			var d protocol.InputResolvedData
			_ = e.Decode(&d)
			for _, res := range d.Resolutions {
				got = append(got, "resolved "+res.RequestID+" "+res.Outcome)
			}
		}
	}
	return got
}

// fetchRuns counts the demo researcher's fetch_paper results that ran.
func fetchRuns(evs []protocol.Event) int {
	runs := 0
	for _, e := range evetest.Of(evs, protocol.ActionResult) {
		if strings.Contains(string(e.Data), `"fetch_paper"`) && strings.Contains(string(e.Data), "12 pages") {
			runs++
		}
	}
	return runs
}

// receivedByTurn lists the messages of a stream's message.received as
// "turn message".
func receivedByTurn(evs []protocol.Event) []string {
	var got []string
	for _, e := range evetest.Of(evs, protocol.MessageReceived) {
		var d protocol.MessageReceivedData
		_ = e.Decode(&d)
		got = append(got, d.TurnID+" "+d.Message)
	}
	return got
}

// A typed "approve" on the root answers a proxied prompt, as eve's text
// channels do (docs/subagents.md, changeProxyTyped): the demo's researcher
// asks to run fetch_paper, the request is proxied to the root with the
// call's taskId (changeProxyTaskID), the root session says waiting-input,
// alice types "approve" to the root session; the root turn takes the
// message, the answer goes down to the child, whose tool runs once, and
// the root relays approval.settled and input.resolved and ends with the
// reply. bob's typed "approve" before it is not his to give (fetch_paper
// has no response policy: the requester's alone): it is not taken, and
// runs as a turn of its own after the turn. Recording
// (EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0-) saves the root turn,
// the root session and the child's turn.
func TestSubagentTypedApproval(t *testing.T) {
	env := searchEnv(t, true)
	id, evs, ts, child := delegateParked(t, env, "tidal power")
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	if len(req.Requests) != 1 || req.CallID != ts.CallID || req.TaskID != ts.TaskID || req.Requests[0].Action.ToolName != "fetch_paper" {
		t.Fatalf("proxied input.requested %+v, want callId %s and taskId %s", req, ts.CallID, ts.TaskID)
	}
	rid := req.Requests[0].RequestID
	// Only a proxied request is open: the root session waits on input.
	waitSessionListed(t, env, id, map[[2]string]string{
		{"waiting-input", "fetch_paper"}: "waiting-input [fetch_paper]",
		{"running", ""}:                  "",
	})

	// bob's typed approve is not his to give: it waits for a turn of its own.
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: bob}); res.TurnID != "turn_1" {
		t.Errorf("bob's approve: %+v, want it queued as turn_1", res)
	}
	// alice's is taken by the running turn and answers the proxied prompt.
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: alice}); res.TurnID != "turn_0" {
		t.Errorf("alice's approve: %+v, want it taken by turn_0", res)
	}
	evs = waitFor(t, env, id, idle(2))
	cevs := waitFor(t, env, child, idle(1))
	if got, want := receivedByTurn(evs), []string{"turn_0 ask researcher fetch tidal power", "turn_0 approve", "turn_1 approve"}; !cmp.Equal(got, want) {
		t.Errorf("message.received %q, want %q: %s", got, want, evetest.Join(evs))
	}
	var turn0 []protocol.Event
	for i, e := range evs {
		if e.Type == protocol.TurnStarted && len(evetest.Of(evs[:i], protocol.TurnStarted)) > 0 {
			break
		}
		turn0 = append(turn0, e)
	}
	if got, want := lastReply(t, turn0), "The researcher says: Fetched: the paper on tidal power (12 pages). To follow up, say: tell "+ts.TaskID+" <message>"; !strings.HasPrefix(got, "The researcher says: Fetched: the paper on tidal power (12 pages).") {
		t.Errorf("turn_0's reply %q, want %q", got, want)
	}
	want := []string{"settled " + rid + " " + protocol.OutcomeApproved, "resolved " + rid + " " + protocol.OutcomeApproved}
	for _, s := range []struct {
		name string
		evs  []protocol.Event
	}{{"root", evs}, {"child", cevs}} {
		if diff := cmp.Diff(want, settlements(s.evs)); diff != "" {
			t.Errorf("%s's settlement (-want +got):\n%s\n%s", s.name, diff, evetest.Join(s.evs))
		}
	}
	// alice decided it on the child (the answer went down as hers).
	var st protocol.ApprovalSettledData
	_ = evetest.Of(cevs, protocol.ApprovalSettled)[0].Decode(&st)
	if st.ResponderPrincipalID != alice.ID {
		t.Errorf("child's approval.settled %+v, want decided by alice", st)
	}
	if n := fetchRuns(cevs); n != 1 {
		t.Errorf("fetch_paper ran %d times, want 1: %s", n, evetest.Join(cevs))
	}
	if n := len(evetest.Of(evs, protocol.InputRequested)); n != 1 {
		t.Errorf("%d input.requested on the root, want 1", n)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-typed-approved")
	saveTaskHistory(t, env, child+"/turn_0", "turn-subagent-typed-child")
	saveTaskHistory(t, env, id, "session-subagent-typed")
}

// One typed answer per prompt (eve's "Several requests at once"): three
// researchers wait at once, their approvals proxied to the root; alice
// types "approve", "cancel", "approve": each answers the first open
// prompt, in the order the root asked them, and goes down to its child.
func TestSubagentTypedInOrder(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(fanAgent(t))
	ctx := env.Ctx(3 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "fan tides winds waves", Caller: alice})
	evs := waitWithin(t, env, id, time.Minute, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 3 })
	tasks := map[string]string{} // call id → task id
	for _, e := range evetest.Of(evs, protocol.TaskStarted) {
		var d protocol.TaskStartedData
		_ = e.Decode(&d)
		tasks[d.CallID] = d.TaskID
	}
	var order, topics []string // request ids and topics, in the order asked
	for _, e := range evetest.Of(evs, protocol.InputRequested) {
		var d protocol.InputRequestedData
		_ = e.Decode(&d)
		if d.TaskID == "" || d.TaskID != tasks[d.CallID] {
			t.Errorf("proxied input.requested taskId %q, want %q (call %s)", d.TaskID, tasks[d.CallID], d.CallID)
		}
		var in demo.SourcesInput
		_ = json.Unmarshal(d.Requests[0].Action.Input, &in)
		order, topics = append(order, d.Requests[0].RequestID), append(topics, in.Topic)
	}
	for _, text := range []string{"approve", "cancel", "approve"} {
		if res := send(t, env, id, signals.SendRequest{Message: text, Caller: alice}); res.TurnID != "turn_0" {
			t.Fatalf("%s: %+v, want it taken by turn_0", text, res)
		}
	}
	evs = waitWithin(t, env, id, time.Minute, idle(1))
	got := map[string]string{}
	for _, res := range resolutions(evs) {
		got[res.RequestID] = res.Outcome
	}
	want := map[string]string{order[0]: protocol.OutcomeApproved, order[1]: protocol.OutcomeDenied, order[2]: protocol.OutcomeApproved}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolutions by request, in the order asked %v (-want +got):\n%s\n%s", topics, diff, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Errorf("%d turns on the root, want 1 (each answer taken): %s", n, evetest.Join(evs))
	}
}

// Depth 2: a grandchild's approval (boss → mid → researcher) is answered
// by "approve" typed to the root: the answer goes down through mid, the
// settlement comes back up; each parent's proxied input.requested carries
// its own call's taskId. Recording saves the root's and mid's turns.
func TestSubagentTypedApprovalDepth2(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(depth2Agent(t))
	id, evs := parkedOn(t, env, "delegate fetch tidal power")
	ts, midID := firstChild(t, id, evs)
	mevs := waitFor(t, env, midID, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
	mts, _ := firstChild(t, midID, mevs)
	for _, s := range []struct {
		name string
		evs  []protocol.Event
		ts   protocol.TaskStartedData
	}{{"root", evs, ts}, {"mid", mevs, mts}} {
		var req protocol.InputRequestedData
		_ = evetest.Of(s.evs, protocol.InputRequested)[0].Decode(&req)
		if req.CallID != s.ts.CallID || req.TaskID != s.ts.TaskID {
			t.Errorf("%s's proxied input.requested callId %q taskId %q, want %q %q", s.name, req.CallID, req.TaskID, s.ts.CallID, s.ts.TaskID)
		}
	}
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: alice}); res.TurnID != "turn_0" {
		t.Errorf("approve: %+v, want it taken by turn_0", res)
	}
	evs = waitFor(t, env, id, idle(1))
	if got, want := lastReply(t, evs), "boss: mid: Fetched: the paper on tidal power (12 pages)"; !strings.HasPrefix(got, want) {
		t.Errorf("reply %q, want %q: %s", got, want, evetest.Join(evs))
	}
	for _, s := range []struct {
		name string
		evs  []protocol.Event
	}{{"root", evs}, {"mid", waitFor(t, env, midID, idle(1))}} {
		got := typesOf(s.evs, protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved)
		if diff := cmp.Diff([]string{protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s\n%s", s.name, diff, evetest.Join(s.evs))
		}
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-typed-depth2-root")
	saveTaskHistory(t, env, midID+"/turn_0", "turn-subagent-typed-depth2-mid")
}

// fourEyesAgent delegates to the demo's researcher, whose fetch_paper a
// response policy judges: only bob may settle it (not the requester).
func fourEyesAgent(t *testing.T) *agent.Agent {
	t.Helper()
	researcher, err := demo.Researcher()
	if err != nil {
		t.Fatal(err)
	}
	fetch, ok := researcher.Tools.Get("fetch_paper")
	if !ok {
		t.Fatal("the researcher has no fetch_paper")
	}
	fetch.Approval = fetch.Approval.WithResponse(func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
		if c.Response.Principal != nil && c.Response.Principal.ID == "bob" {
			return approval.Allow(), nil
		}
		return approval.Reject("a second person approves fetches"), nil
	})
	m, err := scripted.Parse([]byte(`
name: root
rules:
  - match: '^ask (?P<m>.+)$'
    steps:
      - calls: [{tool: researcher, input: {message: "{{m}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "The researcher says: {{task.researcher}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Name: "root", Model: m, Tools: tools.NewRegistry(), LocalModel: true, Subagents: []*agent.Agent{researcher}}
}

// A proxied approval a response policy judges: another person's typed
// answer goes down too, and the child's policy judges each sender. alice
// (the requester) types "approve": the root takes it, the child's policy
// refuses her (approval.candidate rejected, relayed), the request stays
// the first open prompt; bob types "approve": the root session offers it
// to the turn (the mirror names the request judged), the child's policy
// allows him, fetch_paper runs once and the reply arrives in the same turn.
// Recording saves the root turn (v0.5.0-turn-subagent-typed-judged.json).
func TestSubagentTypedJudged(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(fourEyesAgent(t))
	id, evs := parkedOn(t, env, "ask fetch tidal power")
	_, child := firstChild(t, id, evs)
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	rid := req.Requests[0].RequestID
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: alice}); res.TurnID != "turn_0" {
		t.Fatalf("alice's approve: %+v, want it taken by turn_0", res)
	}
	candidates := func(evs []protocol.Event) []string {
		var got []string
		for _, e := range evetest.Of(evs, protocol.ApprovalCandidate) {
			var d protocol.ApprovalCandidateData
			_ = e.Decode(&d)
			got = append(got, d.ResponderPrincipalID+" "+d.Outcome)
		}
		return got
	}
	waitFor(t, env, id, func(evs []protocol.Event) bool { return len(candidates(evs)) == 2 })
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: bob}); res.TurnID != "turn_0" {
		t.Fatalf("bob's approve: %+v, want it taken by turn_0", res)
	}
	evs = waitFor(t, env, id, idle(1))
	cevs := waitFor(t, env, child, idle(1))
	if got, want := lastReply(t, evs), "The researcher says: Fetched: the paper on tidal power (12 pages)"; got != want {
		t.Errorf("reply %q, want %q", got, want)
	}
	for _, s := range []struct {
		name string
		evs  []protocol.Event
	}{{"root", evs}, {"child", cevs}} {
		// The settlement is bob's: an allowed candidate ends in approval.settled.
		if diff := cmp.Diff([]string{"alice pending", "alice rejected", "bob pending"}, candidates(s.evs)); diff != "" {
			t.Errorf("%s's candidates (-want +got):\n%s\n%s", s.name, diff, evetest.Join(s.evs))
		}
		want := []string{"settled " + rid + " " + protocol.OutcomeApproved, "resolved " + rid + " " + protocol.OutcomeApproved}
		if diff := cmp.Diff(want, settlements(s.evs)); diff != "" {
			t.Errorf("%s's settlement (-want +got):\n%s\n%s", s.name, diff, evetest.Join(s.evs))
		}
	}
	var st protocol.ApprovalSettledData
	_ = evetest.Of(cevs, protocol.ApprovalSettled)[0].Decode(&st)
	if st.ResponderPrincipalID != "bob" {
		t.Errorf("child's approval.settled %+v, want settled by bob", st)
	}
	if n := fetchRuns(cevs); n != 1 {
		t.Errorf("fetch_paper ran %d times, want 1", n)
	}
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Errorf("%d turns on the root, want 1", n)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-typed-judged")
}

// Exactly once: the root turn's workflow task that takes a typed
// "approve" and routes it down fails once after issuing the signal and is
// retried: the message is read once, one answer goes down, the tool runs
// once.
func TestSubagentTypedOnce(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	down := &failRule{why: "routes a typed answer down", match: func(name string, _ any) bool { return name == signals.SignalRespond }}
	env.StartWorkerWith(a, worker.Options{Interceptors: []interceptor.WorkerInterceptor{&failTurnSignal{rules: []*failRule{down}}}})
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "ask researcher fetch wind farms", Caller: alice})
	waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
	if res := send(t, env, id, signals.SendRequest{Message: "approve", Caller: alice}); res.TurnID != "turn_0" {
		t.Fatalf("approve: %+v, want it taken by turn_0", res)
	}
	evs := waitFor(t, env, id, idle(1))
	if got := lastReply(t, evs); !strings.HasPrefix(got, "The researcher says: Fetched: the paper on wind farms (12 pages).") {
		t.Errorf("reply %q", got)
	}
	if down.failed.Load() != 1 {
		t.Fatalf("the task that routes the answer down failed %d times, want 1", down.failed.Load())
	}
	if got, want := receivedByTurn(evs), []string{"turn_0 ask researcher fetch wind farms", "turn_0 approve"}; !cmp.Equal(got, want) {
		t.Errorf("message.received %q, want %q", got, want)
	}
	if got := typesOf(evs, protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved); !cmp.Equal(got, []string{protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved}) {
		t.Errorf("root %v: %s", got, evetest.Join(evs))
	}
	_, child := firstChild(t, id, evs)
	if n := fetchRuns(waitFor(t, env, child, idle(1))); n != 1 {
		t.Errorf("fetch_paper ran %d times, want 1", n)
	}
	sent, failed := 0, 0
	it := env.Client.GetWorkflowHistory(ctx, id+"/turn_0", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			failed++
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			if e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == signals.SignalRespond {
				sent++
			}
		}
	}
	if sent != 1 || failed < 1 {
		t.Errorf("root turn: %d answers routed down (want 1), %d failed tasks", sent, failed)
	}
}

// greeterAgent delegates to a greeter whose greet tool asks its person for
// a name in the middle of its call (tools.Context.Ask, free text).
func greeterAgent(t *testing.T) *agent.Agent {
	t.Helper()
	greeter := askingAgent(t)
	greeter.Name, greeter.Description = "greeter", "Greets a person by name."
	greeterModel, err := scripted.Parse([]byte(`
name: greeter
rules:
  - match: 'Caller message:'
    steps:
      - calls: [{tool: greet}]
      - reply: "{{result.greet.greeting}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	greeter.Model, greeter.LocalModel = greeterModel, true
	m, err := scripted.Parse([]byte(`
name: root
rules:
  - match: '^greet (?P<m>.+)$'
    steps:
      - calls: [{tool: greeter, input: {message: "{{m}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "The greeter says: {{task.greeter}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Name: "root", Model: m, Tools: tools.NewRegistry(), LocalModel: true, Subagents: []*agent.Agent{greeter}}
}

// A proxied question answered by text: the greeter's call asks for a name
// (free text), the question is proxied to the root, and "Ada" typed to the
// root answers it: the root records message.received, then input.resolved
// (answered, with the text) as the answer goes down; the call gets "Ada".
// Recording saves the root turn (v0.5.0-turn-subagent-typed-question.json).
func TestSubagentTypedQuestion(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(greeterAgent(t))
	ctx := env.Ctx(2 * time.Minute)
	id, evs := parkedOn(t, env, "greet the visitor")
	ts, _ := firstChild(t, id, evs)
	var req protocol.InputRequestedData
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	if len(req.Requests) != 1 || req.Requests[0].Kind != protocol.KindQuestion || req.TaskID != ts.TaskID {
		t.Fatalf("proxied input.requested %+v", req)
	}
	if res := send(t, env, id, signals.SendRequest{Message: "Ada", Caller: alice}); res.TurnID != "turn_0" {
		t.Fatalf("Ada: %+v, want it taken by turn_0", res)
	}
	evs = waitFor(t, env, id, idle(1))
	if got, want := lastReply(t, evs), "The greeter says: Hello, Ada"; got != want {
		t.Errorf("reply %q, want %q: %s", got, want, evetest.Join(evs))
	}
	got := typesOf(evs, protocol.MessageReceived, protocol.InputRequested, protocol.InputResolved)
	want := []string{protocol.MessageReceived, protocol.InputRequested, protocol.MessageReceived, protocol.InputResolved}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("root (-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
	res := resolutions(evs)
	if len(res) != 1 || res[0].Outcome != protocol.OutcomeAnswered || res[0].Response == nil || res[0].Response.Text != "Ada" {
		t.Errorf("root's resolutions %+v", res)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-typed-question")

	// Answered through inputResponses, the question resolves on the root
	// once too: before the change the root could also record the child's
	// relayed resolution when it arrived with the signal's delivery.
	id2, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id2, signals.SendRequest{Message: "greet the guest", Caller: alice})
	evs = waitFor(t, env, id2, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
	_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
	if _, err := env.Sessions.Respond(ctx, id2, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.Requests[0].RequestID, Text: "Grace"}}, Responder: alice}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id2, idle(1))
	if got, want := lastReply(t, evs), "The greeter says: Hello, Grace"; got != want {
		t.Errorf("reply %q, want %q", got, want)
	}
	if res := resolutions(evs); len(res) != 1 || res[0].Response == nil || res[0].Response.Text != "Grace" {
		t.Errorf("root's resolutions %+v: %s", res, evetest.Join(evs))
	}
}
