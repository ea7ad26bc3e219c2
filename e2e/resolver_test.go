package e2e

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
)

func constTool(name, desc, answer string) *tools.Tool {
	return &tools.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]string{"answer": answer}, nil }}
}

const resolverRules = `
rules:
  - match: search
    steps:
      - calls: [{tool: connection_search}]
      - reply: "{{result.connection_search.answer}}{{result.connection_search.code}}"
  - match: lookup
    steps:
      - calls: [{tool: lookup}]
      - reply: "{{result.lookup.answer}}"
  - match: ask
    steps:
      - calls: [{tool: ask_question, input: {question: "?"}}]
      - reply: "{{result.ask_question.code}}"
`

func TestResolversOverrideProtectAndDisable(t *testing.T) {
	env := evetest.New(t)
	var turnCalls atomic.Int32
	a := evetest.Agent(t, resolverRules, constTool("lookup", "Static lookup.", "static"))
	a.Disable = []string{"ask_question", "connection_search"}
	a.Resolvers = []tools.Resolver{
		{Name: "connections", Scope: tools.ScopeTurn, System: true, Resolve: func(ctx tools.ResolveContext) ([]*tools.Tool, error) {
			turnCalls.Add(1)
			return []*tools.Tool{constTool("connection_search", "Search connections.", "found for "+ctx.TurnID)}, nil
		}},
		{Name: "app", Scope: tools.ScopeStep, Resolve: func(ctx tools.ResolveContext) ([]*tools.Tool, error) {
			return []*tools.Tool{constTool("lookup", "Dynamic lookup.", "dynamic")}, nil
		}},
	}
	// Disabling a name that matches nothing static fails registration...
	if err := agent.Register(worker.New(env.Client, env.TaskQueue+"-x", worker.Options{}), a, agent.Host{}); err == nil || !strings.Contains(err.Error(), `disable "connection_search"`) {
		t.Fatalf("register: %v", err)
	}
	a.Disable = []string{"ask_question"}
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "search", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	// ...and a system resolver's tool is there regardless.
	if res.Outcome.Reply != "found for turn_0" {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	if r := env.SendAndWait(ctx, res.SessionID, "lookup"); r.Outcome.Reply != "dynamic" {
		t.Fatalf("an authored dynamic tool must override the static one: %q", r.Outcome.Reply)
	}
	if r := env.SendAndWait(ctx, res.SessionID, "ask"); r.Outcome.Reply != protocol.CodeToolNotFound {
		t.Fatalf("a disabled built-in must be gone: %q", r.Outcome.Reply)
	}
	if n := turnCalls.Load(); n != 3 {
		t.Fatalf("turn resolver ran %d times for 3 turns", n)
	}
}

func TestTwoResolversSameNameIsClearError(t *testing.T) {
	env := evetest.New(t)
	a := evetest.Agent(t, resolverRules)
	mk := func(name string) tools.Resolver {
		return tools.Resolver{Name: name, Scope: tools.ScopeTurn, Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) {
			return []*tools.Tool{constTool("lookup", "x", name)}, nil
		}}
	}
	a.Resolvers = []tools.Resolver{mk("one"), mk("two")}
	env.StartWorker(a)
	res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", nil, signals.SendRequest{Message: "lookup", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != signals.TurnStatusFailed || !strings.Contains(res.Outcome.Error, `resolvers "one" and "two" both return a tool named "lookup"`) {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
}

func TestSessionResolverRunsOnce(t *testing.T) {
	env := evetest.New(t)
	var calls atomic.Int32
	a := evetest.Agent(t, resolverRules)
	a.Resolvers = []tools.Resolver{{Name: "s", Scope: tools.ScopeSession, Resolve: func(ctx tools.ResolveContext) ([]*tools.Tool, error) {
		calls.Add(1)
		return []*tools.Tool{constTool("lookup", "x", "session:"+ctx.Session.Auth.Initiator.ID)}, nil
	}}}
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "lookup", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	r2 := env.SendAndWait(ctx, res.SessionID, "lookup")
	if res.Outcome.Reply != "session:alice" || r2.Outcome.Reply != "session:alice" || calls.Load() != 1 {
		t.Fatalf("replies %q %q, resolver calls %d", res.Outcome.Reply, r2.Outcome.Reply, calls.Load())
	}
}
