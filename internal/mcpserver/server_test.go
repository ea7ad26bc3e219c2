package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// demoServer serves the demo agent's catalog without Temporal: listing
// and refusals work; executions answer unavailable.
func demoServer(t *testing.T) *Server {
	t.Helper()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := toolsapi.New(toolsapi.Options{Agent: a, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Tools: svc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func connect(t *testing.T, s *Server, caps *mcp.ClientCapabilities, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go func() { _ = s.Serve(ctx, st) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Capabilities: caps, Logger: quiet()})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func TestListHidesAsyncWithoutTasks(t *testing.T) {
	s := demoServer(t)
	// refund_charge asks a person to approve every call: it is offered (as
	// a task it waits for the caller's approval; a plain call is refused).
	sync := []string{"demo.deploy", "demo.get_weather", "demo.issue_credit", "demo.publish_notes", "demo.refund_charge", "demo.research", "demo.transfer_funds"}
	all := []string{"demo.deploy", "demo.get_weather", "demo.issue_credit", "demo.provision", "demo.publish_notes", "demo.refund_charge", "demo.research", "demo.run_report", "demo.transfer_funds"}
	tasks := &mcp.ClientCapabilities{Experimental: map[string]any{"tasks": map[string]any{}}}
	for _, v := range []string{"", "2025-11-25", "2025-06-18"} {
		if got := names(t, connect(t, s, nil, v)); !slices.Equal(got, sync) {
			t.Errorf("%q without tasks: %v", v, got)
		}
		if got := names(t, connect(t, s, tasks, v)); !slices.Equal(got, all) {
			t.Errorf("%q with tasks: %v", v, got)
		}
	}
}

func TestCallRefusals(t *testing.T) {
	s := demoServer(t)
	cs := connect(t, s, nil, "")
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.get_weather", Arguments: map[string]any{"town": "Paris"}})
	if err != nil || !res.IsError {
		t.Fatalf("invalid input: %+v %v", res, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "invalid_input") || !strings.Contains(text, "city") {
		t.Fatalf("text = %s", text)
	}
	// MCP 2025-11-25: a taskSupport "required" tool called without a task
	// is -32601 (the SDK words the message itself); 2026-07-28 (the SDK
	// client's default, on any transport) is -32021 naming the tasks
	// extension.
	old := connect(t, s, nil, "2025-11-25")
	if _, err := old.CallTool(ctx, &mcp.CallToolParams{Name: "demo.run_report", Arguments: map[string]any{"name": "x"}}); err == nil || !strings.Contains(err.Error(), "method not found") {
		t.Fatalf("async without task (2025-11-25): %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.run_report", Arguments: map[string]any{"name": "x"}}); err == nil || !strings.Contains(err.Error(), TasksExtension) {
		t.Fatalf("async without task (2026-07-28): %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.choose_plan", Arguments: map[string]any{"accountId": "x"}}); err == nil {
		t.Fatal("a client tool was callable")
	}
}

// rawStdio drives the server with newline-delimited JSON-RPC, as an MCP
// host that speaks Tasks would.
type rawStdio struct {
	t   *testing.T
	w   io.Writer
	r   *bufio.Reader
	ctx context.Context
}

func newRawStdio(t *testing.T, s *Server) *rawStdio {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = s.Serve(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return &rawStdio{t: t, w: inW, r: bufio.NewReader(outR), ctx: ctx}
}

func (c *rawStdio) send(msg string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, msg+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawStdio) recv() map[string]any {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		c.t.Fatalf("%v: %s", err, line)
	}
	return m
}

func TestStdioTasksNegotiation(t *testing.T) {
	c := newRawStdio(t, demoServer(t))
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	init := c.recv()
	caps := init["result"].(map[string]any)["capabilities"].(map[string]any)
	tc, ok := caps["tasks"].(map[string]any)
	if !ok || tc["requests"] == nil || caps["tools"] == nil {
		t.Fatalf("capabilities = %v", caps)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	list := c.recv()
	var report map[string]any
	for _, tl := range list["result"].(map[string]any)["tools"].([]any) {
		if m := tl.(map[string]any); m["name"] == "demo.run_report" {
			report = m
		}
	}
	if report == nil || report["execution"].(map[string]any)["taskSupport"] != "required" {
		t.Fatalf("tools = %v", list)
	}
	ann := report["annotations"].(map[string]any)
	if ann["destructiveHint"] != false || ann["openWorldHint"] != true {
		t.Fatalf("annotations = %v", ann)
	}
	// An id that is no execution's is an unknown task.
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"nope"}}`)
	if e := c.recv()["error"].(map[string]any); e["code"] != float64(-32602) {
		t.Fatalf("error = %v", e)
	}
	// Tasks are executions found by id: there is no list.
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tasks/list","params":{}}`)
	if e := c.recv()["error"].(map[string]any); e["code"] != float64(-32601) {
		t.Fatalf("list = %v", e)
	}
	// A task-augmented call with bad input is refused before anything runs.
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo.run_report","arguments":{},"task":{"ttl":60000}}}`)
	if e := c.recv()["error"].(map[string]any); !strings.Contains(e["message"].(string), "name") {
		t.Fatalf("error = %v", e)
	}
}

func TestHTTPInitializePatched(t *testing.T) {
	s := demoServer(t)
	hs := httptest.NewServer(s.HTTPHandler(nil))
	defer hs.Close()
	ctx := context.Background()
	for _, caps := range []*mcp.ClientCapabilities{nil, {Experimental: map[string]any{"tasks": map[string]any{}}}} {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Capabilities: caps, Logger: quiet()})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		got := names(t, cs)
		if want := caps != nil; slices.Contains(got, "demo.run_report") != want {
			t.Fatalf("tasks %v: %v", want, got)
		}
		if ir := cs.InitializeResult(); ir == nil || ir.Capabilities.Tools == nil {
			t.Fatalf("initialize result = %+v", ir)
		}
		cs.Close()
	}
}

// A verified OAuth token's subject is the user calls run for, ahead of
// UserFromHeader and Options.UserID.
func TestTokenSubjectIsTheUser(t *testing.T) {
	s := demoServer(t)
	s.opts.UserID = "default"
	s.opts.UserFromHeader = func(h http.Header) (string, error) { return h.Get("X-User"), nil }
	h := http.Header{"X-User": {"from-header"}}
	for _, tc := range []struct {
		ti   *auth.TokenInfo
		h    http.Header
		want string
	}{{&auth.TokenInfo{UserID: "alice"}, h, "alice"}, {&auth.TokenInfo{}, h, "from-header"}, {nil, nil, "default"}} {
		if got, err := s.user(tc.h, tc.ti); err != nil || got != tc.want {
			t.Fatalf("user(%v, %v) = %q %v, want %q", tc.h, tc.ti, got, err, tc.want)
		}
	}
}
