package connections

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/tools"
)

// taskServer is a minimal MCP server whose one tool runs as a task that
// completes after polls tasks/get.
type taskServer struct {
	mu      sync.Mutex
	methods []string
	polls   int
	after   int // tasks/get answers working this many times
}

func (s *taskServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (s *taskServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		return
	}
	b, _ := io.ReadAll(r.Body)
	var m rpcMessage
	_ = json.Unmarshal(b, &m)
	s.mu.Lock()
	s.methods = append(s.methods, m.Method)
	s.mu.Unlock()
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := `{}`
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s-1")
		result = `{"capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}`
	case "tools/call":
		result = `{"task":{"taskId":"t-1","status":"working","pollInterval":1}}`
	case "tasks/get":
		s.mu.Lock()
		s.polls++
		status := "working"
		if s.polls > s.after {
			status = "completed"
		}
		s.mu.Unlock()
		result = fmt.Sprintf(`{"taskId":"t-1","status":%q,"statusMessage":"researching","pollInterval":1}`, status)
	case "tasks/result":
		result = `{"content":[{"type":"text","text":"done"}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// taskContext is a call's context whose heartbeats go to beats, one
// element each (its first detail, nil for none).
func taskContext(attempt int32, last *taskCheckpoint, beats *[]any) *tools.Context {
	ctx := tools.NewContext(context.Background(), auth.Session{ID: "ses"}, "turn_0", "call_1", "x__research", attempt,
		func(d ...any) {
			var first any
			if len(d) > 0 {
				first = d[0]
			}
			*beats = append(*beats, first)
		})
	if last != nil {
		ctx.SetLastHeartbeat(func(v any) error {
			b, _ := json.Marshal(last)
			return json.Unmarshal(b, v)
		})
	}
	return ctx
}

// A call waits for its task and checkpoints it first; a later attempt
// follows the same task without calling again, and carries the checkpoint
// on; a non-idempotent call lost before its checkpoint is not repeated.
func TestCallMCPTask(t *testing.T) {
	srv := &taskServer{after: 2}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := &Connection{Name: "x", MCP: &MCP{URL: hs.URL}}
	r := newRuntime()

	var beats []any
	out, err := r.callMCPTask(taskContext(1, nil, &beats), c, "research", false, false, json.RawMessage(`{}`))
	if err != nil || !strings.Contains(string(out.(json.RawMessage)), `"done"`) {
		t.Fatalf("call: %s %v", out, err)
	}
	first, ok := beats[0].(taskCheckpoint)
	if !ok || first.MCPTask == nil || first.MCPTask.TaskID != "t-1" || first.MCPTask.Session != "s-1" {
		t.Fatalf("the first heartbeat must be the task's checkpoint: %#v", beats)
	}
	if srv.count("tools/call") != 1 || srv.count("tasks/get") != 3 || srv.count("tasks/result") != 1 {
		t.Fatalf("methods: %v", srv.methods)
	}

	// The next attempt of a call lost after its checkpoint.
	beats = nil
	srv.polls = 0
	cp := taskCheckpoint{MCPTask: &remoteTask{Session: "s-1", TaskID: "t-1"}}
	cp.Message = "researching" // as the lost attempt last saw it
	if _, err := r.callMCPTask(taskContext(2, &cp, &beats), c, "research", false, false, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if srv.count("tools/call") != 1 {
		t.Fatalf("a resumed call must not call again: %v", srv.methods)
	}
	if len(beats) == 0 {
		t.Fatal("the resumed attempt did not heartbeat")
	}
	for i, b := range beats {
		if c, ok := b.(taskCheckpoint); !ok || c.MCPTask == nil || c.MCPTask.TaskID != "t-1" {
			t.Fatalf("heartbeat %d of the resumed attempt lost the checkpoint: %#v", i, b)
		}
	}

	// Lost before its checkpoint: not repeated unless idempotent.
	beats = nil
	if _, err := r.callMCPTask(taskContext(2, nil, &beats), c, "research", false, false, json.RawMessage(`{}`)); err == nil || !tools.IsNonRetryable(err) ||
		!strings.Contains(err.Error(), "not repeated") {
		t.Fatalf("a non-idempotent call lost before its checkpoint: %v", err)
	}
	if srv.count("tools/call") != 1 {
		t.Fatalf("methods: %v", srv.methods)
	}
	if _, err := r.callMCPTask(taskContext(2, nil, &beats), c, "research", true, false, json.RawMessage(`{}`)); err != nil || srv.count("tools/call") != 2 {
		t.Fatalf("an idempotent call is called again: %v %v", err, srv.methods)
	}
}

// A cancelled call cancels its task on the server.
func TestCallMCPTaskCancelled(t *testing.T) {
	srv := &taskServer{after: 1 << 30}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := &Connection{Name: "x", MCP: &MCP{URL: hs.URL}}
	ctx, cancel := context.WithCancel(context.Background())
	var beats []any
	tctx := tools.NewContext(ctx, auth.Session{ID: "ses"}, "turn_0", "call_1", "x__research", 1, func(d ...any) {
		beats = append(beats, d...)
		if len(beats) == 3 {
			cancel()
		}
	})
	_, err := newRuntime().callMCPTask(tctx, c, "research", false, false, json.RawMessage(`{}`))
	if err == nil || srv.count("tasks/cancel") != 1 {
		t.Fatalf("cancelled: %v, methods %v", err, srv.methods)
	}
}

// A server that answers a 2025-11-25 session and not the 2026-07-28
// extension is not asked for the extension at every discovery.
func TestDiscoveryRemembersAPlainServer(t *testing.T) {
	srv := &taskServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := &Connection{Name: "x", MCP: &MCP{URL: hs.URL}}
	r := newRuntime()
	for range 2 {
		if _, err := r.listHTTP(context.Background(), c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if srv.count("server/discover") != 1 || srv.count("initialize") != 2 {
		t.Fatalf("methods: %v", srv.methods)
	}
}
