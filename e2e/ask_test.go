package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// askingAgent's greet tool asks the session's person for a name in the
// middle of its call (tools.Context.Ask).
func askingAgent(t *testing.T) *agent.Agent {
	greet := tools.Func("greet", "Greet the user by name, asking for it.",
		func(ctx *tools.Context, _ struct{}) (map[string]any, error) {
			ans, err := ctx.Ask(tools.InputRequest{Prompt: "What is your name?", AllowFreeform: true})
			if err != nil {
				return nil, err
			}
			return map[string]any{"outcome": ans.Outcome, "greeting": "Hello, " + ans.Text}, nil
		})
	return evetest.Agent(t, `
rules:
  - match: greet
    steps:
      - calls: [{tool: greet}]
      - reply: "{{result.greet.outcome}}: {{result.greet.greeting}}"
`, greet)
}

// waitAsked waits until the session's turn waits on a question its call
// asked, and returns it.
func waitAsked(t *testing.T, env *evetest.Env, sid string) protocol.InputRequest {
	t.Helper()
	var req protocol.InputRequest
	waitFor(t, env, sid, func(evs []protocol.Event) bool {
		last := evetest.Of(evs, protocol.InputRequested)
		if len(last) == 0 || evs[len(evs)-1].Type != protocol.TurnWaiting {
			return false
		}
		var d protocol.InputRequestedData
		last[len(last)-1].Decode(&d)
		req = d.Requests[0]
		return strings.HasPrefix(req.RequestID, "ask_")
	})
	return req
}

// A running call asks its person: the turn records the question as for a
// client tool and waits; the answer reaches the call, which finishes with
// it. A turn cancelled while its call asks settles the question as
// cancelled, and the turn ends cancelled.
func TestToolAsksMidCall(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(askingAgent(t))
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	q := waitAsked(t, env, sid)
	if q.Kind != protocol.KindQuestion || q.Prompt != "What is your name?" || q.Action.ToolName != "greet" || !q.AllowFreeform {
		t.Fatalf("question: %+v", q)
	}
	if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, Text: "Ada"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	evs := env.WaitIdle(sid)
	if r := env.Reply(sid); r != "answered: Hello, Ada" {
		t.Fatalf("reply %q, events %s", r, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.ActionResult)); n != 1 {
		t.Fatalf("%d action results: %s", n, evetest.Join(evs))
	}

	if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "greet"}); err != nil {
		t.Fatal(err)
	}
	q = waitAsked(t, env, sid)
	if _, err := env.Sessions.Control(ctx, sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	var cancelled bool
	for _, e := range evetest.Of(evs, protocol.InputResolved) {
		var d protocol.InputResolvedData
		e.Decode(&d)
		for _, r := range d.Resolutions {
			cancelled = cancelled || r.RequestID == q.RequestID && r.Outcome == protocol.OutcomeCancelled
		}
	}
	if !cancelled || len(evetest.Of(evs, protocol.TurnCancelled)) != 1 {
		t.Fatalf("cancelled while asking: %s", evetest.Join(evs))
	}
}
