package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// methodLog stands in front of an MCP server and records the JSON-RPC
// methods of the requests it forwards; first, when set, is closed at the
// first request of method at.
type methodLog struct {
	mu      sync.Mutex
	methods []string
	at      string
	first   chan struct{}
}

func (l *methodLog) handler(target string) http.Handler {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
			l.mu.Lock()
			l.methods = append(l.methods, msg.Method)
			if l.first != nil && msg.Method == l.at {
				close(l.first)
				l.first = nil
			}
			l.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	})
}

func (l *methodLog) count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.methods {
		if m == method {
			n++
		}
	}
	return n
}

const taskRules = `
rules:
  - match: research
    steps:
      - calls: [{tool: everything__simulate-research-query, input: {topic: "durable execution"}}]
      - reply: "{{result.everything__simulate-research-query.code}}{{result.everything__simulate-research-query.content}}"
  - match: found
    steps:
      - calls: [{tool: connections__call, input: {name: everything__simulate-research-query, input: {topic: "search mode"}}}]
      - reply: "{{result.connections__call.code}}{{result.connections__call.content}}"
  - match: ambiguous
    steps:
      - calls: [{tool: everything__simulate-research-query, input: {topic: "python", ambiguous: true}}]
      - reply: "{{result.everything__simulate-research-query.code}}{{result.everything__simulate-research-query.content}}"
`

// A remote tool the reference server runs as an MCP task: the call sends
// tools/call with a task, follows it with tasks/get and reads tasks/result;
// a task that needs input has its elicitation asked of the session's
// person; cancelling the turn cancels the task on the server.
func TestConnectionMCPTask(t *testing.T) {
	upstream := everythingHTTP(t)
	setup := func(t *testing.T) (*evetest.Env, *methodLog) {
		log := &methodLog{}
		proxy := httptest.NewServer(log.handler(upstream))
		t.Cleanup(proxy.Close)
		set, err := connections.Static(&connections.Connection{Name: "everything", MCP: &connections.MCP{URL: proxy.URL + "/mcp"},
			Allow: []string{"simulate-research-query"}})
		if err != nil {
			t.Fatal(err)
		}
		env := evetest.New(t)
		env.StartWorker(connectionAgent(t, taskRules, set))
		return env, log
	}

	t.Run("completes", func(t *testing.T) {
		env, log := setup(t)
		res := env.SendAndWait(env.Ctx(60*time.Second), mustSession(t, env), "research")
		if res.Outcome == nil || !strings.Contains(res.Outcome.Reply, "Research Report: durable execution") {
			t.Fatalf("outcome: %+v", res.Outcome)
		}
		if log.count("tools/call") != 1 || log.count("tasks/get") < 1 || log.count("tasks/result") != 1 {
			t.Fatalf("the call must run as a task (tools/call, tasks/get, tasks/result): %v", log.methods)
		}
	})

	// Over stdio the task runs on a process the call holds (it would end
	// with its worker), and its question reaches the call's person.
	t.Run("stdio", func(t *testing.T) {
		set, err := connections.Static(&connections.Connection{Name: "everything", MCP: everythingStdio(t), Allow: []string{"simulate-research-query"}})
		if err != nil {
			t.Fatal(err)
		}
		env := evetest.New(t)
		env.StartWorker(connectionAgent(t, taskRules, set))
		ctx := env.Ctx(90 * time.Second)
		sid := mustSession(t, env)
		if res := env.SendAndWait(ctx, sid, "research"); res.Outcome == nil || !strings.Contains(res.Outcome.Reply, "Research Report: durable execution") {
			t.Fatalf("outcome: %+v", res.Outcome)
		}
		if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "ambiguous"}); err != nil {
			t.Fatal(err)
		}
		q := firstQuestion(t, env, sid)
		if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, Text: "comedy"}}, Wait: true}); err != nil {
			t.Fatal(err)
		}
		env.WaitIdle(sid)
		if reply := env.Reply(sid); !strings.Contains(reply, "Research Report: python (comedy)") {
			t.Fatalf("reply %q", reply)
		}
	})

	t.Run("in search mode", func(t *testing.T) {
		set, err := connections.Static(&connections.Connection{Name: "everything", MCP: &connections.MCP{URL: upstream}})
		if err != nil {
			t.Fatal(err)
		}
		set.SearchAbove = 5
		env := evetest.New(t)
		env.StartWorker(connectionAgent(t, taskRules, set))
		res := env.SendAndWait(env.Ctx(60*time.Second), mustSession(t, env), "found")
		if res.Outcome == nil || !strings.Contains(res.Outcome.Reply, "Research Report: search mode") {
			t.Fatalf("outcome: %+v", res.Outcome)
		}
	})

	t.Run("input required", func(t *testing.T) {
		env, _ := setup(t)
		ctx := env.Ctx(90 * time.Second)
		sid := mustSession(t, env)
		if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "ambiguous"}); err != nil {
			t.Fatal(err)
		}
		q := firstQuestion(t, env, sid)
		if !strings.Contains(q.Prompt, "could have multiple interpretations") || q.Action.ToolName != "everything__simulate-research-query" {
			t.Fatalf("the task's elicitation: %+v", q)
		}
		if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, Text: "snake"}}, Wait: true}); err != nil {
			t.Fatal(err)
		}
		env.WaitIdle(sid)
		if reply := env.Reply(sid); !strings.Contains(reply, "Research Report: python (snake)") {
			t.Fatalf("reply %q", reply)
		}
	})

	t.Run("cancelled with the turn", func(t *testing.T) {
		env, log := setup(t)
		ctx := env.Ctx(90 * time.Second)
		sid := mustSession(t, env)
		if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "ambiguous"}); err != nil {
			t.Fatal(err)
		}
		// Parked on the task's question: cancel the turn.
		waitFor(t, env, sid, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
		if res, err := env.Sessions.Control(ctx, sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil || res.Status != signals.ControlAccepted {
			t.Fatalf("cancel: %+v %v", res, err)
		}
		evs := env.WaitIdle(sid)
		if !slices.ContainsFunc(evs, func(e protocol.Event) bool { return e.Type == protocol.TurnCancelled }) {
			t.Fatalf("events: %s", evetest.Join(evs))
		}
		deadline := time.Now().Add(30 * time.Second)
		for log.count("tasks/cancel") == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the task was not cancelled on the server: %v", log.methods)
			}
			time.Sleep(100 * time.Millisecond) // polling the proxy's log, not a barrier
		}
	})
}

// firstQuestion waits for the session's first input request.
func firstQuestion(t *testing.T, env *evetest.Env, sid string) protocol.InputRequest {
	t.Helper()
	var q protocol.InputRequest
	waitFor(t, env, sid, func(evs []protocol.Event) bool {
		for _, e := range evetest.Of(evs, protocol.InputRequested) {
			var d protocol.InputRequestedData
			e.Decode(&d)
			q = d.Requests[0]
		}
		return q.RequestID != ""
	})
	return q
}

func mustSession(t *testing.T, env *evetest.Env) string {
	t.Helper()
	id, err := env.Sessions.Create(env.Ctx(10*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A remote tool whose server offers the 2026-07-28 tasks extension
// (eve's own MCP server over streamable HTTP, whose extension passes the
// official conformance suite's tasks-* scenarios): the call runs it
// statelessly as a task, asks the session's person what the task waits
// for (two elicitations, answered together in one tasks/update), and reads the
// result from tasks/get.
func TestConnectionMCPTaskExtension(t *testing.T) {
	server := evetest.New(t)
	peer := evetest.Agent(t, `rules: []`, askTwoTool())
	startExecutionWorker(t, server, peer)
	svc, err := toolsapi.New(toolsapi.Options{Client: server.Client, TaskQueue: server.TaskQueue, Agent: peer})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "alice", TaskTools: map[string]string{"test.ask_two": "required"}})
	if err != nil {
		t.Fatal(err)
	}
	log := &methodLog{}
	upstream := httptest.NewServer(ms.HTTPHandler(nil))
	t.Cleanup(upstream.Close)
	hs := httptest.NewServer(log.handler(upstream.URL))
	t.Cleanup(hs.Close)

	set, err := connections.Static(&connections.Connection{Name: "peer", MCP: &connections.MCP{URL: hs.URL}})
	if err != nil {
		t.Fatal(err)
	}
	env := evetest.New(t)
	env.StartWorker(connectionAgent(t, `
rules:
  - match: names
    steps:
      - calls: [{tool: peer__test_ask_two}]
      - reply: "{{result.peer__test_ask_two.code}}{{result.peer__test_ask_two.content}}"
`, set))
	ctx := env.Ctx(90 * time.Second)
	sid := mustSession(t, env)
	if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "names"}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"Ada", "Alan"} {
		var q protocol.InputRequest
		waitFor(t, env, sid, func(evs []protocol.Event) bool {
			reqs := evetest.Of(evs, protocol.InputRequested)
			if len(reqs) <= i || evs[len(evs)-1].Type != protocol.TurnWaiting {
				return false
			}
			var d protocol.InputRequestedData
			reqs[i].Decode(&d)
			q = d.Requests[0]
			return true
		})
		if !strings.Contains(q.Prompt, "peer asks: Name?") {
			t.Fatalf("question %d: %+v", i, q)
		}
		if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, Text: `{"name":"` + name + `"}`}}, Wait: true}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitIdle(sid)
	if reply := env.Reply(sid); !strings.Contains(reply, "Ada") || !strings.Contains(reply, "Alan") {
		t.Fatalf("reply %q", reply)
	}
	if log.count("server/discover") == 0 || log.count("tasks/update") != 1 || log.count("tasks/result") != 0 || log.count("initialize") != 0 {
		t.Fatalf("the call must run as a task of the extension (server/discover, tasks/get, tasks/update; no session): %v", log.methods)
	}
}
