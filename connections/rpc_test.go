package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The raw client reads JSON and event-stream answers, keeps the session,
// answers the server's requests on a stream, and tells a session the
// server forgot from other failures.
func TestRPCClient(t *testing.T) {
	var mu sync.Mutex
	var answered []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		var m rpcMessage
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		if r.Header.Get("MCP-Protocol-Version") != rpcVersion {
			http.Error(w, "no version header", http.StatusBadRequest)
			return
		}
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "sess-1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"capabilities":{"tasks":{}}}}`, m.ID)
		case r.Header.Get("Mcp-Session-Id") == "gone":
			http.NotFound(w, r)
		case r.Header.Get("Mcp-Session-Id") != "sess-1":
			http.Error(w, "no session", http.StatusBadRequest)
		case m.Method == "" && len(m.ID) > 0: // an answer to the server's request
			mu.Lock()
			answered = append(answered, string(m.Result))
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "tasks/result":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\",\n")
			fmt.Fprint(w, "data: \"params\":{\"message\":\"which?\"}}\n\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", m.ID)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no %s"}}`, m.ID, m.Method)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var notes []string
	rc := &rpcClient{url: srv.URL, hc: srv.Client(),
		notified: func(method string, _ json.RawMessage) { notes = append(notes, method) },
		serve: func(_ context.Context, method string, params json.RawMessage) (any, error) {
			return map[string]string{"action": "accept", "asked": method}, nil
		}}
	caps, err := rc.initialize(ctx, clientCapabilities())
	if err != nil || !strings.Contains(string(caps), "tasks") || rc.session != "sess-1" {
		t.Fatalf("initialize: %s %v (session %q)", caps, err, rc.session)
	}
	res, err := rc.call(ctx, "tasks/result", map[string]any{"taskId": "t"})
	if err != nil || string(res) != `{"content":[]}` {
		t.Fatalf("tasks/result: %s %v", res, err)
	}
	if len(answered) != 1 || !strings.Contains(answered[0], `"asked":"elicitation/create"`) || len(notes) != 1 || notes[0] != "notifications/progress" {
		t.Fatalf("the server's request answered %v, notifications %v", answered, notes)
	}
	var re *rpcError
	if _, err := rc.call(ctx, "tasks/list", nil); !errors.As(err, &re) || re.Code != -32601 {
		t.Fatalf("a JSON-RPC error: %v", err)
	}
	rc.session = "gone"
	if _, err := rc.call(ctx, "tasks/get", nil); !errors.Is(err, errSessionGone) {
		t.Fatalf("a forgotten session: %v", err)
	}
}
