package e2e

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Delegation from code (docs/subagents.md, "Delegate from code"): the
// demo's publish_notes asks its code-only reviewer for a typed review
// (outputSchema) and publishes only when it approves. The reviewer is no
// tool of the demo's model; its child session has one turn per review,
// ending with result.completed. Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the reviewer's turns
// (v0.5.0-turn-output-schema-*.json) and sessions (v0.5.0-session-output-schema-*.json).
func TestDelegateFromCode(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(2 * time.Minute)
	for _, c := range []struct {
		name, message string
		wantReply     string
		wantReview    string
		history       string
	}{
		{name: "approved", message: "publish tidal power is promising",
			wantReply: "published: true https://notes.example/tidal-power-is-promising", wantReview: `{"approved":true,"reason":"clear and complete"}`,
			history: "turn-output-schema-approved"},
		{name: "refused", message: "publish TODO write the notes",
			wantReply: "published: false the notes still have a TODO", wantReview: `{"approved":false,"reason":"the notes still have a TODO"}`,
			history: "turn-output-schema-refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := env.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: c.message, Caller: alice})
			evs := waitFor(t, env, id, idle(1))
			if got := lastReply(t, evs); got != c.wantReply {
				t.Errorf("reply %q, want %q", got, c.wantReply)
			}
			var ar protocol.ActionResultData
			_ = evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
			var pub demo.Publication
			if err := json.Unmarshal(ar.Result.Output, &pub); err != nil {
				t.Fatalf("publish_notes output %s: %v", ar.Result.Output, err)
			}
			key := tools.IdempotencyKey(id, "turn_0", ar.Result.CallID)
			child := signals.CodeAgentSessionID(id, key, "reviewer", 1)
			if pub.Review != child {
				t.Errorf("review session %q, want %q", pub.Review, child)
			}
			// The child: one turn, offered eve__reply, ending with the review.
			cevs := waitFor(t, env, child, idle(1))
			want := []string{protocol.SessionStarted, protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted,
				protocol.StepCompleted, protocol.ResultCompleted, protocol.TurnCompleted, protocol.SessionWaiting}
			if diff := cmp.Diff(want, evetest.Types(cevs)); diff != "" {
				t.Errorf("the reviewer's events (-want +got):\n%s", diff)
			}
			var rc protocol.ResultCompletedData
			_ = evetest.Of(cevs, protocol.ResultCompleted)[0].Decode(&rc)
			if string(rc.Result) != c.wantReview {
				t.Errorf("result.completed %s, want %s", rc.Result, c.wantReview)
			}
			var mr protocol.MessageReceivedData
			_ = evetest.Of(cevs, protocol.MessageReceived)[0].Decode(&mr)
			if !strings.HasPrefix(mr.Message, `You are the subagent "reviewer".`) || !strings.Contains(mr.Message, "Caller message:\nReview these release notes:") {
				t.Errorf("the reviewer's first message %q", mr.Message)
			}
			// The parent's stream announces the child, once.
			started := evetest.Of(evs, protocol.AgentStarted)
			if len(started) != 1 {
				t.Fatalf("%d agent.started on the parent: %s", len(started), evetest.Join(evs))
			}
			var as protocol.AgentStartedData
			_ = started[0].Decode(&as)
			wantStarted := protocol.AgentStartedData{CallID: ar.Result.CallID, TurnID: "turn_0", Name: "reviewer", SessionID: child,
				StreamPath: "/eve/v1/session/" + child + "/stream"}
			if diff := cmp.Diff(wantStarted, as); diff != "" {
				t.Errorf("agent.started (-want +got):\n%s", diff)
			}
			saveTaskHistory(t, env, child+"/turn_0", c.history)
			if c.name == "approved" {
				saveTaskHistory(t, env, id+"/turn_0", "turn-code-agent-announced")
			}
			saveTaskHistory(t, env, child, strings.Replace(c.history, "turn-", "session-", 1))
		})
	}
}

// A delegating call whose attempt fails after its Send is retried: the
// retry opens the same child and its Send joins the first, so the child
// has one turn and the call reads the same result.
func TestDelegateFromCodeOnce(t *testing.T) {
	env := evetest.New(t)
	reviewer, err := demo.Reviewer()
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	var sessionsSeen [3]atomic.Value
	review := tools.Func("review_twice", "Ask the reviewer; the first attempt fails after asking.",
		func(ctx *tools.Context, in demo.NotesInput) (string, error) {
			res, err := ctx.Agent("reviewer").Send("Review these release notes:\n\n"+in.Notes, tools.SendOptions{OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved","reason"]}`)})
			if err != nil {
				return "", err
			}
			n := attempts.Add(1)
			if int(n) < len(sessionsSeen) {
				sessionsSeen[n].Store(res.SessionID)
			}
			if n == 1 {
				return "", errors.New("the first attempt fails after its Send")
			}
			return string(res.Data), nil
		})
	review.Idempotent = true
	review.Timeout = time.Minute
	a := evetest.Agent(t, `
name: once
rules:
  - match: '^review (?P<notes>.+)$'
    steps:
      - calls: [{tool: review_twice, input: {notes: "{{notes}}"}}]
      - reply: "review: {{result.review_twice}}"
`, review)
	a.Subagents = []*agent.Agent{reviewer}
	env.StartWorker(a)
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "review all is well", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	if got := lastReply(t, evs); got != `review: {"approved":true,"reason":"clear and complete"}` {
		t.Errorf("reply %q", got)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	first, second := sessionsSeen[1].Load(), sessionsSeen[2].Load()
	if first == nil || first != second {
		t.Fatalf("the attempts read sessions %v and %v, want the same", first, second)
	}
	cevs := waitFor(t, env, first.(string), idle(1))
	if n := len(evetest.Of(cevs, protocol.TurnStarted)); n != 1 {
		t.Errorf("the child ran %d turns, want 1: %s", n, evetest.Join(cevs))
	}
	if n := len(evetest.Of(cevs, protocol.MessageReceived)); n != 1 {
		t.Errorf("the child read %d messages, want 1", n)
	}
	// Both attempts announced the child; the turn recorded it once.
	if n := len(evetest.Of(evs, protocol.AgentStarted)); n != 1 {
		t.Errorf("%d agent.started on the parent, want 1: %s", n, evetest.Join(evs))
	}
}

// A session a tool's code opens with a subagent relays its people in the
// loop to the root, as eve's ctx.agent does ("a person answers the
// child's questions and sign-ins at the root session"): the researcher's
// fetch approval is asked on the root's stream under the tool's call, the
// root's person answers it there (through the root session, or typing
// "approve" to it), the child's own policy decides it, the tool runs once,
// and the code reads the child's reply. With EVE_RECORD_HISTORIES=1 and
// EVE_RECORD_PREFIX=v0.5.0- it saves the root turn, the child's turn and
// the child session (v0.5.0-*code-agent-proxy*.json).
func TestDelegateFromCodeProxied(t *testing.T) {
	researcher, err := demo.Researcher()
	if err != nil {
		t.Fatal(err)
	}
	ask := tools.Func("ask_researcher", "Ask the researcher to fetch a paper.",
		func(ctx *tools.Context, in struct {
			Topic string `json:"topic"`
		}) (string, error) {
			res, err := ctx.Agent("researcher").Send("fetch "+in.Topic, tools.SendOptions{})
			if err != nil {
				return "", err
			}
			return res.Message, nil
		})
	ask.Timeout = 2 * time.Minute
	a := evetest.Agent(t, `
name: coder
rules:
  - match: '^look into (?P<topic>.+)$'
    steps:
      - calls: [{tool: ask_researcher, input: {topic: "{{topic}}"}}]
      - reply: "the researcher says: {{result.ask_researcher}}"
`, ask)
	a.Subagents = []*agent.Agent{researcher}
	env := evetest.New(t)
	env.StartWorker(a)
	for _, c := range []struct{ name, topic string }{{"respond", "tides"}, {"typed", "reefs"}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := env.Ctx(2 * time.Minute)
			id, err := env.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: "look into " + c.topic, Caller: alice})
			evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 1 })
			var d protocol.InputRequestedData
			_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&d)
			var call protocol.ActionsRequestedData
			_ = evetest.Of(evs, protocol.ActionsRequested)[0].Decode(&call)
			if len(d.Requests) != 1 || d.Requests[0].Kind != protocol.KindToolApproval || d.Requests[0].Action.ToolName != "fetch_paper" || d.CallID != call.Actions[0].CallID {
				t.Fatalf("the root's input.requested %+v, want the researcher's fetch_paper approval under call %s", d, call.Actions[0].CallID)
			}
			if c.name == "typed" {
				send(t, env, id, signals.SendRequest{Message: "approve", Caller: alice})
			} else {
				respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
			}
			evs = waitFor(t, env, id, idle(1))
			want := "the researcher says: Fetched: the paper on " + c.topic
			if got := lastReply(t, evs); !strings.HasPrefix(got, want) {
				t.Fatalf("reply %q, want it to start with %q: %s", got, want, evetest.Join(evs))
			}
			if n := len(evetest.Of(evs, protocol.InputResolved)); n != 1 {
				t.Errorf("%d input.resolved on the root, want 1: %s", n, evetest.Join(evs))
			}
			if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
				t.Errorf("%d turns on the root, want 1 (the typed approve answered, it ran no turn): %s", n, evetest.Join(evs))
			}
			var as protocol.AgentStartedData
			_ = evetest.Of(evs, protocol.AgentStarted)[0].Decode(&as)
			cevs := waitFor(t, env, as.SessionID, idle(1))
			if n := len(evetest.Of(cevs, protocol.ActionResult)); n != 1 {
				t.Errorf("the child settled %d calls, want 1 (fetch_paper, once): %s", n, evetest.Join(cevs))
			}
			// The child sits under the root, as a model-called one: its
			// decision names the root, path and depth (and so do its
			// inbox entries), and its memo places it.
			var dec protocol.Decision
			_ = evetest.Of(cevs, protocol.DecisionRecorded)[0].Decode(&dec)
			wantPath := []protocol.SubagentHop{{Agent: "researcher", SessionID: as.SessionID}}
			if dec.RootSessionID != id || dec.Depth != 1 || !cmp.Equal(dec.Path, wantPath) {
				t.Errorf("the child's decision sits at %q %+v depth %d, want %q %+v depth 1", dec.RootSessionID, dec.Path, dec.Depth, id, wantPath)
			}
			desc, err := env.Client.DescribeWorkflowExecution(ctx, as.SessionID, "")
			if err != nil {
				t.Fatal(err)
			}
			var origin protocol.SubagentOrigin
			if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[signals.MemoOrigin]; p == nil || converter.GetDefaultDataConverter().FromPayload(p, &origin) != nil ||
				origin.RootSessionID != id || !cmp.Equal(origin.Path, wantPath) {
				t.Errorf("the child's memo origin %+v, want root %s path %+v", origin, id, wantPath)
			}
			if c.name == "respond" {
				saveTaskHistory(t, env, id+"/turn_0", "turn-code-agent-proxy-root")
				saveTaskHistory(t, env, as.SessionID+"/turn_0", "turn-code-agent-proxy-child")
				saveTaskHistory(t, env, as.SessionID, "session-code-agent-proxy-child")
			}
		})
	}
}
