package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

func serverWith(t *testing.T, mut func(*Options)) *Server {
	t.Helper()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := toolsapi.New(toolsapi.Options{Agent: a, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Tools: svc, Logger: quiet()}
	if mut != nil {
		mut(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawHTTP posts JSON-RPC to a streamable HTTP endpoint.
type rawHTTP struct {
	t   *testing.T
	url string
	sid string
	n   int
}

func (c *rawHTTP) post(method string, params any, edit func(*http.Request)) (int, string) {
	c.t.Helper()
	c.n++
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if !strings.HasPrefix(method, "notifications/") {
		msg["id"] = c.n
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && c.sid == "" {
		c.sid = sid
	}
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func (c *rawHTTP) initialize() {
	c.t.Helper()
	st, body := c.post("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "1"},
		"capabilities": map[string]any{"tasks": map[string]any{}}}, nil)
	if st != 200 || c.sid == "" {
		c.t.Fatalf("initialize: %d %s", st, body)
	}
	c.post("notifications/initialized", nil, nil)
}

// Every request passes the SDK's Host, Origin, Content-Type and Accept
// checks before anything looks at it, task-augmented tools/call included.
func TestHTTPChecksComeFirst(t *testing.T) {
	s := serverWith(t, nil)
	hs := httptest.NewServer(s.HTTPHandler(nil)) // a loopback listener
	defer hs.Close()
	c := &rawHTTP{t: t, url: hs.URL}
	c.initialize()
	call := map[string]any{"name": "demo.get_weather", "arguments": map[string]any{"city": "Paris"}, "task": map[string]any{}}
	for _, tc := range []struct {
		name   string
		edit   func(*http.Request)
		status int
		says   string
	}{
		{"host", func(r *http.Request) { r.Host = "attacker.example" }, 403, "invalid Host header"},
		{"host with port", func(r *http.Request) { r.Host = "attacker.example:80" }, 403, "invalid Host header"},
		{"origin", func(r *http.Request) { r.Header.Set("Origin", "http://attacker.example") }, 403, "cross-origin"},
		{"fetch metadata", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403, "cross-origin"},
		{"rebinding with matching origin", func(r *http.Request) {
			r.Host = "attacker.example"
			r.Header.Set("Origin", "http://attacker.example")
		}, 403, "invalid Host header"},
		{"text/plain", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415, "Content-Type must be 'application/json'"},
		{"form", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415, "Content-Type"},
		{"no content type", func(r *http.Request) { r.Header.Del("Content-Type") }, 415, "Content-Type"},
		{"accept", func(r *http.Request) { r.Header.Set("Accept", "application/json") }, 400, "Accept must contain"},
	} {
		for _, method := range []string{"tools/call", "tasks/list"} {
			st, body := c.post(method, call, tc.edit)
			if st != tc.status || !strings.Contains(body, tc.says) || strings.Contains(body, "jsonrpc") {
				t.Fatalf("%s %s: %d %s", tc.name, method, st, body)
			}
		}
	}
	// The same request that passes the checks reaches the Tasks layer,
	// which offers no task list (tasks are executions, found by id).
	if st, body := c.post("tasks/list", map[string]any{}, nil); st != 200 || !strings.Contains(body, "tasks/list is not offered") {
		t.Fatalf("valid request: %d %s", st, body)
	}
	// A loopback Host with its port, localhost and [::1] pass.
	for _, h := range []string{"localhost", "127.0.0.1", "[::1]:8080", strings.TrimPrefix(hs.URL, "http://")} {
		if st, body := c.post("tasks/list", map[string]any{}, func(r *http.Request) { r.Host = h }); st != 200 {
			t.Fatalf("host %s: %d %s", h, st, body)
		}
	}
	// A trusted origin passes.
	s2 := serverWith(t, func(o *Options) { o.TrustedOrigins = []string{"https://app.example.com"} })
	hs2 := httptest.NewServer(s2.HTTPHandler(nil))
	defer hs2.Close()
	c2 := &rawHTTP{t: t, url: hs2.URL}
	c2.initialize()
	if st, body := c2.post("tasks/list", map[string]any{}, func(r *http.Request) { r.Header.Set("Origin", "https://app.example.com") }); st != 200 {
		t.Fatalf("trusted origin: %d %s", st, body)
	}
}

// Idle HTTP sessions expire and task requests keep them alive; tasks
// outlive sessions (they are executions).
func TestHTTPIdleSessionExpires(t *testing.T) {
	// The keep-alive requests come every timeout/10: a loaded machine may
	// stall the test for most of the timeout between two of them and the
	// session still lives.
	const timeout = 2 * time.Second
	s := serverWith(t, func(o *Options) { o.SessionTimeout = timeout })
	hs := httptest.NewServer(s.HTTPHandler(nil))
	defer hs.Close()
	c := &rawHTTP{t: t, url: hs.URL}
	c.initialize()
	// Task requests only (the SDK never sees them) keep it alive, for
	// longer than the timeout...
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); time.Sleep(timeout / 10) {
		if st, body := c.post("tasks/get", map[string]any{"taskId": "exe_unknown"}, nil); st != 200 {
			t.Fatalf("kept alive: %d %s", st, body)
		}
	}
	// ...for the SDK too.
	if st, body := c.post("tools/list", map[string]any{}, nil); st != 200 || !strings.Contains(body, "demo.get_weather") {
		t.Fatalf("tools/list on a live session: %d %s", st, body)
	}
	// Idle, it expires: the session's timer fires at timeout after the
	// last request, and a loaded machine may run it late. Each look waits
	// past the timeout again (a look that finds the session alive restarts
	// its timer), within a bound.
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(timeout + 500*time.Millisecond)
		st, body := c.post("tools/list", map[string]any{}, nil)
		if st == 404 {
			break
		}
		if st != 200 || time.Now().After(deadline) {
			t.Fatalf("tools/list, idle past the timeout: %d %s", st, body)
		}
	}
	// The SDK forgot it last (this layer first): neither knows it now.
	for _, m := range []string{"tasks/list", "tools/list"} {
		if st, body := c.post(m, map[string]any{}, nil); st != 404 || !strings.Contains(body, "session not found") {
			t.Fatalf("%s after expiry: %d %s", m, st, body)
		}
	}
	// A DELETE ends a session at once.
	c2 := &rawHTTP{t: t, url: hs.URL}
	c2.initialize()
	req, _ := http.NewRequest(http.MethodDelete, hs.URL, nil)
	req.Header.Set("Mcp-Session-Id", c2.sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if st, body := c2.post("tools/list", map[string]any{}, nil); st != 404 {
		t.Fatalf("tools/list after delete: %d %s", st, body)
	}
	if (Options{}).SessionTimeout != 0 || serverWith(t, nil).opts.SessionTimeout != DefaultSessionTimeout {
		t.Fatal("default session timeout")
	}
}

// Without Mcp-Session-Id only initialize passes (HTTP 400, not the SDK's
// 200 with a code-0 JSON-RPC error); the sessionless protocol (2026-07-28)
// needs no session and still reaches the SDK, as does its stateless mode.
func TestHTTPNoSessionIs400(t *testing.T) {
	s := serverWith(t, nil)
	hs := httptest.NewServer(s.HTTPHandler(nil))
	defer hs.Close()
	c := &rawHTTP{t: t, url: hs.URL}
	for _, m := range []string{"tools/list", "tasks/list", "notifications/initialized"} {
		if st, body := c.post(m, map[string]any{}, nil); st != 400 || !strings.Contains(body, "Mcp-Session-Id") {
			t.Fatalf("%s without a session: %d %s", m, st, body)
		}
	}
	meta := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}}
	// (This server does not speak it, so the SDK answers that itself.)
	st, body := c.post("tools/list", meta, func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", "2026-07-28") })
	if strings.Contains(body, "requires a session") || !strings.Contains(body, "jsonrpc") {
		t.Fatalf("sessionless protocol: %d %s, want the SDK's answer", st, body)
	}
	// In the SDK's stateless mode nothing requires a session.
	hs2 := httptest.NewServer(s.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer hs2.Close()
	c2 := &rawHTTP{t: t, url: hs2.URL}
	if st, body := c2.post("tools/list", map[string]any{}, nil); st != 200 || !strings.Contains(body, "demo.get_weather") {
		t.Fatalf("stateless: %d %s", st, body)
	}
	c.initialize()
	if st, body := c.post("tools/list", map[string]any{}, nil); st != 200 || !strings.Contains(body, "demo.get_weather") {
		t.Fatalf("in a session: %d %s", st, body)
	}
}

// Over stdio too, a task needs Tasks announced in initialize and a task
// object; both refusals come before any execution (here one would answer
// unavailable: no Temporal).
func TestStdioTaskRefusals(t *testing.T) {
	for _, tc := range []struct {
		caps, task string
		code       float64
		says       string
	}{
		{`{}`, `{}`, -32601, "announce MCP Tasks"},
		{`{"experimental":{"tasks":{}}}`, `"yes"`, -32602, "task must be an object"},
		{`{"tasks":{}}`, `{"ttl":-1}`, -32602, "task must be an object"},
	} {
		c := newRawStdio(t, demoServer(t))
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + tc.caps + `,"clientInfo":{"name":"raw","version":"1"}}}`)
		c.recv()
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo.get_weather","arguments":{"city":"Paris"},"task":` + tc.task + `}}`)
		e, _ := c.recv()["error"].(map[string]any)
		if e == nil || e["code"] != tc.code || !strings.Contains(e["message"].(string), tc.says) {
			t.Fatalf("caps %s, task %s: error %v, want %v %q", tc.caps, tc.task, e, tc.code, tc.says)
		}
	}
}
