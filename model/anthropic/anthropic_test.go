package anthropic

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
	m, err := New(Options{APIKey: "sk-ant-test", BaseURL: f.URL, Model: "claude-sonnet-4-5", MaxTokens: 1024})
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
	if want := []string{"Hello", "! How can", " I help you today?"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	if resp.Text != strings.Join(deltas, "") || resp.Text != "Hello! How can I help you today?" {
		t.Errorf("text = %q", resp.Text)
	}
	if resp.FinishReason != model.FinishStop || len(resp.ToolCalls) != 0 {
		t.Errorf("finish = %q, calls = %v", resp.FinishReason, resp.ToolCalls)
	}
	// input_tokens leaves out the cache; eve's InputTokens counts it.
	want := model.Usage{InputTokens: 21 + 2048 + 1188, OutputTokens: 12, CacheReadTokens: 2048, CacheWriteTokens: 1188}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if m.ID() != "anthropic:claude-sonnet-4-5" {
		t.Errorf("ID = %q", m.ID())
	}

	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/messages" {
		t.Errorf("path = %q", r.Path)
	}
	if r.Header.Get("X-Api-Key") != "sk-ant-test" || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("headers: x-api-key %q, anthropic-version %q", r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version"))
	}
	providertest.JSONEqual(t, "request", r.Body, map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": 1024,
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "You are terse."}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}},
		},
	})
}

func TestNilStream(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	resp, err := newModel(t, f).Step(context.Background(), hello, nil)
	if err != nil || resp.Text != "Hello! How can I help you today?" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
}

func TestSeveralToolCalls(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "tool_use.sse"})
	var deltas []string
	resp, err := newModel(t, f).Step(context.Background(), hello, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishToolCalls {
		t.Errorf("finish = %q", resp.FinishReason)
	}
	if resp.Text != "I'll check the weather in both cities." || strings.Join(deltas, "") != resp.Text {
		t.Errorf("text = %q, deltas = %q", resp.Text, deltas)
	}
	want := []model.ToolCall{
		{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Input: json.RawMessage(`{"location": "San Francisco, CA", "unit": "fahrenheit"}`)},
		{ID: "toolu_01VLsTwRQnp1mYBBdRZ5oDrC", Name: "get_weather", Input: json.RawMessage(`{"location": "Paris, France"}`)},
		{ID: "toolu_01Aq8Ve9fHk3xoVz1W4pLgQ2", Name: "get_time", Input: json.RawMessage(`{}`)},
	}
	if len(resp.ToolCalls) != len(want) {
		t.Fatalf("calls = %+v", resp.ToolCalls)
	}
	for i, c := range resp.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name {
			t.Errorf("call %d = %s %s, want %s %s", i, c.ID, c.Name, want[i].ID, want[i].Name)
		}
		providertest.JSONEqual(t, "input of "+c.ID, json.RawMessage(c.Input), json.RawMessage(want[i].Input))
	}
	if want := (model.Usage{InputTokens: 472, OutputTokens: 171}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestMaxTokensCutsToolInput(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "max_tokens_tool.sse"})
	resp, err := newModel(t, f).Step(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishLength || len(resp.ToolCalls) != 1 {
		t.Fatalf("finish = %q, calls = %+v", resp.FinishReason, resp.ToolCalls)
	}
	// The cut-off input is kept, as a JSON string: valid JSON for Temporal,
	// not an object, so input validation rejects it.
	var s string
	if err := json.Unmarshal(resp.ToolCalls[0].Input, &s); err != nil {
		t.Fatalf("input %s is not a JSON string: %v", resp.ToolCalls[0].Input, err)
	}
	if s != `{"path": "notes.md", "content": "# Notes\n\nThe first` {
		t.Errorf("raw input = %q", s)
	}
}

func TestRequestEncodesToolsResultsAndDenials(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	req := model.Request{
		System: "sys",
		Tools: []model.ToolDescriptor{
			{Name: "get_weather", Description: "Weather for a city.", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)},
			{Name: "get_time", InputSchema: json.RawMessage(`{"type":"object"}`)},
		},
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "Weather in SF and Paris, and delete my files"},
			{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Input: json.RawMessage(`{"location":"SF"}`)},
				{ID: "toolu_2", Name: "get_weather", Input: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "toolu_3", Name: "delete_files", Input: json.RawMessage(`{}`)},
			}},
			{Role: model.RoleTool, ToolResults: []model.ToolResult{
				{CallID: "toolu_1", Name: "get_weather", Output: json.RawMessage(`{"tempF":61}`), Note: "Note: a person edited this call."},
				{CallID: "toolu_2", Name: "get_weather", Output: json.RawMessage(`{"error":"weather service unavailable","code":"tool.execution_failed"}`), IsError: true},
				{CallID: "toolu_3", Name: "delete_files", Output: json.RawMessage(`{"error":"The call to delete_files was denied","code":"tool.denied","reason":"not allowed"}`), IsError: true},
			}},
			{Role: model.RoleAssistant, Text: "SF is 61°F; Paris is unavailable; I may not delete files."},
			{Role: model.RoleUser, Text: "Thanks"},
		},
	}
	if _, err := newModel(t, f).Step(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := f.Requests()[0].Body
	providertest.JSONEqual(t, "tools", body["tools"], []any{
		map[string]any{"name": "get_weather", "description": "Weather for a city.", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}},
			"required": []any{"location"}, "additionalProperties": false,
		}},
		map[string]any{"name": "get_time", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}},
	})
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	providertest.JSONEqual(t, "messages", body["messages"], []any{
		map[string]any{"role": "user", "content": []any{text("Weather in SF and Paris, and delete my files")}},
		map[string]any{"role": "assistant", "content": []any{
			text("Checking."),
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"location": "SF"}},
			map[string]any{"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": map[string]any{"location": "Paris"}},
			map[string]any{"type": "tool_use", "id": "toolu_3", "name": "delete_files", "input": map[string]any{}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{text(`{"tempF":61}`), text("Note: a person edited this call.")}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
				"content": []any{text(`{"error":"weather service unavailable","code":"tool.execution_failed"}`)}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_3", "is_error": true,
				"content": []any{text(`{"error":"The call to delete_files was denied","code":"tool.denied","reason":"not allowed"}`)}},
		}},
		map[string]any{"role": "assistant", "content": []any{text("SF is 61°F; Paris is unavailable; I may not delete files.")}},
		map[string]any{"role": "user", "content": []any{text("Thanks")}},
	})
}

func TestRequestRepairsHistory(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	req := model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "go"},
		// A malformed input (kept as a JSON string) and a call with no result.
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "toolu_1", Name: "count", Input: json.RawMessage(`"{\"n\": 1,"`)},
			{ID: "toolu_2", Name: "count", Input: json.RawMessage(`{"n":2}`)},
		}},
		{Role: model.RoleTool, ToolResults: []model.ToolResult{
			{CallID: "toolu_1", Name: "count", Output: json.RawMessage(`{"error":"invalid input","code":"tool.input_invalid"}`), IsError: true},
		}},
		{Role: model.RoleUser, Text: "again"},
	}}
	if _, err := newModel(t, f).Step(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	providertest.JSONEqual(t, "messages", f.Requests()[0].Body["messages"], []any{
		map[string]any{"role": "user", "content": []any{text("go")}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "count", "input": map[string]any{"$raw": `{"n": 1,`}},
			map[string]any{"type": "tool_use", "id": "toolu_2", "name": "count", "input": map[string]any{"n": 2}},
		}},
		// Results first, then the next user text, in one user message.
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
				"content": []any{text(`{"error":"invalid input","code":"tool.input_invalid"}`)}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
				"content": []any{text(missingResult)}},
			text("again"),
		}},
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
	f := providertest.New(t, providertest.Reply{Status: 429, File: "error_429.json", Headers: map[string]string{"retry-after": "20"}})
	err := stepErr(t, f)
	if !model.IsRetryable(err) {
		t.Errorf("429 not retryable: %v", err)
	}
	if d, ok := model.RetryDelay(err); !ok || d != 20*time.Second {
		t.Errorf("RetryDelay = %v, %v; want 20s", d, ok)
	}
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Type != "rate_limit_error" {
		t.Errorf("error = %#v", e)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d requests; the SDK must not retry on its own", n)
	}
}

func TestServerErrorsAreRetryable(t *testing.T) {
	for _, tc := range []struct {
		status int
		file   string
	}{{500, "error_500.json"}, {529, "error_529.json"}, {503, "error_500.json"}} {
		f := providertest.New(t, providertest.Reply{Status: tc.status, File: tc.file})
		err := stepErr(t, f)
		if !model.IsRetryable(err) {
			t.Errorf("%d not retryable: %v", tc.status, err)
		}
		if _, ok := model.RetryDelay(err); ok {
			t.Errorf("%d: a delay without retry-after", tc.status)
		}
		if n := len(f.Requests()); n != 1 {
			t.Errorf("%d: %d requests; the SDK must not retry on its own", tc.status, n)
		}
	}
}

func TestAuthErrorIsNotRetryableAndSaysWhatToDo(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 401, File: "error_401.json"})
	err := stepErr(t, f)
	if model.IsRetryable(err) {
		t.Errorf("401 retryable: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"anthropic: 401", "invalid x-api-key", "set ANTHROPIC_API_KEY", "req_011CUVw2k3nRDYNvtSvHpGLY"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "sk-ant-test") {
		t.Errorf("message leaks the key: %q", msg)
	}
}

func TestClientErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		file   string
		want   []string
	}{
		{404, "error_404.json", []string{"404 not_found_error: model: claude-sonnet-9", "EVE_MODEL"}},
		{400, "error_400.json", []string{"400 invalid_request_error", "tool_result"}},
		{403, "error_401.json", []string{"403"}},
	} {
		err := stepErr(t, providertest.New(t, providertest.Reply{Status: tc.status, File: tc.file}))
		if model.IsRetryable(err) {
			t.Errorf("%d retryable: %v", tc.status, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: %q lacks %q", tc.status, err, w)
			}
		}
	}
}

func TestErrorEventMidStreamIsRetryable(t *testing.T) {
	var deltas []string
	f := providertest.New(t, providertest.Reply{Status: 200, File: "overloaded_midstream.sse"})
	_, err := newModel(t, f).Step(context.Background(), hello, func(d string) { deltas = append(deltas, d) })
	if err == nil || !model.IsRetryable(err) {
		t.Fatalf("err = %v, want retryable", err)
	}
	if !strings.Contains(err.Error(), "overloaded_error") {
		t.Errorf("message = %q", err)
	}
	if !reflect.DeepEqual(deltas, []string{"Sure"}) {
		t.Errorf("deltas before the error = %q", deltas)
	}
}

func TestTruncatedStreamIsRetryable(t *testing.T) {
	err := stepErr(t, providertest.New(t, providertest.Reply{Status: 200, File: "truncated.sse"}))
	if !model.IsRetryable(err) {
		t.Errorf("not retryable: %v", err)
	}
}

func TestTransportFailures(t *testing.T) {
	providertest.TransportFailures(t, func(t *testing.T, f *providertest.Server) model.Model { return newModel(t, f) }, hello)
}

func TestNewChecksOptions(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvBaseURL, "")
	if _, err := New(Options{Model: "claude-sonnet-4-5"}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("no key: err = %v", err)
	}
	if _, err := New(Options{APIKey: "k"}); err == nil || !strings.Contains(err.Error(), "EVE_MODEL") {
		t.Errorf("no model: err = %v", err)
	}
	if _, err := New(Options{APIKey: "k", Model: "m", BaseURL: "api.anthropic.com"}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_BASE_URL") {
		t.Errorf("bad base URL: err = %v", err)
	}

	// The key and base URL come from the environment by default.
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	t.Setenv(EnvAPIKey, "sk-ant-env")
	t.Setenv(EnvBaseURL, f.URL)
	m, err := New(Options{Model: "claude-haiku-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), hello, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests()[0].Header.Get("X-Api-Key"); got != "sk-ant-env" {
		t.Errorf("x-api-key = %q", got)
	}
	if got := f.Requests()[0].Body["max_tokens"]; got != float64(DefaultMaxTokens) {
		t.Errorf("max_tokens = %v", got)
	}
}

func TestBadToolSchema(t *testing.T) {
	f := providertest.New(t, providertest.Reply{Status: 200, File: "text.sse"})
	req := hello
	req.Tools = []model.ToolDescriptor{{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}}
	_, err := newModel(t, f).Step(context.Background(), req, nil)
	if err == nil || model.IsRetryable(err) || !strings.Contains(err.Error(), "tool x") {
		t.Errorf("err = %v", err)
	}
	if len(f.Requests()) != 0 {
		t.Error("request sent")
	}
}
