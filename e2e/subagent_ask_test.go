package e2e

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/tools/wfcall"
)

const subAskRootRules = `
name: quizroot
rules:
  - match: '^(?P<tool>quiz|wfquiz) (?P<a>\w+) (?P<b>\w+)$'
    steps:
      - calls:
          - {tool: quizzer, input: {message: "{{tool}} {{a}}"}}
          - {tool: quizzer, input: {message: "{{tool}} {{b}}"}}
      - reply: "The quizzers are done."
`

const subAskHelperRules = `
name: quizzer
rules:
  - match: '(?m)^Caller message:\s*quiz (?P<topic>\w+)$'
    steps:
      - calls: [{tool: quiz, input: {topic: "{{topic}}"}}]
      - reply: "answered {{result.quiz}}"
  - match: '(?m)^Caller message:\s*wfquiz (?P<topic>\w+)$'
    steps:
      - calls: [{tool: wfquiz, input: {topic: "{{topic}}"}}]
      - reply: "answered {{result.wfquiz}}"
`

// quizWorkflow is the quizzer's workflow tool wfquiz: it asks its call's
// person (tools/wfcall) under the key "year".
func quizWorkflow(ctx workflow.Context, in demo.SourcesInput) (string, error) {
	ans, err := wfcall.Ask(ctx, "year", wfcall.Question{Prompt: "Which year for " + in.Topic + "?", AllowFreeform: true})
	if err != nil {
		return "", err
	}
	return in.Topic + " " + ans.Outcome + " " + ans.Text, nil
}

// subAskAgent delegates, in one step, to two quizzers whose tool asks its
// person a question mid-call: quiz an activity's (tools.Context.Ask), wfquiz
// a workflow tool's (wfcall.Ask). The scripted model numbers call ids per
// conversation, so both children's calls are call_1_0.
func subAskAgent(t *testing.T) *agent.Agent {
	t.Helper()
	root, err := scripted.Parse([]byte(subAskRootRules))
	if err != nil {
		t.Fatal(err)
	}
	helper, err := scripted.Parse([]byte(subAskHelperRules))
	if err != nil {
		t.Fatal(err)
	}
	quiz := tools.Func("quiz", "Asks which year, about a topic.", func(ctx *tools.Context, in demo.SourcesInput) (string, error) {
		ans, err := ctx.Ask(tools.InputRequest{Prompt: "Which year for " + in.Topic + "?", AllowFreeform: true})
		if err != nil {
			return "", err
		}
		return in.Topic + " " + ans.Outcome + " " + ans.Text, nil
	})
	wfquiz := tools.DefineWorkflow("wfquiz", "Asks which year, about a topic (a workflow).",
		json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}`),
		nil, tools.Workflow{Type: "E2EQuiz", ExecutionTimeout: time.Hour})
	reg := tools.NewRegistry()
	reg.MustRegister(quiz, wfquiz)
	return &agent.Agent{Name: "quizroot", Model: root, Tools: tools.NewRegistry(), LocalModel: true,
		Subagents: []*agent.Agent{{Name: "quizzer", Description: "Asks a question.", Model: helper, Tools: reg, LocalModel: true,
			RegisterWorker: func(w worker.Registry) {
				w.RegisterWorkflowWithOptions(quizWorkflow, workflow.RegisterOptions{Name: "E2EQuiz"})
			}}}}
}

// Two children whose tools ask at once with the same call id (issue 38,
// changeSubagentAskIDs): each child's turn hands its call its session's
// tag, so the questions are proxied to the root as
// ask_<tag>_call_1_0_<n> (an activity's, numbered) or
// ask_<tag>_call_1_0_<key> (a workflow tool's), two ids, both open at
// once; answered through the root in one answer, each child's tool reads
// its own answer. Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the root turn and a child's turn of each
// (v0.5.0-turn-subagent-ask-ids-*.json).
func TestSubagentToolAsksAtOnce(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(subAskAgent(t))
	for _, tc := range []struct {
		name, tool, key, record string
	}{
		{name: "activity", tool: "quiz", key: "1", record: ""},
		{name: "workflow tool", tool: "wfquiz", key: "year", record: "-wf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := env.Ctx(3 * time.Minute)
			id, err := env.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: tc.tool + " tides winds", Caller: alice})

			evs := waitWithin(t, env, id, time.Minute, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 2 })
			calls := map[string]string{} // root call id → task id
			for _, e := range evetest.Of(evs, protocol.TaskStarted) {
				var d protocol.TaskStartedData
				_ = e.Decode(&d)
				calls[d.CallID] = d.TaskID
			}
			requests := map[string]string{} // topic → proxied request id
			children := map[string]string{} // topic → child session
			tasks := map[string]string{}    // topic → task id
			for _, e := range evetest.Of(evs, protocol.InputRequested) {
				var d protocol.InputRequestedData
				_ = e.Decode(&d)
				if len(d.Requests) != 1 || calls[d.CallID] == "" {
					t.Fatalf("proxied input.requested %+v", d)
				}
				r := d.Requests[0]
				var in demo.SourcesInput
				_ = json.Unmarshal(r.Action.Input, &in)
				if r.Kind != protocol.KindQuestion || r.Prompt != "Which year for "+in.Topic+"?" || r.Action.CallID != "call_1_0" || r.Action.ToolName != tc.tool {
					t.Errorf("proxied question %+v", r)
				}
				child := signals.SubagentSessionID(id, calls[d.CallID])
				if want := "ask_" + requestTag(child) + "_call_1_0_" + tc.key; r.RequestID != want {
					t.Errorf("%s: request id %q, want %q", in.Topic, r.RequestID, want)
				}
				requests[in.Topic], children[in.Topic], tasks[in.Topic] = r.RequestID, child, calls[d.CallID]
			}
			if len(requests) != 2 || requests["tides"] == requests["winds"] {
				t.Fatalf("proxied questions by topic %v, want two ids apart for tides and winds", requests)
			}
			// Both children's turns wait on their question at once.
			for _, child := range children {
				waitFor(t, env, child, func(evs []protocol.Event) bool {
					return len(evetest.Of(evs, protocol.InputRequested)) == 1 && evs[len(evs)-1].Type == protocol.TurnWaiting
				})
			}

			if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responder: alice, Responses: []protocol.InputResponse{
				{RequestID: requests["tides"], Text: "1999"}, {RequestID: requests["winds"], Text: "2024"}}}); err != nil {
				t.Fatal(err)
			}
			evs = waitWithin(t, env, id, time.Minute, idle(1))
			if got := lastReply(t, evs); got != "The quizzers are done." {
				t.Errorf("root reply %q", got)
			}
			want := map[string][]string{
				tasks["tides"]: {"completed answered tides answered 1999"},
				tasks["winds"]: {"completed answered winds answered 2024"},
			}
			if diff := cmp.Diff(want, settledByTask(t, evs)); diff != "" {
				t.Errorf("each call settled once with its own answer (-want +got):\n%s\n%s", diff, evetest.Join(evs))
			}
			var got []string
			for _, r := range resolutions(evs) {
				got = append(got, r.RequestID+" "+r.Outcome)
			}
			sort.Strings(got)
			wantRes := []string{requests["tides"] + " " + protocol.OutcomeAnswered, requests["winds"] + " " + protocol.OutcomeAnswered}
			sort.Strings(wantRes)
			if diff := cmp.Diff(wantRes, got); diff != "" {
				t.Errorf("root: each proxied question resolved once (-want +got):\n%s", diff)
			}
			for topic, answer := range map[string]string{"tides": "1999", "winds": "2024"} {
				cevs := waitWithin(t, env, children[topic], time.Minute, idle(1))
				if got := typesOf(cevs, protocol.TurnStarted, protocol.TurnCompleted); !cmp.Equal(got, []string{protocol.TurnStarted, protocol.TurnCompleted}) {
					t.Errorf("%s: child turns %v", topic, got)
				}
				if got, want := lastReply(t, cevs), "answered "+topic+" answered "+answer; got != want {
					t.Errorf("%s: child reply %q, want %q", topic, got, want)
				}
				var res []string
				for _, r := range resolutions(cevs) {
					res = append(res, r.RequestID+" "+r.Outcome)
				}
				if diff := cmp.Diff([]string{requests[topic] + " " + protocol.OutcomeAnswered}, res); diff != "" {
					t.Errorf("%s: the child's question resolved once (-want +got):\n%s", topic, diff)
				}
			}
			if !t.Failed() {
				saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-ask-ids"+tc.record+"-root")
				saveTaskHistory(t, env, children["tides"]+"/turn_0", "turn-subagent-ask-ids"+tc.record+"-child")
			}
		})
	}
}
