package toolsclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// catalogServer serves the demo catalog (no Temporal: executions answer 503).
func catalogServer(t *testing.T) *httptest.Server {
	t.Helper()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := toolsapi.New(toolsapi.Options{Agent: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	return hs
}

func TestGetFormatsAndSearch(t *testing.T) {
	c := New(catalogServer(t).URL, "", WithRetries(0))
	ctx := context.Background()
	for _, f := range catalog.Formats {
		res, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: f, Toolkits: []string{"demo"}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		switch f {
		case catalog.FormatCanonical:
			n = len(res.Canonical())
		case catalog.FormatAnthropic:
			n = len(res.Anthropic())
		case catalog.FormatOpenAI:
			n = len(res.OpenAI())
		case catalog.FormatAISDK:
			n = len(res.AISDK())
		case catalog.FormatMCP:
			n = len(res.MCP())
		}
		wire := "demo_get_weather"
		if f == catalog.FormatMCP {
			wire = "demo.get_weather" // MCP keeps canonical names
		}
		if res.Format != f || n == 0 || len(res.Raw) == 0 || res.NameMap.CanonicalToWire["demo.get_weather"] != wire {
			t.Fatalf("%s: %d tools, %+v", f, n, res.NameMap)
		}
	}
	sr, err := c.Tools.Search(ctx, catalog.SearchToolsOptions{Query: "refund a charge"})
	if err != nil || len(sr.Tools) == 0 || sr.Tools[0].Name != "demo.refund_charge" {
		t.Fatalf("search = %+v %v", sr, err)
	}
	_, err = c.Tools.Get(ctx, catalog.GetToolsOptions{Toolkits: []string{"nope"}})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "unknown_toolkit" {
		t.Fatalf("unknown toolkit: %v", err)
	}
	_, err = c.Tools.Execute(ctx, "demo.get_weather", ExecuteToolOptions{Input: map[string]any{"city": 3}})
	if !errors.As(err, &ae) || ae.Status != 400 || len(ae.Violations) != 1 || ae.Violations[0].InstanceLocation != "/city" {
		t.Fatalf("invalid input: %v %+v", err, ae)
	}
	// Through the client's executor, the refusal is a result the model reads.
	blocks := catalog.ExecuteAnthropicToolCalls(ctx, c.Executor(), []catalog.AnthropicToolCall{
		{Type: "tool_use", ID: "t1", Name: "demo_get_weather", Input: json.RawMessage(`{"city":3}`)},
	}, catalog.ExecuteToolCallsOptions{NameMap: catalog.ToolNameMap{WireToCanonical: map[string]string{"demo_get_weather": "demo.get_weather"}}})
	if !blocks[0].IsError || blocks[0].ToolUseID != "t1" {
		t.Fatalf("blocks = %+v", blocks)
	}
}

// A 503 is retried with the same idempotency key, so the retry joins the
// first attempt's execution; a run timeout comes back as RunTimeoutError.
func TestRetrySameKeyAndRunTimeout(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			IdempotencyKey string `json:"idempotencyKey"`
			UserID         string `json:"userId"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("Authorization") != "Bearer k" || body.UserID != "u" {
			w.WriteHeader(401)
			return
		}
		mu.Lock()
		keys = append(keys, body.IdempotencyKey)
		n := len(keys)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/tools/x.run/run":
			w.WriteHeader(http.StatusGatewayTimeout)
			_, _ = io.WriteString(w, `{"ok":false,"error":"tool x.run did not finish within 1s; the execution goes on","code":"run_timeout","executionId":"exec_1","status":"running"}`)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"ok":false,"error":"retry","code":"unavailable"}`)
		default:
			_, _ = io.WriteString(w, `{"id":"exec_1","tool":"x.y","status":"succeeded","output":{"ok":true}}`)
		}
	}))
	defer hs.Close()
	c := New(hs.URL, "k", WithUserID("u"))
	res, err := c.Tools.Execute(context.Background(), "x.y", ExecuteToolOptions{})
	if err != nil || res.Status != catalog.StatusSucceeded {
		t.Fatalf("execute = %+v %v", res, err)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("keys = %v", keys)
	}
	_, err = c.Tools.Run(context.Background(), "x.run", nil, RunToolOptions{})
	var rt *RunTimeoutError
	if !errors.As(err, &rt) || rt.ExecutionID != "exec_1" || rt.Status != catalog.StatusRunning {
		t.Fatalf("run = %v", err)
	}
}
