package openai

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/internal/providertest"
)

func newModel(t *testing.T, f *providertest.Server) *Model {
	t.Helper()
	m, err := New(Options{APIKey: "sk-test", BaseURL: f.URL + "/v1", Model: "gpt-4.1-mini"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var hello = model.Request{
	System:   "You are terse.",
	Messages: []model.Message{{Role: model.RoleUser, Text: "Hi"}},
}

func TestTextStreamsDeltasInOrder(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	m := newModel(t, f)
	var deltas []string
	resp, err := m.Step(context.Background(), hello, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hello", "!", " How can I help", " you today?"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	if resp.Text != "Hello! How can I help you today?" || resp.Text != strings.Join(deltas, "") {
		t.Errorf("text = %q", resp.Text)
	}
	if resp.FinishReason != model.FinishStop || len(resp.ToolCalls) != 0 {
		t.Errorf("finish = %q, calls = %v", resp.FinishReason, resp.ToolCalls)
	}
	if want := (model.Usage{InputTokens: 2006, OutputTokens: 10, CacheReadTokens: 1920}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if m.ID() != "openai:gpt-4.1-mini" {
		t.Errorf("ID = %q", m.ID())
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("authorization = %q", got)
	}
	providertest.JSONEqual(t, "request", r.Body, map[string]any{
		"model":          "gpt-4.1-mini",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": "Hi"},
		},
	})
}

func TestSeveralToolCalls(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "tool_calls.sse"})
	resp, err := newModel(t, f).Step(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishToolCalls || resp.Text != "" {
		t.Errorf("finish = %q, text = %q", resp.FinishReason, resp.Text)
	}
	want := []model.ToolCall{
		{ID: "call_Vh4QpX2mB9rT7kLz1sNcY8aE", Name: "get_weather", Input: json.RawMessage(`{"location": "San Francisco, CA"}`)},
		{ID: "call_q3Wm8YbN1cZ5xT0vKj7HdR2p", Name: "get_weather", Input: json.RawMessage(`{"location": "Paris, France"}`)},
		{ID: "call_Zr6Tn0Lw3Pq9Xs2Vb5Mk8Jy1", Name: "get_time", Input: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("calls:\ngot  %s\nwant %s", providertest.AsJSON(t, resp.ToolCalls), providertest.AsJSON(t, want))
	}
	if want := (model.Usage{InputTokens: 141, OutputTokens: 68}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestMalformedArgumentsPassThrough(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "malformed_args.sse"})
	resp, err := newModel(t, f).Step(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("calls = %+v", resp.ToolCalls)
	}
	bad := resp.ToolCalls[0]
	if bad.ID != "call_Bf2Kx9Wq4Lm7Tz1Nv8Rc3Hs6" || bad.Name != "get_forecast" {
		t.Errorf("call = %+v", bad)
	}
	// Kept as a JSON string holding what the model wrote.
	if !json.Valid(bad.Input) {
		t.Fatalf("input %s is not valid JSON", bad.Input)
	}
	var raw string
	if err := json.Unmarshal(bad.Input, &raw); err != nil || raw != `{"city": "Paris", "days": 3` {
		t.Errorf("input = %s (%v)", bad.Input, err)
	}
	// It must survive the JSON encoding of the activity result.
	if _, err := json.Marshal(resp); err != nil {
		t.Errorf("response does not encode: %v", err)
	}
	// Empty arguments are an empty object.
	if string(resp.ToolCalls[1].Input) != `{}` {
		t.Errorf("empty arguments = %s", resp.ToolCalls[1].Input)
	}

	// Sent back, the call carries the model's text again.
	f2 := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	req := model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "forecast"},
		{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		{Role: model.RoleTool, ToolResults: []model.ToolResult{
			{CallID: bad.ID, Name: bad.Name, IsError: true, Output: json.RawMessage(`{"error":"invalid input for tool get_forecast: want object, got string","code":"tool.input_invalid"}`)},
			{CallID: resp.ToolCalls[1].ID, Name: "list_cities", Output: json.RawMessage(`["Paris"]`)},
		}},
	}}
	if _, err := newModel(t, f2).Step(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := f2.Requests()[0].Body["messages"].([]any)
	calls := msgs[1].(map[string]any)["tool_calls"].([]any)
	args := calls[0].(map[string]any)["function"].(map[string]any)["arguments"]
	if args != `{"city": "Paris", "days": 3` {
		t.Errorf("arguments sent back = %q", args)
	}
}

func TestCallInput(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:   `{"a":1}`,
		` {"a":1} `: `{"a":1}`,
		``:          `{}`,
		`  `:        `{}`,
		`[1]`:       `[1]`,
		`{"a":`:     `"{\"a\":"`,
		`{'a': 1}`:  `"{'a': 1}"`,
		`a\"b`:      `"a\\\"b"`,
	} {
		if got := string(CallInput(in)); got != want {
			t.Errorf("CallInput(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCompatibleServerToolCalls(t *testing.T) {
	// Every call at index 0 with its own id, and finish_reason "stop".
	f := providertest.New(t, providertest.Reply{Status: 200, File: "ollama_tool_calls.sse"})
	m, err := New(Options{BaseURL: f.URL + "/v1", Model: "qwen3:8b"})
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	resp, err := m.Step(context.Background(), hello, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishToolCalls || resp.Text != "Let me look that up." || !reflect.DeepEqual(deltas, []string{"Let me look that up."}) {
		t.Errorf("finish = %q, text = %q, deltas = %q", resp.FinishReason, resp.Text, deltas)
	}
	want := []model.ToolCall{
		{ID: "call_5kd2v8tq", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_x9w1m3pz", Name: "get_weather", Input: json.RawMessage(`{"city":"Rome"}`)},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("calls = %s", providertest.AsJSON(t, resp.ToolCalls))
	}
	if want := (model.Usage{InputTokens: 187, OutputTokens: 43}); resp.Usage != want {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if h := f.Requests()[0].Header.Get("Authorization"); h != "" && !strings.HasPrefix(h, "Bearer ") {
		t.Errorf("authorization = %q", h)
	}
}

func TestRequestEncodesToolsResultsAndDenials(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	m, err := New(Options{APIKey: "sk-test", BaseURL: f.URL + "/v1", Model: "gpt-4.1-mini", MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{
		System: "sys",
		Tools: []model.ToolDescriptor{
			{Name: "get_weather", Description: "Weather for a city.", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)},
			{Name: "get_time", InputSchema: json.RawMessage(`{}`)},
		},
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "Weather in SF and Paris, and delete my files"},
			{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"location":"SF"}`)},
				{ID: "call_2", Name: "get_weather", Input: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "call_3", Name: "delete_files", Input: json.RawMessage(`{}`)},
				{ID: "call_4", Name: "get_time", Input: json.RawMessage(`{}`)},
			}},
			{Role: model.RoleTool, ToolResults: []model.ToolResult{
				{CallID: "call_1", Name: "get_weather", Output: json.RawMessage(`{"tempF":61}`), Note: "Note: a person edited this call."},
				{CallID: "call_2", Name: "get_weather", Output: json.RawMessage(`{"error":"weather service unavailable","code":"tool.execution_failed"}`), IsError: true},
				{CallID: "call_3", Name: "delete_files", Output: json.RawMessage(`{"error":"The call to delete_files was denied","code":"tool.denied","reason":"not allowed"}`), IsError: true},
				// call_4 has no result.
			}},
			{Role: model.RoleAssistant, Text: "SF is 61°F."},
			{Role: model.RoleUser, Text: "Thanks"},
		},
	}
	if _, err := m.Step(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := f.Requests()[0].Body
	if body["max_completion_tokens"] != float64(512) {
		t.Errorf("max_completion_tokens = %v", body["max_completion_tokens"])
	}
	providertest.JSONEqual(t, "tools", body["tools"], []any{
		map[string]any{"type": "function", "function": map[string]any{
			"name": "get_weather", "description": "Weather for a city.",
			"parameters": map[string]any{
				"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}},
				"required": []any{"location"}, "additionalProperties": false,
			},
		}},
		map[string]any{"type": "function", "function": map[string]any{
			"name": "get_time", "parameters": map[string]any{"type": "object", "properties": map[string]any{}},
		}},
	})
	call := func(id, name, args string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	tool := func(id, content string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
	}
	providertest.JSONEqual(t, "messages", body["messages"], []any{
		map[string]any{"role": "system", "content": "sys"},
		map[string]any{"role": "user", "content": "Weather in SF and Paris, and delete my files"},
		map[string]any{"role": "assistant", "content": "Checking.", "tool_calls": []any{
			call("call_1", "get_weather", `{"location":"SF"}`),
			call("call_2", "get_weather", `{"location":"Paris"}`),
			call("call_3", "delete_files", `{}`),
			call("call_4", "get_time", `{}`),
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": []any{
			map[string]any{"type": "text", "text": `{"tempF":61}`}, map[string]any{"type": "text", "text": "Note: a person edited this call."}}},
		tool("call_2", `{"error":"weather service unavailable","code":"tool.execution_failed"}`),
		tool("call_3", `{"error":"The call to delete_files was denied","code":"tool.denied","reason":"not allowed"}`),
		tool("call_4", missingResult),
		map[string]any{"role": "assistant", "content": "SF is 61°F."},
		map[string]any{"role": "user", "content": "Thanks"},
	})
}

func stepErr(t *testing.T, f *providertest.Server) error {
	t.Helper()
	_, err := newModel(t, f).Step(context.Background(), hello, nil)
	if err == nil {
		t.Fatal("Step succeeded, want an error")
	}
	return err
}

func TestRateLimitIsRetryableWithRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		want    time.Duration
	}{
		{map[string]string{"retry-after": "3"}, 3 * time.Second},
		{map[string]string{"retry-after-ms": "343", "retry-after": "1"}, 343 * time.Millisecond},
	} {
		tc.headers["x-request-id"] = "req_8f1c2d3e4b5a69788796a5b4c3d2e1f0"
		f := providertest.New(t, providertest.Reply{Status: 429, File: "error_429.json", Headers: tc.headers})
		err := stepErr(t, f)
		if !model.IsRetryable(err) {
			t.Errorf("429 not retryable: %v", err)
		}
		if d, ok := model.RetryDelay(err); !ok || d != tc.want {
			t.Errorf("RetryDelay = %v, %v; want %v", d, ok, tc.want)
		}
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" || e.RequestID != "req_8f1c2d3e4b5a69788796a5b4c3d2e1f0" {
			t.Errorf("error = %#v", e)
		}
		if n := len(f.Requests()); n != 1 {
			t.Errorf("%d requests; the SDK must not retry on its own", n)
		}
	}
}

func TestQuotaExhaustedIsNotRetryable(t *testing.T) {
	err := stepErr(t, providertest.New(t, providertest.Reply{Status: 429, File: "error_429_quota.json"}))
	if model.IsRetryable(err) {
		t.Errorf("insufficient_quota retryable: %v", err)
	}
	if !strings.Contains(err.Error(), "billing") {
		t.Errorf("message = %q", err)
	}
}

func TestServerErrorIsRetryable(t *testing.T) {
	for _, status := range []int{500, 502, 503} {
		f := providertest.New(t, providertest.Reply{Status: status, File: "error_500.json"})
		err := stepErr(t, f)
		if !model.IsRetryable(err) {
			t.Errorf("%d not retryable: %v", status, err)
		}
		if _, ok := model.RetryDelay(err); ok {
			t.Errorf("%d: a delay without retry-after", status)
		}
		if n := len(f.Requests()); n != 1 {
			t.Errorf("%d: %d requests; the SDK must not retry on its own", status, n)
		}
	}
}

func TestAuthErrorIsNotRetryableAndSaysWhatToDo(t *testing.T) {
	err := stepErr(t, providertest.New(t, providertest.Reply{Status: 401, File: "error_401.json"}))
	if model.IsRetryable(err) {
		t.Errorf("401 retryable: %v", err)
	}
	for _, want := range []string{"openai: 401 invalid_api_key", "Incorrect API key provided", "set OPENAI_API_KEY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "sk-test") {
		t.Errorf("message leaks the key: %q", err)
	}
}

func TestClientErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		file   string
		want   []string
	}{
		{404, "error_404.json", []string{"404 model_not_found", "gpt-9-ultra", "EVE_MODEL"}},
		{400, "error_400_context.json", []string{"400 context_length_exceeded", "context window"}},
		{404, "ollama_404.json", []string{`model "llama9" not found`, "ollama pull"}},
		{400, "ollama_400_tools.json", []string{"does not support tools", "tool calling"}},
		{404, "vllm_404.json", []string{"404 NotFoundError: The model `Qwen/Qwen3-9B` does not exist.", "EVE_MODEL"}},
		{403, "error_403.json", []string{"403 unsupported_country_region_territory", "permissions"}},
	} {
		err := stepErr(t, providertest.New(t, providertest.Reply{Status: tc.status, File: tc.file}))
		if model.IsRetryable(err) {
			t.Errorf("%s: retryable: %v", tc.file, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.file, err, w)
			}
		}
	}
}

func TestErrorMidStreamIsRetryable(t *testing.T) {
	var deltas []string
	f := providertest.New(t, providertest.Reply{Status: 200, File: "midstream_error.sse"})
	_, err := newModel(t, f).Step(context.Background(), hello, func(d string) { deltas = append(deltas, d) })
	if err == nil || !model.IsRetryable(err) {
		t.Fatalf("err = %v, want retryable", err)
	}
	if !strings.Contains(err.Error(), "server_error") || !strings.Contains(err.Error(), "The server had an error") {
		t.Errorf("message = %q", err)
	}
	if !reflect.DeepEqual(deltas, []string{"Sure"}) {
		t.Errorf("deltas = %q", deltas)
	}
}

func TestStreamWithoutFinishIsRetryable(t *testing.T) {
	if err := stepErr(t, providertest.New(t, providertest.Reply{Status: 200, File: "no_finish.sse"})); !model.IsRetryable(err) {
		t.Errorf("not retryable: %v", err)
	}
}

func TestTransportFailures(t *testing.T) {
	providertest.TransportFailures(t, func(t *testing.T, f *providertest.Server) model.Model { return newModel(t, f) }, hello)
}

func TestNewChecksOptions(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvBaseURL, "")
	if _, err := New(Options{Model: "gpt-4.1-mini"}); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("no key: err = %v", err)
	}
	if _, err := New(Options{APIKey: "k"}); err == nil || !strings.Contains(err.Error(), "EVE_MODEL") {
		t.Errorf("no model: err = %v", err)
	}
	if _, err := New(Options{Model: "m", BaseURL: "localhost:11434/v1"}); err == nil || !strings.Contains(err.Error(), "OPENAI_BASE_URL") {
		t.Errorf("bad base URL: err = %v", err)
	}
	// Another server needs no key; the base URL comes from the environment.
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	t.Setenv(EnvBaseURL, f.URL+"/v1")
	m, err := New(Options{Model: "llama3.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), hello, nil); err != nil {
		t.Fatal(err)
	}
	if h := f.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("authorization = %q, want none", h)
	}
	if _, ok := f.Requests()[0].Body["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent without MaxTokens")
	}
}
