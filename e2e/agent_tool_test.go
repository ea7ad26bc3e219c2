package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// agentToolRules script the root and its copy alike (one model): the root
// delegates with eve's built-in agent tool; the copy, whose first message
// is eve's prompt for a root copy, looks up with the root's own tool, and
// its own attempt to delegate again reads that it has no such tool.
const agentToolRules = `
name: copy
default: "Hello."
rules:
  - match: '(?m)^Caller message:\s*delegate again$'
    steps:
      - calls: [{tool: agent, input: {message: "deeper"}}]
      - reply: "the copy could not: {{result.agent.code}}"
  - match: '(?m)^Caller message:\s*find (?P<key>\w+)$'
    steps:
      - calls: [{tool: lookup, input: {key: "{{key}}"}}]
      - reply: "the copy found {{result.lookup.value}}"
  - match: '^delegate (?P<task>.+)$'
    steps:
      - calls: [{tool: agent, input: {message: "{{task}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "The copy says: {{task.agent}}"
`

// TestAgentTool (docs/subagents.md, "The built-in agent tool"): an agent
// with AgentTool delegates to a copy of itself, a child session on the
// queue <tq>/agent with the root's tools; the copy cannot delegate again.
func TestAgentTool(t *testing.T) {
	env := evetest.New(t)
	lookup := tools.Func("lookup", "Looks a key up.", func(_ *tools.Context, in struct {
		Key string `json:"key"`
	}) (map[string]string, error) {
		return map[string]string{"value": "v-" + in.Key}, nil
	})
	a := evetest.Agent(t, agentToolRules, lookup)
	a.AgentTool = true
	env.StartWorker(a)

	for _, c := range []struct {
		name, message, reply, childReply string
	}{
		{"delegates", "delegate find k1", "The copy says: the copy found v-k1", "the copy found v-k1"},
		{"cannot delegate again", "delegate delegate again", "The copy says: the copy could not: " + protocol.CodeToolNotFound, "the copy could not: " + protocol.CodeToolNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: c.message, Caller: alice})
			evs := waitFor(t, env, id, idle(1))
			if got := lastReply(t, evs); got != c.reply {
				t.Errorf("reply %q, want %q: %s", got, c.reply, evetest.Join(evs))
			}
			started := evetest.Of(evs, protocol.AgentStarted)
			if len(started) != 1 {
				t.Fatalf("%d agent.started: %s", len(started), evetest.Join(evs))
			}
			var as protocol.AgentStartedData
			_ = started[0].Decode(&as)
			if as.Name != "agent" || !strings.HasPrefix(as.TaskID, "agent-") {
				t.Errorf("agent.started %+v", as)
			}
			cevs := waitFor(t, env, as.SessionID, idle(1))
			if got := lastReply(t, cevs); got != c.childReply {
				t.Errorf("the copy's reply %q, want %q", got, c.childReply)
			}
			var first protocol.MessageReceivedData
			_ = evetest.Of(cevs, protocol.MessageReceived)[0].Decode(&first)
			want := "You are the subagent \"agent\".\n\nThe caller delegated the following task to you. Complete it and return the result directly. The caller may send follow-up messages after you answer.\n\nCaller message:\n" + strings.TrimPrefix(c.message, "delegate ")
			if diff := cmp.Diff(want, first.Message); diff != "" {
				t.Errorf("the copy's first message (-want +got):\n%s", diff)
			}
			if n := len(evetest.Of(cevs, protocol.AgentStarted)); n != 0 {
				t.Errorf("the copy started %d children", n)
			}
		})
	}
}
