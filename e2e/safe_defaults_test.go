package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// rawPost sends one JSON-RPC request to an MCP endpoint, edited by edit.
func rawPost(t *testing.T, url, sid string, n int, method string, params any, edit func(*http.Request)) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func mcpSession(t *testing.T, url string) *rpc {
	t.Helper()
	c := &rpc{t: t, url: url}
	if _, rerr := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "1"},
		"capabilities": map[string]any{"tasks": map[string]any{}}}); rerr != nil || c.sid == "" {
		t.Fatalf("initialize: %v", rerr)
	}
	c.notify("notifications/initialized")
	return c
}

// A task-augmented tools/call (and a plain one) with a bad Host, Origin or
// Content-Type is refused before any tool runs.
func TestMCPRefusedRequestsRunNothing(t *testing.T) {
	starts := &startCounter{}
	e := newTapiEnv(t, starts.wrap)
	s := newMCPServer(t, e)
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	c := mcpSession(t, hs.URL)
	args := map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "attack"}}
	withTask := map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "attack"}, "task": map[string]any{}}
	for i, tc := range []struct {
		name   string
		edit   func(*http.Request)
		status int
	}{
		{"Host attacker.example", func(r *http.Request) { r.Host = "attacker.example" }, 403},
		{"Origin attacker.example", func(r *http.Request) { r.Header.Set("Origin", "http://attacker.example") }, 403},
		{"text/plain", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415},
		{"text/plain and bad Host", func(r *http.Request) {
			r.Host = "attacker.example"
			r.Header.Set("Content-Type", "text/plain")
		}, 403},
	} {
		for _, params := range []any{withTask, args} {
			st, body := rawPost(t, hs.URL, c.sid, 100+i, "tools/call", params, tc.edit)
			if st != tc.status {
				t.Fatalf("%s: %d %s", tc.name, st, body)
			}
		}
	}
	// Each refusal was answered after its handler returned: an execution it
	// started by mistake would be counted already, even before its tool ran.
	if n := starts.n.Load(); n != 0 {
		t.Fatalf("refused requests started %d executions", n)
	}
	if n := e.count.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	// The same call, well-formed, runs.
	created, rerr := c.call("tools/call", withTask)
	if rerr != nil {
		t.Fatal(rerr)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	if res, rerr := c.call("tasks/result", map[string]any{"taskId": id}); rerr != nil || res["isError"] == true || e.count.Load() != 1 || starts.n.Load() != 1 {
		t.Fatalf("valid call: %v %v, count %d, executions %d", res, rerr, e.count.Load(), starts.n.Load())
	}
}

// startCounter counts the executions a tools API service starts (every
// execution is one workflow start through its client).
type startCounter struct {
	client.Client
	n atomic.Int32
}

// wrap puts the counter between the service and its Temporal client.
func (c *startCounter) wrap(o *toolsapi.Options) {
	c.Client, o.Client = o.Client, c
}

func (c *startCounter) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	c.n.Add(1)
	return c.Client.ExecuteWorkflow(ctx, opts, workflow, args...)
}

// The capability may travel in an Authorization header: heartbeat and
// completion by action id, the token nowhere in the URL.
func TestCompletionByAuthorizationHeader(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	base, tok, ok := strings.Cut(j.Action.Completion.URL, "/eve/v1/actions/")
	if !ok || !strings.Contains(tok, ".") {
		t.Fatalf("completion URL %q", j.Action.Completion.URL)
	}
	send := func(path, auth, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/eve/v1/actions/"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if st, body := send(j.Action.ID+"/heartbeat", "Bearer "+tok, `{"details":{"progress":50}}`); st != 200 || !strings.Contains(body, `"cancelRequested":false`) {
		t.Fatalf("heartbeat: %d %s", st, body)
	}
	// Without the header, or for another action, nothing happens.
	if st, _ := send(j.Action.ID, "", `{"output":{"status":"succeeded","detail":"x"}}`); st != 401 {
		t.Fatalf("no header: %d", st)
	}
	if st, _ := send("act_someoneelse", "Bearer "+tok, `{"output":{"status":"succeeded","detail":"x"}}`); st != 401 {
		t.Fatalf("other action: %d", st)
	}
	if st, body := send(j.Action.ID, "Bearer "+tok, `{"output":{"status":"succeeded","detail":"by header"}}`); st != 200 || !strings.Contains(body, j.Action.ID) {
		t.Fatalf("complete: %d %s", st, body)
	}
	if got := d.reply(t, id); got != "succeeded: by header" {
		t.Fatalf("reply = %q", got)
	}
	// A repeat is a duplicate, as with the URL form.
	if st, body := send(j.Action.ID, "Bearer "+tok, `{"output":{"status":"succeeded","detail":"by header"}}`); st != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("repeat: %d %s", st, body)
	}
}

// The API server's panic log names the route, never a completion URL's capability.
func TestAPIPanicLogHidesCapability(t *testing.T) {
	env := evetest.New(t)
	var logs bytes.Buffer
	srv, err := api.New(api.Options{
		Sessions:      env.Sessions,
		ServerOptions: api.ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Actions:       http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }),
	})
	if err != nil {
		t.Fatal(err)
	}
	const tok = "eyJhY3QiOiJhY3RfcGFuaWMifQ.c2VjcmV0LW1hYy1kby1ub3QtbG9n"
	for _, path := range []string{"/eve/v1/actions/" + tok, "/eve/v1/actions/" + tok + "/heartbeat", "/eve/support/v1/actions/" + tok} {
		logs.Reset()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:4111"+path, strings.NewReader(`{}`))
		req.Host = "127.0.0.1:4111"
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != 500 || !strings.Contains(logs.String(), "panic") {
			t.Fatalf("%d %s", rec.Code, logs.String())
		}
		if strings.Contains(logs.String(), tok) || strings.Contains(logs.String(), "c2VjcmV0") || !strings.Contains(logs.String(), "/actions/…") {
			t.Fatalf("panic log: %s", logs.String())
		}
	}
}

// A tool runs once unless it is idempotent or has its own retry policy.
func TestToolRunsOnceUnlessIdempotent(t *testing.T) {
	env := evetest.New(t)
	var once, idem atomic.Int32
	flaky := func(name string, n *atomic.Int32) *tools.Tool {
		return &tools.Tool{Name: name, Description: "Fails on its first attempt.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
				if n.Add(1) == 1 {
					return nil, fmt.Errorf("transient failure")
				}
				return map[string]any{"attempt": ctx.Attempt, "key": ctx.IdempotencyKey}, nil
			}}
	}
	a, b := flaky("once", &once), flaky("again", &idem)
	b.Idempotent = true
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: once}, {tool: again}]
      - reply: "{{results.0.error}} | {{results.1.attempt}} {{results.1.key}}"
`, a, b))
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "go", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("tool once failed: transient failure | 2 %s/%s/call_1_1", res.SessionID, res.TurnID)
	if res.Outcome.Reply != want {
		t.Fatalf("reply = %q, want %q", res.Outcome.Reply, want)
	}
	if once.Load() != 1 || idem.Load() != 2 {
		t.Fatalf("runs: once %d, idempotent %d", once.Load(), idem.Load())
	}
}

// A stopping worker (SIGTERM) lets an in-flight tool finish and report,
// so the tool does not run again (it is not idempotent: it could not).
func TestWorkerStopTimeoutLetsToolFinish(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	started := make(chan struct{}, 4)
	slow := &tools.Tool{Name: "slow", Description: "Takes a while.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			runs.Add(1)
			started <- struct{}{}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(1500 * time.Millisecond):
				return map[string]string{"status": "finished"}, nil
			}
		}}
	rules := `
rules:
  - match: go
    steps:
      - calls: [{tool: slow}]
      - reply: "{{result.slow.status}}{{result.slow.error}}"
`
	a := evetest.Agent(t, rules, slow)
	w, err := workerhost.New(env.Client, env.Server.Namespace, env.TaskQueue, a, agent.Host{Store: env.Server.PayloadStore()},
		workerhost.Limits{Activities: 10, LocalActivities: 10, WorkflowTasks: 4, CachedWorkflows: 2000, StopTimeout: 20 * time.Second}, workerhost.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never started")
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }() // what SIGTERM does
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	// Another worker finishes the turn.
	env.StartWorker(evetest.Agent(t, rules, slow))
	evs := waitFor(t, env, res.SessionID, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	mc := evetest.Of(evs, protocol.MessageCompleted)
	var m protocol.MessageCompletedData
	mc[len(mc)-1].Decode(&m)
	if m.Message != "finished" || runs.Load() != 1 {
		t.Fatalf("reply %q, runs %d", m.Message, runs.Load())
	}
}
