package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Session limits (issue 23, item 5; eve's "Runtime limits").

func limitedEnv(t *testing.T, set func(a *agent.Agent)) *evetest.Env {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	set(a)
	env.StartWorker(a)
	return env
}

func lastRequest(t *testing.T, evs []protocol.Event) protocol.InputRequest {
	t.Helper()
	rq := evetest.Of(evs, protocol.InputRequested)
	if len(rq) == 0 {
		t.Fatalf("no input.requested: %s", evetest.Join(evs))
	}
	var d protocol.InputRequestedData
	rq[len(rq)-1].Decode(&d)
	return d.Requests[0]
}

// A session past its input budget parks before the next model call; a
// reply that answers neither option waits behind the prompt; Continue
// resumes the same turn, which reads the reply; the next turn, still past
// the fresh window, parks at once, and Stop cancels it.
func TestSessionLimitContinueStop(t *testing.T) {
	env := limitedEnv(t, func(a *agent.Agent) { a.MaxInputTokensPerSession = 1 })
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Paris", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.SessionID
	evs := env.Events(ctx, id)
	if res.Outcome.Status != signals.TurnStatusWaiting || !strings.HasSuffix(evetest.Join(evs), "action.result step.completed input.requested turn.waiting") {
		t.Fatalf("outcome %+v; events %s", res.Outcome, evetest.Join(evs))
	}
	r := lastRequest(t, evs)
	if r.Kind != protocol.KindSessionLimit || !strings.HasPrefix(r.RequestID, id+":0:limit:input:") ||
		len(r.Options) != 2 || r.Options[0].ID != "continue" || r.Options[1].ID != "stop" || !strings.Contains(r.Prompt, "input-token limit (1) per session") {
		t.Fatalf("request = %+v", r)
	}
	// A non-answer: queued behind the prompt, nothing resolved, no turn.
	if _, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "hello", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	evs = env.Events(ctx, id)
	if len(evetest.Of(evs, protocol.InputResolved)) != 0 || len(evetest.Of(evs, protocol.MessageReceived)) != 1 || evs[len(evs)-1].Type != protocol.TurnWaiting {
		t.Fatalf("the non-answer changed the turn: %s", evetest.Join(evs))
	}
	// Continue: the same turn goes on and reads the queued reply.
	out := respond(t, env, id, protocol.InputResponse{RequestID: r.RequestID, OptionID: "continue"})
	if out.Outcome.Status != signals.TurnStatusCompleted || len(out.Resolutions) != 1 || out.Resolutions[0].Outcome != protocol.OutcomeAnswered {
		t.Fatalf("continue: %+v", out)
	}
	evs = waitFor(t, env, id, idle(1))
	got := evetest.Join(evs)
	if len(evetest.Of(evs, protocol.TurnStarted)) != 1 || !strings.Contains(got, "turn.waiting input.resolved decision.recorded message.received step.started") {
		t.Fatalf("events after continue: %s", got)
	}
	// The next turn is past the fresh window at once; Stop cancels it.
	sent, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "what's the weather in Oslo", Caller: alice, Wait: true})
	if err != nil || sent.Outcome == nil || sent.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("second turn: %+v, %v", sent, err)
	}
	r2 := lastRequest(t, env.Events(ctx, id))
	if r2.Kind != protocol.KindSessionLimit || !strings.HasPrefix(r2.RequestID, id+":1:limit:input:") {
		t.Fatalf("second request = %+v", r2)
	}
	stop := respond(t, env, id, protocol.InputResponse{RequestID: r2.RequestID, Text: "Stop"})
	if stop.Outcome.Status != signals.TurnStatusCancelled {
		t.Fatalf("stop: %+v", stop.Outcome)
	}
	evs = waitFor(t, env, id, idle(2))
	if !strings.HasSuffix(evetest.Join(evs), "input.requested turn.waiting input.resolved decision.recorded turn.cancelled session.waiting") {
		t.Fatalf("events after stop: %s", evetest.Join(evs))
	}
}

// A session nobody can be asked in fails the call with eve's codes.
func TestSessionLimitUnattended(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		set        func(a *agent.Agent)
	}{
		{"tokens", "SESSION_TOKEN_LIMIT_REACHED", func(a *agent.Agent) { a.MaxOutputTokensPerSession = 1 }},
		{"cost", "SESSION_TOKEN_COST_LIMIT_REACHED", func(a *agent.Agent) {
			a.MaxTokenCostPerSession = 0.000001
			a.Prices = map[string]agent.ModelPrice{a.Model.ID(): {InputPerMTok: 1000, OutputPerMTok: 1000}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := limitedEnv(t, func(a *agent.Agent) { a.Unattended = true; tc.set(a) })
			ctx := env.Ctx(30 * time.Second)
			res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Paris", Wait: true})
			if err != nil {
				t.Fatal(err)
			}
			evs := waitFor(t, env, res.SessionID, idle(1))
			var f protocol.TurnFailedData
			tf := evetest.Of(evs, protocol.TurnFailed)
			if len(tf) != 1 || len(evetest.Of(evs, protocol.InputRequested)) != 0 {
				t.Fatalf("events: %s", evetest.Join(evs))
			}
			tf[0].Decode(&f)
			if f.Code != tc.code || res.Outcome.Status != signals.TurnStatusFailed || len(evetest.Of(evs, protocol.StepStarted)) != 1 {
				t.Fatalf("turn.failed = %+v, outcome %+v", f, res.Outcome)
			}
		})
	}
}

// A session's lifetime ends it once idle: session.completed after its
// turn, then its workflow completes and it takes no more messages.
func TestSessionLifetimeEndsSession(t *testing.T) {
	env := limitedEnv(t, func(a *agent.Agent) { a.SessionLifetime = 2 * time.Second })
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Paris", Wait: true})
	if err != nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("turn: %+v, %v", res.Outcome, err)
	}
	// The workflow completes at its deadline; its history keeps the events.
	run := env.Client.GetWorkflow(ctx, res.SessionID, "")
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("session workflow: %v", err)
	}
	it := env.Client.GetWorkflowHistory(ctx, res.SessionID, "", false, 0)
	var last string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		last = e.GetEventType().String()
	}
	if last != "WorkflowExecutionCompleted" {
		t.Fatalf("last history event %s", last)
	}
	// The closed workflow still answers its events query.
	v, err := env.Client.QueryWorkflow(ctx, res.SessionID, "", signals.QueryEvents, signals.EventsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var page signals.EventsPage
	if err := v.Get(&page); err != nil {
		t.Fatal(err)
	}
	evs := page.Events
	if got := evetest.Join(evs); !strings.HasSuffix(got, "turn.completed session.waiting session.completed") {
		t.Fatalf("events: %s", got)
	}
	var d protocol.SessionCompletedData
	evs[len(evs)-1].Decode(&d)
	if d.Usage == nil || d.Usage.InputTokens == 0 {
		t.Fatalf("session.completed = %+v", d)
	}
	if _, err := env.Sessions.Send(ctx, res.SessionID, signals.SendRequest{Message: "hello", Caller: alice}); err == nil {
		t.Fatal("an ended session took a message")
	}
}
