package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
)

func bundle(t *testing.T, c *catalog.Catalog, f catalog.Format) catalog.ToolNameMap {
	t.Helper()
	res, err := c.Get(catalog.GetToolsOptions{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	return res.NameMap
}

// barrierExecutor makes every call wait until n calls are in flight, which
// only happens if they run concurrently. Later calls finish first.
func barrier(n int) (catalogtest.Handler, *sync.WaitGroup) {
	var wg sync.WaitGroup
	wg.Add(n)
	var order atomic.Int32
	return func(ctx context.Context, opts catalog.ExecuteToolOptions) (json.RawMessage, error) {
		wg.Done()
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			return nil, errors.New("calls did not run concurrently")
		}
		var in map[string]any
		_ = json.Unmarshal(opts.Input, &in)
		if d, ok := in["sleepMs"].(float64); ok {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
		order.Add(1)
		return opts.Input, nil
	}, &wg
}

func TestExecuteAnthropicToolCalls(t *testing.T) {
	c := catalog.Must(catalog.New(
		valid("kit.slow"), valid("kit.fast"), valid("kit.fails"),
	))
	nm := bundle(t, c, catalog.FormatAnthropic)
	h, _ := barrier(3)
	exec := &catalogtest.Executor{Handlers: map[string]catalogtest.Handler{
		"kit.slow": h,
		"kit.fast": h,
		"kit.fails": func(ctx context.Context, opts catalog.ExecuteToolOptions) (json.RawMessage, error) {
			_, _ = h(ctx, opts)
			return nil, errors.New("mailbox full")
		},
	}}
	calls := []catalog.AnthropicToolCall{
		{Type: "tool_use", ID: "toolu_1", Name: "kit_slow", Input: json.RawMessage(`{"q":"a","sleepMs":50}`)},
		{Type: "tool_use", ID: "toolu_2", Name: "kit.fast", Input: json.RawMessage(`{"q":"b"}`)}, // canonical, not wire: unmapped
		{Type: "tool_use", ID: "toolu_3", Name: "kit_fails", Input: json.RawMessage(`{"q":"c"}`)},
		{Type: "tool_use", ID: "toolu_4", Name: "rm_rf", Input: json.RawMessage(`{}`)},
		{Type: "tool_use", ID: "toolu_5", Name: "kit_fast", Input: json.RawMessage(`{"q":"e"}`)},
		{Type: "tool_use", ID: "toolu_6", Name: "kit_fast", Input: json.RawMessage(`["not","an","object"]`)},
	}
	out := catalog.ExecuteAnthropicToolCalls(context.Background(), exec, calls, catalog.ExecuteToolCallsOptions{
		NameMap: nm, UserID: "user_42", ConnectionID: "conn_1", Mode: catalog.ModeSync,
	})
	if len(out) != len(calls) {
		t.Fatalf("%d results for %d calls", len(out), len(calls))
	}
	for i, b := range out {
		if b.Type != "tool_result" || b.ToolUseID != calls[i].ID {
			t.Errorf("result %d: %+v does not answer call %s", i, b, calls[i].ID)
		}
	}
	expect := []struct {
		isErr   bool
		content string
	}{
		{false, `{"q":"a","sleepMs":50}`},
		{true, `unknown_tool: unknown tool "kit.fast"`},
		{true, `tool kit.fails failed: tool_error: mailbox full`},
		{true, `unknown_tool: unknown tool "rm_rf"`},
		{false, `{"q":"e"}`},
		{true, `tool kit.fast failed: invalid_input: tool input must be a JSON object`},
	}
	for i, e := range expect {
		if out[i].IsError != e.isErr || !strings.HasPrefix(out[i].Content, e.content) {
			t.Errorf("result %d = %+v; want is_error=%v content %q", i, out[i], e.isErr, e.content)
		}
	}
	// Unmapped and malformed calls were never executed.
	ran := map[string]int{}
	for _, call := range exec.Calls() {
		ran[call.Tool]++
		if call.Opts.UserID != "user_42" || call.Opts.ConnectionID != "conn_1" || call.Opts.Mode != catalog.ModeSync {
			t.Errorf("options not passed through: %+v", call.Opts)
		}
		if !strings.HasPrefix(call.Opts.IdempotencyKey, "toolcall:toolu_") {
			t.Errorf("idempotency key %q", call.Opts.IdempotencyKey)
		}
	}
	if len(exec.Calls()) != 3 || ran["kit.slow"] != 1 || ran["kit.fast"] != 1 || ran["kit.fails"] != 1 {
		t.Errorf("executed %v; want exactly slow, fast (toolu_5) and fails", ran)
	}
	// Wire JSON of a block.
	b, _ := json.Marshal(out[2])
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["type"] != "tool_result" || m["tool_use_id"] != "toolu_3" || m["is_error"] != true {
		t.Errorf("block JSON %s", b)
	}
	b, _ = json.Marshal(out[0])
	if strings.Contains(string(b), "is_error") {
		t.Errorf("successful block carries is_error: %s", b)
	}
}

func TestExecuteOpenAIToolCalls(t *testing.T) {
	c := catalogtest.Catalog()
	nm := bundle(t, c, catalog.FormatOpenAI)
	exec := &catalogtest.Executor{Handlers: map[string]catalogtest.Handler{
		"slack.send_message": func(ctx context.Context, opts catalog.ExecuteToolOptions) (json.RawMessage, error) {
			return nil, errors.New("channel_not_found")
		},
		"gmail.get_email": func(ctx context.Context, opts catalog.ExecuteToolOptions) (json.RawMessage, error) {
			return json.RawMessage(`"plain text body"`), nil
		},
	}}
	raw := `[
		{"id":"call_1","type":"function","function":{"name":"gmail_search_emails","arguments":"{\"query\":\"from:ana\"}"}},
		{"id":"call_2","type":"function","function":{"name":"gmail_search_emails","arguments":{"query":"object args"}}},
		{"id":"call_3","type":"function","function":{"name":"gmail_list_labels","arguments":""}},
		{"id":"call_4","type":"function","function":{"name":"gmail_search_emails","arguments":"{not json"}},
		{"id":"call_5","type":"function","function":{"name":"shell_exec","arguments":"{}"}},
		{"id":"call_6","type":"function","function":{"name":"slack_send_message","arguments":"{\"channel\":\"x\",\"text\":\"hi\"}"}},
		{"id":"call_7","type":"custom","custom":{"name":"gmail_search_emails","input":"{\"query\":\"custom json\"}"}},
		{"id":"call_8","type":"custom","custom":{"name":"slack_set_status","input":"in a meeting"}},
		{"id":"call_9","type":"function","function":{"name":"gmail_get_email","arguments":"{\"messageId\":\"m1\"}"}}
	]`
	calls, err := catalog.DecodeOpenAIToolCalls([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	out := catalog.ExecuteOpenAIToolCalls(context.Background(), exec, calls, catalog.ExecuteToolCallsOptions{NameMap: nm})
	if len(out) != len(calls) {
		t.Fatalf("%d results", len(out))
	}
	for i, m := range out {
		if m.Role != "tool" || m.ToolCallID != calls[i].CallID() {
			t.Errorf("message %d: %+v", i, m)
		}
	}
	type errBody struct {
		Error *catalog.ExecutionError `json:"error"`
	}
	errOf := func(i int) *catalog.ExecutionError {
		var e errBody
		if json.Unmarshal([]byte(out[i].Content), &e) != nil {
			return nil
		}
		return e.Error
	}
	okContains := map[int]string{
		0: `"query":"from:ana"`,
		1: `"query":"object args"`,
		2: `"input":{},"tool":"gmail.list_labels"`,
		6: `"query":"custom json"`,
		7: `"input":{"input":"in a meeting"}`,
		8: `plain text body`,
	}
	for i, want := range okContains {
		if errOf(i) != nil || !strings.Contains(out[i].Content, want) {
			t.Errorf("message %d content %q; want it to contain %q", i, out[i].Content, want)
		}
	}
	if out[8].Content != "plain text body" {
		t.Errorf("string output rendered as %q", out[8].Content)
	}
	errCodes := map[int]string{3: catalog.CodeInvalidInput, 4: catalog.CodeUnknownTool, 5: "tool_error"}
	for i, code := range errCodes {
		if e := errOf(i); e == nil || e.Code != code {
			t.Errorf("message %d content %q; want error code %s", i, out[i].Content, code)
		}
	}
	if e := errOf(5); e == nil || e.Message != "channel_not_found" {
		t.Errorf("failing call: %q", out[5].Content)
	}
	for _, call := range exec.Calls() {
		if call.Tool == "shell_exec" || call.Tool == "" {
			t.Errorf("unmapped call executed: %+v", call)
		}
	}
	if n := len(exec.Calls()); n != 7 {
		t.Errorf("%d executions; want 7 (all but the bad-JSON and unmapped calls)", n)
	}
}

func TestDecodeOpenAIToolCallsRejectsUnknownType(t *testing.T) {
	if _, err := catalog.DecodeOpenAIToolCalls([]byte(`[{"id":"x","type":"web_search"}]`)); err == nil {
		t.Fatal("unknown type accepted")
	}
}

func TestExecuteConcurrencyAndOrder(t *testing.T) {
	c := catalog.Must(catalog.New(valid("kit.t")))
	nm := bundle(t, c, catalog.FormatOpenAI)
	const n = 8
	h, _ := barrier(n)
	exec := &catalogtest.Executor{Handlers: map[string]catalogtest.Handler{"kit.t": h}}
	var calls []catalog.OpenAIToolCall
	for i := 0; i < n; i++ {
		// Earlier calls sleep longer, so they finish last.
		args, _ := json.Marshal(map[string]any{"q": string(rune('a' + i)), "sleepMs": (n - i) * 5})
		calls = append(calls, &catalog.OpenAIFunctionToolCall{ID: string(rune('A' + i)), Type: "function",
			Function: catalog.OpenAIFunctionCall{Name: "kit_t", Arguments: args}})
	}
	out := catalog.ExecuteOpenAIToolCalls(context.Background(), exec, calls, catalog.ExecuteToolCallsOptions{NameMap: nm})
	for i, m := range out {
		if m.ToolCallID != string(rune('A'+i)) || !strings.Contains(m.Content, `"q":"`+string(rune('a'+i))+`"`) {
			t.Fatalf("result %d = %+v: order not kept", i, m)
		}
	}
}

func TestExecuteMaxConcurrencyAndTimeout(t *testing.T) {
	c := catalog.Must(catalog.New(valid("kit.t"), valid("kit.hang")))
	nm := bundle(t, c, catalog.FormatAnthropic)
	var inFlight, peak atomic.Int32
	exec := catalog.ExecutorFunc(func(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
		if name == "kit.hang" {
			<-ctx.Done()
			return catalog.ExecutionResult{}, ctx.Err()
		}
		now := inFlight.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		inFlight.Add(-1)
		return catalog.ExecutionResult{Status: catalog.StatusSucceeded, Output: json.RawMessage(`{"ok":true}`)}, nil
	})
	var calls []catalog.AnthropicToolCall
	for i := 0; i < 6; i++ {
		calls = append(calls, catalog.AnthropicToolCall{Type: "tool_use", ID: string(rune('a' + i)), Name: "kit_t", Input: json.RawMessage(`{"q":"x"}`)})
	}
	calls = append(calls, catalog.AnthropicToolCall{Type: "tool_use", ID: "h", Name: "kit_hang"})
	start := time.Now()
	out := catalog.ExecuteAnthropicToolCalls(context.Background(), exec, calls, catalog.ExecuteToolCallsOptions{NameMap: nm, MaxConcurrency: 2, TimeoutMs: 200})
	if p := peak.Load(); p > 2 {
		t.Errorf("peak concurrency %d > 2", p)
	}
	last := out[len(out)-1]
	if !last.IsError || !strings.Contains(last.Content, catalog.CodeTimeout) {
		t.Errorf("hanging call: %+v", last)
	}
	// The hanging call ends at its 200 ms timeout (the run takes about
	// 250 ms); a timeout read in the wrong unit would take minutes. The
	// bound leaves a loaded machine room.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v", took)
	}
	for _, b := range out[:6] {
		if b.IsError || b.Content != `{"ok":true}` {
			t.Errorf("call %s: %+v", b.ToolUseID, b)
		}
	}
}

type waitingExecutor struct {
	waited atomic.Int32
}

func (w *waitingExecutor) Execute(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
	return catalog.ExecutionResult{ID: "exec_" + opts.IdempotencyKey, Tool: name, Status: catalog.StatusRunning}, nil
}

func (w *waitingExecutor) Wait(ctx context.Context, id string, poll time.Duration) (catalog.ExecutionResult, error) {
	w.waited.Add(1)
	if poll != 20*time.Millisecond {
		return catalog.ExecutionResult{}, errors.New("poll interval not passed")
	}
	if strings.HasSuffix(id, "bad") {
		return catalog.ExecutionResult{ID: id, Status: catalog.StatusTimedOut}, nil
	}
	return catalog.ExecutionResult{ID: id, Status: catalog.StatusSucceeded, Output: json.RawMessage(`{"done":"` + id + `"}`)}, nil
}

func TestExecuteWaitsForAsyncExecutions(t *testing.T) {
	c := catalog.Must(catalog.New(valid("kit.t")))
	nm := bundle(t, c, catalog.FormatAnthropic)
	w := &waitingExecutor{}
	out := catalog.ExecuteAnthropicToolCalls(context.Background(), w, []catalog.AnthropicToolCall{
		{Type: "tool_use", ID: "good", Name: "kit_t", Input: json.RawMessage(`{"q":"x"}`)},
		{Type: "tool_use", ID: "bad", Name: "kit_t", Input: json.RawMessage(`{"q":"x"}`)},
	}, catalog.ExecuteToolCallsOptions{NameMap: nm, PollMs: 20, Mode: catalog.ModeAsync})
	if out[0].IsError || out[0].Content != `{"done":"exec_toolcall:good"}` {
		t.Errorf("awaited result: %+v", out[0])
	}
	if !out[1].IsError || !strings.Contains(out[1].Content, "timed_out") {
		t.Errorf("timed out result: %+v", out[1])
	}
	// Without a waiter, a running execution is reported, not an error.
	running := catalog.ExecutorFunc(func(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
		return catalog.ExecutionResult{ID: "exec_9", Status: catalog.StatusQueued}, nil
	})
	out = catalog.ExecuteAnthropicToolCalls(context.Background(), running, []catalog.AnthropicToolCall{{Type: "tool_use", ID: "x", Name: "kit_t"}}, catalog.ExecuteToolCallsOptions{NameMap: nm})
	if out[0].IsError || out[0].Content != `{"executionId":"exec_9","status":"queued"}` {
		t.Errorf("queued result: %+v", out[0])
	}
}

func TestExecutePanicsAndGoErrors(t *testing.T) {
	c := catalog.Must(catalog.New(valid("kit.panics"), valid("kit.errs")))
	nm := bundle(t, c, catalog.FormatOpenAI)
	exec := catalog.ExecutorFunc(func(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
		if name == "kit.panics" {
			panic("boom")
		}
		return catalog.ExecutionResult{}, errors.New("temporal unavailable")
	})
	out := catalog.ExecuteOpenAIToolCalls(context.Background(), exec, []catalog.OpenAIToolCall{
		&catalog.OpenAIFunctionToolCall{ID: "1", Type: "function", Function: catalog.OpenAIFunctionCall{Name: "kit_panics", Arguments: json.RawMessage(`"{}"`)}},
		&catalog.OpenAIFunctionToolCall{ID: "2", Type: "function", Function: catalog.OpenAIFunctionCall{Name: "kit_errs", Arguments: json.RawMessage(`"{}"`)}},
	}, catalog.ExecuteToolCallsOptions{NameMap: nm, IdempotencyKey: func(id, tool string) string { return tool + "/" + id }})
	if !strings.Contains(out[0].Content, "executor panicked: boom") || !strings.Contains(out[1].Content, "temporal unavailable") {
		t.Fatalf("results %+v", out)
	}
}

func TestValidatingExecutor(t *testing.T) {
	c := catalogtest.Catalog()
	inner := &catalogtest.Executor{}
	exec := catalog.ValidatingExecutor(c, inner)
	nm := bundle(t, c, catalog.FormatOpenAI)
	out := catalog.ExecuteOpenAIToolCalls(context.Background(), exec, []catalog.OpenAIToolCall{
		// Invalid: missing required fields, wrong type.
		&catalog.OpenAIFunctionToolCall{ID: "1", Type: "function", Function: catalog.OpenAIFunctionCall{Name: "gmail_send_email", Arguments: json.RawMessage(`"{\"to\":\"ana@example.com\"}"`)}},
		// Strict-mode style: optional properties sent as null.
		&catalog.OpenAIFunctionToolCall{ID: "2", Type: "function", Function: catalog.OpenAIFunctionCall{Name: "gmail_search_emails", Arguments: json.RawMessage(`"{\"query\":\"x\",\"pageSize\":null,\"pageToken\":null}"`)}},
		// Async by annotation.
		&catalog.OpenAIFunctionToolCall{ID: "3", Type: "function", Function: catalog.OpenAIFunctionCall{Name: "github_run_workflow", Arguments: json.RawMessage(`{"owner":"o","repo":"r","workflowId":"ci.yml","ref":"main"}`)}},
	}, catalog.ExecuteToolCallsOptions{NameMap: nm})
	if !strings.Contains(out[0].Content, catalog.CodeInvalidInput) || !strings.Contains(out[0].Content, "/to: got string, want array") || !strings.Contains(out[0].Content, "missing properties") {
		t.Errorf("invalid input: %s", out[0].Content)
	}
	calls := inner.Calls()
	if len(calls) != 2 {
		t.Fatalf("inner executor ran %d calls; want 2", len(calls))
	}
	for _, call := range calls {
		switch call.Tool {
		case "gmail.search_emails":
			if string(call.Opts.Input) != `{"query":"x"}` {
				t.Errorf("nulls not stripped: %s", call.Opts.Input)
			}
			if call.Opts.Mode != "" {
				t.Errorf("sync tool mode %q", call.Opts.Mode)
			}
		case "github.run_workflow":
			if call.Opts.Mode != catalog.ModeAsync {
				t.Errorf("async tool mode %q", call.Opts.Mode)
			}
		default:
			t.Errorf("unexpected call %s", call.Tool)
		}
	}
}
