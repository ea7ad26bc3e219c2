package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// roundsEnv serves a tool that asks its MCP client for a name
// (tools.AskClient) from instances that share a state key.
func roundsEnv(t *testing.T) (*evetest.Env, func(key string) *mcpserver.Server) {
	t.Helper()
	env := evetest.New(t)
	a := evetest.Agent(t, `rules: []`, askNameTool(), askTwoTool())
	startExecutionWorker(t, env, a)
	return env, func(key string) *mcpserver.Server {
		svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a})
		if err != nil {
			t.Fatal(err)
		}
		s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "alice", StateKey: []byte(key), TaskTools: map[string]string{"test.ask_two": "required"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func roundCall(t *testing.T, url string, caps map[string]any, extra map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	params := map[string]any{"name": "test.ask_name", "arguments": map[string]any{}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
	for k, v := range extra {
		params[k] = v
	}
	return post2026(t, url, "tools/call", "test.ask_name", params)
}

// A 2026-07-28 client gets an InputRequiredResult, answers it on another
// instance that shares the state key, and gets the tool's result; an
// altered requestState, one of another key, and a client that cannot
// elicit are refused.
func TestMCPClientInputRounds(t *testing.T) {
	_, instance := roundsEnv(t)
	key := "0123456789abcdef0123456789abcdef"
	serve := func(s *mcpserver.Server) string {
		hs := httptest.NewServer(s.HTTPHandler(nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	a, b, other := serve(instance(key)), serve(instance(key)), serve(instance("another key, 32 bytes long......"))
	elicit := map[string]any{"elicitation": map[string]any{}}
	st, res, rerr := roundCall(t, a, elicit, nil)
	if st != 200 || rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("round 1: %d %v %v", st, res, rerr)
	}
	reqs, _ := res["inputRequests"].(map[string]any)
	ask, _ := reqs["user_name"].(map[string]any)
	state, _ := res["requestState"].(string)
	if ask["method"] != "elicitation/create" || state == "" {
		t.Fatalf("round 1 asks %v with state %q", reqs, state)
	}
	answer := map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}
	if _, res, rerr = roundCall(t, b, elicit, map[string]any{"inputResponses": answer, "requestState": state}); rerr != nil || res["resultType"] != "complete" {
		t.Fatalf("round 2 on another instance: %v %v", res, rerr)
	}
	if content, _ := res["content"].([]any); len(content) != 1 || content[0].(map[string]any)["text"] != "Hello, Ada" {
		t.Fatalf("round 2 content: %v", res)
	}
	for name, s := range map[string]string{"altered": state + "x", "another key": state} {
		url := a
		if name == "another key" {
			url = other
		}
		if st, res, rerr := roundCall(t, url, elicit, map[string]any{"inputResponses": answer, "requestState": s}); rpcCode(rerr) != -32602 || res != nil {
			t.Fatalf("%s state: %d %v %v", name, st, res, rerr)
		}
	}
	// A client that cannot elicit is told which capability the tool needs.
	st, res, rerr = roundCall(t, a, map[string]any{}, nil)
	data, _ := json.Marshal(rerr["data"])
	if st != 400 || rpcCode(rerr) != -32021 || string(data) != `{"requiredCapabilities":{"elicitation":{}}}` {
		t.Fatalf("no elicitation: %d %v %v", st, res, rerr)
	}
}

// A session client (2025-11-25) that can elicit is asked by the server
// itself, mid-call (elicitation/create), over HTTP and stdio; the tool's
// next round gets its answer.
func TestMCPClientInputOverSessions(t *testing.T) {
	env, instance := roundsEnv(t)
	s := instance("")
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			ctx := env.Ctx(60 * time.Second)
			asked := 0
			cs := mcpConnectWith(t, ctx, s, transport, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				if r.Params.Message != "What is your name?" {
					t.Errorf("asked %q", r.Params.Message)
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
			}})
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test.ask_name", Arguments: map[string]any{}})
			if err != nil || res.IsError || mcpText(res) != "Hello, Grace" || asked != 1 {
				t.Fatalf("call: %+v %v (asked %d times)", res, err, asked)
			}
			// Without the elicitation capability the call is refused, and
			// nobody is asked.
			plain := mcpConnect(t, ctx, s, transport, nil)
			if res, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "test.ask_name", Arguments: map[string]any{}}); err == nil {
				t.Fatalf("a client that cannot elicit: %+v", res)
			}
		})
	}
}

// In a task, the tool's questions wait in the execution: tasks/get shows
// them (input_required), tasks/update answers them one at a time on
// another instance, and the next round runs in the same task.
func TestMCPTaskWaitsForClientInput(t *testing.T) {
	env, instance := roundsEnv(t)
	serve := func() string {
		hs := httptest.NewServer(instance("").HTTPHandler(nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	a, b := serve(), serve()
	caps := map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{mcpserver.TasksExtension: map[string]any{}}}
	call := func(url, method, name string, params map[string]any) (int, map[string]any, map[string]any) {
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
		return post2026(t, url, method, name, params)
	}
	st, created, rerr := call(a, "tools/call", "test.ask_two", map[string]any{"name": "test.ask_two", "arguments": map[string]any{}})
	if st != 200 || rerr != nil || created["resultType"] != "task" {
		t.Fatalf("create: %d %v %v", st, created, rerr)
	}
	id := created["taskId"].(string)
	pending := func(want ...string) {
		t.Helper()
		_, got, rerr := call(b, "tasks/get", id, map[string]any{"taskId": id})
		reqs, _ := got["inputRequests"].(map[string]any)
		if rerr != nil || got["status"] != "input_required" || len(reqs) != len(want) {
			t.Fatalf("tasks/get: %v %v, want pending %v", got, rerr, want)
		}
		for _, k := range want {
			if r, _ := reqs[k].(map[string]any); r["method"] != "elicitation/create" {
				t.Fatalf("pending %s: %v", k, reqs)
			}
		}
	}
	pending("first", "second")
	answer := func(key, name string) {
		t.Helper()
		_, ack, rerr := call(b, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}}})
		if rerr != nil || ack["resultType"] != "complete" || len(ack) != 1 {
			t.Fatalf("tasks/update %s: %v %v", key, ack, rerr)
		}
	}
	answer("first", "Ada")
	pending("second")
	answer("second", "Grace")
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: evetest.Agent(t, `rules: []`, askTwoTool())})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Wait(env.Ctx(30*time.Second), id, 0); err != nil || !res.Status.Terminal() {
		t.Fatalf("wait: %+v %v", res, err)
	}
	_, got, rerr := call(a, "tasks/get", id, map[string]any{"taskId": id})
	result, _ := got["result"].(map[string]any)
	content, _ := result["content"].([]any)
	if rerr != nil || got["status"] != "completed" || len(content) != 1 || content[0].(map[string]any)["text"] != "Ada and Grace" {
		t.Fatalf("completed task: %v %v", got, rerr)
	}
}

// The tasks extension over stdio: the same task, created, answered and
// read with stateless requests on newline-delimited JSON.
func TestMCPTasksExtensionOverStdio(t *testing.T) {
	env, instance := roundsEnv(t)
	s := instance("")
	ctx := env.Ctx(60 * time.Second)
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	go func() { _ = s.Serve(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW}) }()
	t.Cleanup(func() { c2sW.Close() })
	lines := bufio.NewScanner(s2cR)
	lines.Buffer(make([]byte, 0, 1<<16), 1<<22)
	next := 0
	call := func(method string, params map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		next++
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{
			"elicitation": map[string]any{}, "extensions": map[string]any{mcpserver.TasksExtension: map[string]any{}}}}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": next, "method": method, "params": params})
		if _, err := c2sW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			var m struct {
				ID     int            `json:"id"`
				Result map[string]any `json:"result"`
				Error  map[string]any `json:"error"`
			}
			if json.Unmarshal(lines.Bytes(), &m) == nil && m.ID == next {
				return m.Result, m.Error
			}
		}
		t.Fatalf("%s: no answer (%v)", method, lines.Err())
		return nil, nil
	}
	created, rerr := call("tools/call", map[string]any{"name": "test.ask_two", "arguments": map[string]any{}})
	if rerr != nil || created["resultType"] != "task" {
		t.Fatalf("create: %v %v", created, rerr)
	}
	id := created["taskId"].(string)
	got, rerr := call("tasks/get", map[string]any{"taskId": id})
	if reqs, _ := got["inputRequests"].(map[string]any); rerr != nil || got["status"] != "input_required" || len(reqs) != 2 {
		t.Fatalf("tasks/get: %v %v", got, rerr)
	}
	ack, rerr := call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"first":  map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}},
		"second": map[string]any{"action": "accept", "content": map[string]any{"name": "Alan"}},
	}})
	if rerr != nil || ack["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v %v", ack, rerr)
	}
	for {
		got, rerr = call("tasks/get", map[string]any{"taskId": id})
		if rerr != nil || got["status"] == "completed" {
			break
		}
		if got["status"] != "working" && got["status"] != "input_required" {
			t.Fatalf("tasks/get: %v", got)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the task did not complete: %v", got)
		case <-time.After(100 * time.Millisecond): // the client's poll interval
		}
	}
	result, _ := got["result"].(map[string]any)
	if content, _ := result["content"].([]any); rerr != nil || len(content) != 1 || content[0].(map[string]any)["text"] != "Ada and Alan" {
		t.Fatalf("completed: %v %v", got, rerr)
	}
}

// lateCommit tells the bus of a change, then holds the workflow task that
// made it for a while: a reader the bus wakes reads before Temporal has
// recorded the change (what a loaded worker or server does now and then).
type lateCommit struct {
	bus   *notify.Local
	delay time.Duration
}

func (l lateCommit) Notify(id string, n int) {
	l.bus.Notify(id, n)
	time.Sleep(l.delay) // the scenario: the task completes after the notification
}

// With a notify bus, a task created on stdio is followed: each change of
// its status reaches the client as notifications/tasks/status, pushed by
// the execution workflow through the bus, without a tasks/get; also when
// each notification arrives before the workflow task that sent it has
// completed.
func TestMCPTaskStatusNotificationsOverStdio(t *testing.T) {
	// 150 ms: a workflow task notifies at most twice, and stays well under
	// the SDK's 1 s deadlock detector.
	for _, delay := range []time.Duration{0, 150 * time.Millisecond} {
		t.Run(fmt.Sprintf("commit %v after the notification", delay), func(t *testing.T) { taskStatusNotifications(t, delay) })
	}
}

func taskStatusNotifications(t *testing.T, delay time.Duration) {
	env := evetest.New(t)
	bus := notify.NewLocal()
	a := evetest.Agent(t, `rules: []`, askTwoTool())
	startExecutionWorkerHost(t, env, a, agent.Host{Notifier: lateCommit{bus, delay}})
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "alice", Bus: bus, TaskTools: map[string]string{"test.ask_two": "required"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := env.Ctx(60 * time.Second)
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	go func() { _ = s.Serve(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW}) }()
	t.Cleanup(func() { c2sW.Close() })
	msgs := make(chan map[string]any, 32)
	go func() {
		sc := bufio.NewScanner(s2cR)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				msgs <- m
			}
		}
	}()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{
		"elicitation": map[string]any{}, "extensions": map[string]any{mcpserver.TasksExtension: map[string]any{}}}}
	send := func(id int, method string, params map[string]any) {
		params["_meta"] = meta
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := c2sW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	// next returns the next message: an answer or a status notification.
	next := func() map[string]any {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-ctx.Done():
			t.Fatal("no message")
			return nil
		}
	}
	send(1, "tools/call", map[string]any{"name": "test.ask_two", "arguments": map[string]any{}})
	created := next()
	res, _ := created["result"].(map[string]any)
	if created["id"] != float64(1) || res["resultType"] != "task" {
		t.Fatalf("create: %v", created)
	}
	id := res["taskId"].(string)
	status := func(want string) map[string]any {
		t.Helper()
		for {
			m := next()
			if m["method"] != "notifications/tasks/status" {
				continue // an answer
			}
			p, _ := m["params"].(map[string]any)
			if p["taskId"] != id {
				t.Fatalf("notification of another task: %v", m)
			}
			if p["status"] == want {
				return p
			}
			if p["status"] != "working" {
				t.Fatalf("status %v, want %s", p["status"], want)
			}
		}
	}
	p := status("input_required")
	if reqs, _ := p["inputRequests"].(map[string]any); len(reqs) != 2 {
		t.Fatalf("input_required without its requests: %v", p)
	}
	send(2, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"first":  map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}},
		"second": map[string]any{"action": "accept", "content": map[string]any{"name": "Alan"}},
	}})
	p = status("completed")
	result, _ := p["result"].(map[string]any)
	if content, _ := result["content"].([]any); len(content) != 1 || content[0].(map[string]any)["text"] != "Ada and Alan" {
		t.Fatalf("completed: %v", p)
	}
}
