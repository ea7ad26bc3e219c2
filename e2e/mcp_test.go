package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/tools"
)

func newMCPServer(t *testing.T, e *tapiEnv) *mcpserver.Server {
	t.Helper()
	s, err := mcpserver.New(mcpserver.Options{Tools: e.svc, UserID: "mcp_user"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mcpTransports connects the Go SDK's client to s over stdio framing
// (newline-delimited JSON on pipes) or streamable HTTP.
func mcpConnect(t *testing.T, ctx context.Context, s *mcpserver.Server, transport string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	return mcpConnectWith(t, ctx, s, transport, &mcp.ClientOptions{Capabilities: caps})
}

// mcpConnectWith is mcpConnect with the client's options.
func mcpConnectWith(t *testing.T, ctx context.Context, s *mcpserver.Server, transport string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var ct mcp.Transport
	switch transport {
	case "stdio":
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		go func() { _ = s.Serve(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW}) }()
		ct = &mcp.IOTransport{Reader: s2cR, Writer: c2sW}
	case "http":
		hs := httptest.NewServer(s.HTTPHandler(nil))
		t.Cleanup(hs.Close)
		ct = &mcp.StreamableClientTransport{Endpoint: hs.URL}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "eve-e2e", Version: "1"}, opts)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", transport, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The Go SDK's client lists and calls tools over both transports; calls
// run as execution workflows on the real dev server.
func TestMCPListAndCall(t *testing.T) {
	e := newTapiEnv(t, nil)
	s := newMCPServer(t, e)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			ctx := e.Ctx(60 * time.Second)
			cs := mcpConnect(t, ctx, s, transport, nil)
			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range list.Tools {
				got = append(got, tl.Name)
			}
			slices.Sort(got)
			// Not ask_question (a client tool), not report (async: no Tasks).
			if want := []string{"ops.counter", "ops.fail", "ops.slow"}; !slices.Equal(got, want) {
				t.Fatalf("tools = %v, want %v", got, want)
			}
			before := e.count.Load()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ops.counter", Arguments: map[string]any{"label": transport}})
			if err != nil || res.IsError {
				t.Fatalf("call: %+v %v", res, err)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(mcpText(res)), &out); err != nil || out["label"] != transport || out["user"] != "mcp_user" {
				t.Fatalf("output = %s", mcpText(res))
			}
			if res.StructuredContent == nil {
				t.Fatal("no structured content")
			}
			if e.count.Load() != before+1 {
				t.Fatal("the call did not run exactly once")
			}
			// The execution is visible through the tools API too.
			key, _ := out["key"].(string)
			id, _, _ := strings.Cut(key, "/")
			if ex, err := e.c.Executions.Get(ctx, id); err != nil || ex.Status != catalog.StatusSucceeded {
				t.Fatalf("execution %s: %+v %v", id, ex, err)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ops.fail", Arguments: map[string]any{}})
			if err != nil || !res.IsError || !strings.Contains(mcpText(res), "printer is on fire") {
				t.Fatalf("fail: %+v %v", res, err)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ops.counter", Arguments: map[string]any{"label": 7}})
			if err != nil || !res.IsError || !strings.Contains(mcpText(res), "invalid_input") {
				t.Fatalf("invalid: %+v %v", res, err)
			}
			if e.count.Load() != before+1 {
				t.Fatal("an invalid call ran")
			}
			// With Tasks announced, the async tool is listed.
			tcs := mcpConnect(t, ctx, s, transport, &mcp.ClientCapabilities{Experimental: map[string]any{"tasks": map[string]any{}}})
			list, err = tcs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "ops.report" }) {
				t.Fatalf("tasks client: report not listed")
			}
		})
	}
}

// rpc is a raw JSON-RPC client of the streamable HTTP endpoint, for the
// Tasks methods the Go SDK's client cannot send.
type rpc struct {
	t   *testing.T
	url string
	sid string
	n   int
}

func (c *rpc) call(method string, params any) (map[string]any, map[string]any) {
	c.t.Helper()
	c.n++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.n, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.sid = sid
	}
	raw, _ := io.ReadAll(resp.Body)
	var m struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		c.t.Fatalf("%s: %d %s", method, resp.StatusCode, raw)
	}
	return m.Result, m.Error
}

func (c *rpc) notify(method string) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method)
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", c.sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// An MCP host that negotiates Tasks runs the async (delegated) tool as a
// task: the task is the execution, its job completes it through the
// completion URL, and tasks/get, tasks/result and tasks/cancel follow it;
// tasks/list is not offered (tasks are executions, found by id).
func TestMCPTasksOverHTTP(t *testing.T) {
	e := newTapiEnv(t, nil)
	s := newMCPServer(t, e)
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	c := &rpc{t: t, url: hs.URL}
	init, rerr := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "1"},
		"capabilities": map[string]any{"tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}}}})
	if rerr != nil || c.sid == "" {
		t.Fatalf("initialize: %v sid %q", rerr, c.sid)
	}
	if caps := init["capabilities"].(map[string]any); caps["tasks"] == nil {
		t.Fatalf("server capabilities = %v", caps)
	}
	c.notify("notifications/initialized")
	list, _ := c.call("tools/list", map[string]any{})
	found := false
	for _, tl := range list["tools"].([]any) {
		m := tl.(map[string]any)
		if m["name"] == "ops.report" {
			found = m["execution"].(map[string]any)["taskSupport"] == "required"
		}
	}
	if !found {
		t.Fatalf("tools = %v", list)
	}
	created, rerr := c.call("tools/call", map[string]any{"name": "ops.report", "arguments": map[string]any{"spec": "mcp"}, "task": map[string]any{"ttl": 60000}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	task := created["task"].(map[string]any)
	id := task["taskId"].(string)
	if task["status"] != mcpserver.TaskWorking || task["createdAt"] == "" || task["ttl"] == nil {
		t.Fatalf("task = %v", task)
	}
	var a tools.Action
	select {
	case a = <-e.jobs:
	case <-time.After(20 * time.Second):
		t.Fatal("no job")
	}
	got, _ := c.call("tasks/get", map[string]any{"taskId": id})
	if got["status"] != mcpserver.TaskWorking {
		t.Fatalf("tasks/get = %v", got)
	}
	ctx := e.Ctx(30 * time.Second)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": "via mcp"})
	}()
	result, rerr := c.call("tasks/result", map[string]any{"taskId": id}) // blocks until the job completes
	if rerr != nil || result["isError"] == true || result["structuredContent"].(map[string]any)["detail"] != "via mcp" {
		t.Fatalf("tasks/result = %v %v", result, rerr)
	}
	if rel := result["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != id {
		t.Fatalf("related task = %v", rel)
	}
	if got, _ = c.call("tasks/get", map[string]any{"taskId": id}); got["status"] != mcpserver.TaskCompleted {
		t.Fatalf("after result: %v", got)
	}
	// A second task, cancelled: its job's late completion is refused (410).
	created, _ = c.call("tools/call", map[string]any{"name": "ops.report", "arguments": map[string]any{"spec": "cancel me"}, "task": map[string]any{}})
	id2 := created["task"].(map[string]any)["taskId"].(string)
	var a2 tools.Action
	select {
	case a2 = <-e.jobs:
	case <-ctx.Done():
		t.Fatal("the cancelled task's job never arrived")
	}
	cancelled, rerr := c.call("tasks/cancel", map[string]any{"taskId": id2})
	if rerr != nil || cancelled["status"] != mcpserver.TaskCancelled {
		t.Fatalf("cancel = %v %v", cancelled, rerr)
	}
	if err := actions.Complete(ctx, a2.Completion, map[string]string{"status": "succeeded", "detail": "late"}); err == nil {
		t.Fatal("late completion accepted")
	}
	if _, rerr = c.call("tasks/cancel", map[string]any{"taskId": id2}); rerr == nil {
		t.Fatal("cancelling a cancelled task succeeded")
	}
	if _, rerr := c.call("tasks/list", map[string]any{}); rpcCode(rerr) != -32601 {
		t.Fatalf("tasks/list = %v, want -32601", rerr)
	}
	// A task is its user's, not its session's: another session of the
	// same user reads it; another user's server does not.
	other := &rpc{t: t, url: hs.URL}
	other.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw2", "version": "1"}, "capabilities": map[string]any{"tasks": map[string]any{}}})
	other.notify("notifications/initialized")
	if got, rerr := other.call("tasks/get", map[string]any{"taskId": id}); rerr != nil || got["status"] != mcpserver.TaskCompleted {
		t.Fatalf("the same user's other session: %v %v", got, rerr)
	}
	stranger, err := mcpserver.New(mcpserver.Options{Tools: e.svc, UserID: "someone_else"})
	if err != nil {
		t.Fatal(err)
	}
	shs := httptest.NewServer(stranger.HTTPHandler(nil))
	t.Cleanup(shs.Close)
	sc := &rpc{t: t, url: shs.URL}
	sc.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw3", "version": "1"}, "capabilities": map[string]any{"tasks": map[string]any{}}})
	sc.notify("notifications/initialized")
	if _, rerr := sc.call("tasks/get", map[string]any{"taskId": id}); rpcCode(rerr) != -32602 {
		t.Fatalf("another user read the task: %v", rerr)
	}
	// A plain call of a sync tool still works beside tasks.
	res, rerr := c.call("tools/call", map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "raw"}})
	if rerr != nil || res["isError"] == true {
		t.Fatalf("plain call = %v %v", res, rerr)
	}
}

// rpcCode is a JSON-RPC error's code (0 when there is none).
func rpcCode(rerr map[string]any) int {
	c, _ := rerr["code"].(float64)
	return int(c)
}

// A tools/call whose params.task is not an object is invalid params and
// starts nothing; {} starts the task.
func TestMCPTaskParamMustBeAnObject(t *testing.T) {
	starts := &startCounter{}
	e := newTapiEnv(t, starts.wrap)
	hs := httptest.NewServer(newMCPServer(t, e).HTTPHandler(nil))
	t.Cleanup(hs.Close)
	c := mcpSession(t, hs.URL) // announces Tasks
	for _, task := range []any{"yes", 1, true, []any{}, map[string]any{"ttl": "soon"}} {
		_, rerr := c.call("tools/call", map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "x"}, "task": task})
		if rpcCode(rerr) != -32602 || !strings.Contains(fmt.Sprint(rerr["message"]), "task must be an object") {
			t.Fatalf("task %v: %v, want -32602 naming the task", task, rerr)
		}
	}
	// Answered after the call returned: a started execution would be
	// counted already.
	if n := starts.n.Load(); n != 0 {
		t.Fatalf("refused calls started %d executions", n)
	}
	created, rerr := c.call("tools/call", map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "x"}, "task": map[string]any{}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	if res, rerr := c.call("tasks/result", map[string]any{"taskId": id}); rerr != nil || res["isError"] == true || e.count.Load() != 1 {
		t.Fatalf("task {}: %v %v, count %d", res, rerr, e.count.Load())
	}
}

// A session whose client did not announce Tasks cannot start one: the
// task-augmented call is refused (-32601) and starts nothing; its plain
// calls run.
func TestMCPTaskCallNeedsNegotiatedTasks(t *testing.T) {
	starts := &startCounter{}
	e := newTapiEnv(t, starts.wrap)
	hs := httptest.NewServer(newMCPServer(t, e).HTTPHandler(nil))
	t.Cleanup(hs.Close)
	c := &rpc{t: t, url: hs.URL}
	if _, rerr := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "1"},
		"capabilities": map[string]any{}}); rerr != nil || c.sid == "" {
		t.Fatalf("initialize: %v", rerr)
	}
	c.notify("notifications/initialized")
	for tool, args := range map[string]any{"ops.counter": map[string]any{"label": "x"}, "ops.report": map[string]any{"spec": "x"}} {
		_, rerr := c.call("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}})
		if rpcCode(rerr) != -32601 || !strings.Contains(fmt.Sprint(rerr["message"]), "announce MCP Tasks") {
			t.Fatalf("%s as a task without Tasks: %v, want -32601", tool, rerr)
		}
	}
	if n := starts.n.Load(); n != 0 {
		t.Fatalf("refused task calls started %d executions", n)
	}
	if res, rerr := c.call("tools/call", map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "plain"}}); rerr != nil || res["isError"] == true || e.count.Load() != 1 {
		t.Fatalf("plain call: %v %v, count %d", res, rerr, e.count.Load())
	}
}

// Without Mcp-Session-Id, anything but initialize is HTTP 400 (not 200
// with a JSON-RPC error), and runs nothing; an unknown session is 404.
func TestMCPRequestWithoutSessionIs400(t *testing.T) {
	starts := &startCounter{}
	e := newTapiEnv(t, starts.wrap)
	hs := httptest.NewServer(newMCPServer(t, e).HTTPHandler(nil))
	t.Cleanup(hs.Close)
	noSession := func(r *http.Request) { r.Header.Del("Mcp-Session-Id") }
	call := map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "x"}}
	withTask := map[string]any{"name": "ops.counter", "arguments": map[string]any{"label": "x"}, "task": map[string]any{}}
	for i, tc := range []struct {
		method string
		params any
	}{{"tools/list", map[string]any{}}, {"tools/call", call}, {"tools/call", withTask}, {"tasks/list", map[string]any{}}, {"ping", nil}} {
		st, body := rawPost(t, hs.URL, "", i+1, tc.method, tc.params, noSession)
		if st != http.StatusBadRequest || !strings.Contains(body, "Mcp-Session-Id") || strings.Contains(body, "jsonrpc") {
			t.Fatalf("%s without a session: %d %s, want 400", tc.method, st, body)
		}
	}
	if n := starts.n.Load(); n != 0 {
		t.Fatalf("sessionless requests started %d executions", n)
	}
	if st, body := rawPost(t, hs.URL, "no-such-session", 9, "tools/list", map[string]any{}, nil); st != http.StatusNotFound {
		t.Fatalf("unknown session: %d %s, want 404", st, body)
	}
	// initialize needs no session, and its session works.
	c := mcpSession(t, hs.URL)
	if list, rerr := c.call("tools/list", map[string]any{}); rerr != nil || len(list["tools"].([]any)) == 0 {
		t.Fatalf("tools/list in a session: %v %v", list, rerr)
	}
}
