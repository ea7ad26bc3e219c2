// Package toolsclient is the Go client of eve's tools API (the executor),
// mirroring the reference SDK's tools operations: Tools.Get, Tools.Search,
// Tools.Execute, Tools.Run, and ExecuteAnthropicToolCalls /
// ExecuteOpenAIToolCalls (executeToolCalls for both providers).
//
//	c := toolsclient.New("http://127.0.0.1:4111", os.Getenv("EVE_API_KEY"), toolsclient.WithUserID("user_42"))
//	bundle, _ := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
//	out, err := c.Tools.Run(ctx, "demo.get_weather", map[string]any{"city": "Paris"}, toolsclient.RunToolOptions{Timeout: 30 * time.Second})
//
// Types come from the catalog package, so results are typed by format.
package toolsclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eve-temporal/eve/catalog"
)

// Client talks to an eve API server's tools API.
type Client struct {
	baseURL string
	apiKey  string
	userID  string
	http    *http.Client
	retries int

	// Tools holds the tools operations (get, search, execute, run).
	Tools *Tools
	// Executions fetches, waits for and cancels executions by id.
	Executions *Executions
}

// Option configures a Client.
type Option func(*Client)

// WithUserID sets the client-level user, used when a call names none.
func WithUserID(id string) Option { return func(c *Client) { c.userID = id } }

// WithHTTPClient replaces http.DefaultClient.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithRetries sets how often a request is retried after a network error or
// a 502/503 answer (default 2). Executes are retried with the same
// idempotency key, so a retry joins the first attempt's execution.
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// New returns a client of the API server at baseURL (for example
// http://127.0.0.1:4111). apiKey is sent as a bearer key when not empty.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: http.DefaultClient, retries: 2}
	for _, o := range opts {
		o(c)
	}
	c.Tools = &Tools{c: c}
	c.Executions = &Executions{c: c}
	return c
}

// APIError is an error answer {ok:false, error, code}, with the HTTP
// status; the server writes the same type.
type APIError = catalog.APIError

// RunTimeoutError says Run stopped waiting; the execution goes on. Fetch
// it later with Executions.Get(ExecutionID).
type RunTimeoutError struct {
	ExecutionID string
	Status      catalog.ExecutionStatus
	Message     string
}

func (e *RunTimeoutError) Error() string { return e.Message }

// ExecutionFailedError is Run's error for an execution that ended other
// than succeeded (failed, canceled, timed_out).
type ExecutionFailedError struct {
	Result catalog.ExecutionResult
}

func (e *ExecutionFailedError) Error() string {
	msg := fmt.Sprintf("tool %s %s (execution %s)", e.Result.Tool, e.Result.Status, e.Result.ID)
	if e.Result.Error != nil {
		msg += ": " + e.Result.Error.Error()
	}
	return msg
}

// do sends a request and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, body any, header http.Header, out any) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	var (
		resp *http.Response
		err  error
	)
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, rerr := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
		if rerr != nil {
			return 0, rerr
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		resp, err = c.http.Do(req)
		retry := err != nil || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable
		if !retry || attempt >= c.retries || ctx.Err() != nil {
			break
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(200<<attempt) * time.Millisecond):
		}
	}
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			e.Code = http.StatusText(resp.StatusCode)
			e.Message = strings.TrimSpace(string(data))
		}
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("eve tools API: decode %s %s answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *Client) user(id string) string {
	if id != "" {
		return id
	}
	return c.userID
}

// NewIdempotencyKey returns a fresh random key.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Tools are the tools operations.
type Tools struct{ c *Client }

// Get selects tools and shapes them in a format (the reference's get).
// Tools is typed by format: use the result's Anthropic(), OpenAI(),
// AISDK(), MCP() or Canonical() accessor.
func (t *Tools) Get(ctx context.Context, opts catalog.GetToolsOptions) (catalog.GetToolsResult, error) {
	q := url.Values{}
	if len(opts.Toolkits) > 0 {
		q.Set("toolkits", strings.Join(opts.Toolkits, ","))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("capability", opts.Capability)
	set("format", string(opts.Format))
	set("userId", t.c.user(opts.UserID))
	for k, v := range map[string]bool{"includeAsync": opts.IncludeAsync, "strict": opts.Strict, "mcpWireNames": opts.MCPWireNames} {
		if v {
			q.Set(k, "true")
		}
	}
	path := "/v1/tools"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var raw struct {
		Format   catalog.Format       `json:"format"`
		Tools    json.RawMessage      `json:"tools"`
		NameMap  catalog.ToolNameMap  `json:"nameMap"`
		Raw      []catalog.Definition `json:"raw"`
		Warnings []catalog.Warning    `json:"warnings"`
	}
	if _, err := t.c.do(ctx, http.MethodGet, path, nil, nil, &raw); err != nil {
		return catalog.GetToolsResult{}, err
	}
	res := catalog.GetToolsResult{Format: raw.Format, NameMap: raw.NameMap, Raw: raw.Raw, Warnings: raw.Warnings}
	var err error
	switch raw.Format {
	case catalog.FormatAnthropic:
		var v []catalog.AnthropicTool
		err = json.Unmarshal(raw.Tools, &v)
		res.Tools = v
	case catalog.FormatOpenAI:
		var v []catalog.OpenAITool
		err = json.Unmarshal(raw.Tools, &v)
		res.Tools = v
	case catalog.FormatAISDK:
		var v catalog.AISDKToolSet
		err = json.Unmarshal(raw.Tools, &v)
		res.Tools = v
	case catalog.FormatMCP:
		var v []catalog.MCPTool
		err = json.Unmarshal(raw.Tools, &v)
		res.Tools = v
	default:
		var v []catalog.Definition
		err = json.Unmarshal(raw.Tools, &v)
		res.Tools = v
	}
	return res, err
}

// Describe returns one tool's definition, its wire name and whether the
// tools API can execute it.
func (t *Tools) Describe(ctx context.Context, name string) (ToolInfo, error) {
	var info ToolInfo
	path := "/v1/tools/" + url.PathEscape(name)
	if u := t.c.user(""); u != "" {
		// The client-level user's catalog: it may hold tools of its own.
		path += "?userId=" + url.QueryEscape(u)
	}
	_, err := t.c.do(ctx, http.MethodGet, path, nil, nil, &info)
	return info, err
}

// ToolInfo is one tool as GET /v1/tools/{name} answers it.
type ToolInfo struct {
	Tool       catalog.Definition `json:"tool"`
	Wire       string             `json:"wire"`
	Executable bool               `json:"executable"`
	Reason     string             `json:"reason,omitempty"`
}

// Search ranks tools for a query (the reference's search).
func (t *Tools) Search(ctx context.Context, opts catalog.SearchToolsOptions) (catalog.SearchToolsResult, error) {
	opts.UserID = t.c.user(opts.UserID)
	var res catalog.SearchToolsResult
	_, err := t.c.do(ctx, http.MethodPost, "/v1/tools/search", opts, nil, &res)
	return res, err
}

// ExecuteToolOptions is one execution request (ExecuteToolOptions in the
// reference). Input may be any value that marshals to a JSON object.
type ExecuteToolOptions struct {
	// UserID uses the client-level user when empty.
	UserID string
	Input  any
	// Mode defaults from the tool's annotations.async.
	Mode catalog.ExecutionMode
	// IdempotencyKey: the same key joins the same execution. When empty,
	// a fresh key is made for this invocation (its retries join it).
	IdempotencyKey string
	ConnectionID   string
	// Wait bounds a sync execute's wait on the server (0: the server's).
	Wait time.Duration
}

func rawInput(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return x, nil
	case []byte:
		return json.RawMessage(x), nil
	case string:
		return json.RawMessage(x), nil
	}
	return json.Marshal(v)
}

type executeBody struct {
	UserID         string                `json:"userId,omitempty"`
	Input          json.RawMessage       `json:"input"`
	Mode           catalog.ExecutionMode `json:"mode,omitempty"`
	IdempotencyKey string                `json:"idempotencyKey,omitempty"`
	ConnectionID   string                `json:"connectionId,omitempty"`
	WaitMs         int                   `json:"waitMs,omitempty"`
	TimeoutMs      int                   `json:"timeoutMs,omitempty"`
}

// Execute starts (or, with a used key, joins) an execution. The result is
// terminal in sync mode (unless the server stopped waiting) and may be
// queued or running in async mode: Executions.Wait or Get follow it.
// Input that breaks the tool's schema is an *APIError (400) listing the
// violations.
func (t *Tools) Execute(ctx context.Context, name string, opts ExecuteToolOptions) (catalog.ExecutionResult, error) {
	in, err := rawInput(opts.Input)
	if err != nil {
		return catalog.ExecutionResult{}, err
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	body := executeBody{UserID: t.c.user(opts.UserID), Input: in, Mode: opts.Mode, IdempotencyKey: key, ConnectionID: opts.ConnectionID, WaitMs: int(opts.Wait / time.Millisecond)}
	var res catalog.ExecutionResult
	_, err = t.c.do(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(name)+"/execute", body, nil, &res)
	return res, err
}

// RunToolOptions configures Run (RunToolOptions in the reference).
type RunToolOptions struct {
	UserID         string
	Mode           catalog.ExecutionMode
	IdempotencyKey string
	ConnectionID   string
	// Timeout bounds the wait (0: the server's default). On timeout Run
	// returns a *RunTimeoutError naming the execution, which goes on.
	Timeout time.Duration
}

// Run executes a tool and waits for its output (the reference's run). An
// execution that fails is an *ExecutionFailedError; one that outlasts the
// timeout is a *RunTimeoutError with its id.
func (t *Tools) Run(ctx context.Context, name string, input any, opts RunToolOptions) (json.RawMessage, error) {
	res, err := t.RunResult(ctx, name, input, opts)
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

// RunResult is Run returning the whole result.
func (t *Tools) RunResult(ctx context.Context, name string, input any, opts RunToolOptions) (catalog.ExecutionResult, error) {
	in, err := rawInput(input)
	if err != nil {
		return catalog.ExecutionResult{}, err
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	body := executeBody{UserID: t.c.user(opts.UserID), Input: in, Mode: opts.Mode, IdempotencyKey: key, ConnectionID: opts.ConnectionID, TimeoutMs: int(opts.Timeout / time.Millisecond)}
	var res catalog.ExecutionResult
	_, err = t.c.do(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(name)+"/run", body, nil, &res)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "run_timeout" {
		return catalog.ExecutionResult{ID: ae.ExecutionID, Tool: name, Status: ae.ExecStatus}, &RunTimeoutError{ExecutionID: ae.ExecutionID, Status: ae.ExecStatus, Message: ae.Message}
	}
	if err != nil {
		return res, err
	}
	if res.Status != catalog.StatusSucceeded {
		return res, &ExecutionFailedError{Result: res}
	}
	return res, nil
}

// Executions follow executions by id.
type Executions struct{ c *Client }

// Get fetches an execution: its state, and its result once it ended.
func (e *Executions) Get(ctx context.Context, id string) (catalog.ExecutionResult, error) {
	var res catalog.ExecutionResult
	_, err := e.c.do(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil, nil, &res)
	return res, err
}

// Cancel asks an execution to stop; the answer is its state afterwards.
func (e *Executions) Cancel(ctx context.Context, id string) (catalog.ExecutionResult, error) {
	var res catalog.ExecutionResult
	_, err := e.c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(id)+"/cancel", struct{}{}, nil, &res)
	return res, err
}

// Wait polls an execution every poll (default 500 ms) until it ends or ctx
// does. It makes the client a catalog.ExecutionWaiter (see Executor).
func (e *Executions) Wait(ctx context.Context, id string, poll time.Duration) (catalog.ExecutionResult, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		res, err := e.Get(ctx, id)
		if err != nil || res.Status.Terminal() {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Executor adapts the client to catalog.Executor and
// catalog.ExecutionWaiter, for catalog.ExecuteAnthropicToolCalls and
// catalog.ExecuteOpenAIToolCalls run on the caller's side (one request per
// call). ExecuteAnthropicToolCalls below does the same in one request.
func (c *Client) Executor() interface {
	catalog.Executor
	catalog.ExecutionWaiter
} {
	return executor{c}
}

type executor struct{ c *Client }

func (x executor) Execute(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
	res, err := x.c.Tools.Execute(ctx, name, ExecuteToolOptions{UserID: opts.UserID, Input: opts.Input, Mode: opts.Mode, IdempotencyKey: opts.IdempotencyKey, ConnectionID: opts.ConnectionID})
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		// Refused (bad input, unknown tool): a result the model can read.
		return catalog.ExecutionResult{Tool: name, Status: catalog.StatusFailed, Error: &catalog.ExecutionError{Code: ae.Code, Message: ae.Message}}, nil
	}
	return res, err
}

func (x executor) Wait(ctx context.Context, id string, poll time.Duration) (catalog.ExecutionResult, error) {
	return x.c.Executions.Wait(ctx, id, poll)
}

// ExecuteToolCallsOptions configures ExecuteAnthropicToolCalls and
// ExecuteOpenAIToolCalls (ExecuteToolCallsOptions in the reference).
type ExecuteToolCallsOptions struct {
	// NameMap is the exact map emitted with the model-facing bundle.
	// Unmapped calls are rejected (error results), never executed.
	NameMap catalog.ToolNameMap
	// UserID uses the client-level user when empty.
	UserID       string
	ConnectionID string
	Mode         catalog.ExecutionMode
	PollMs       int
	TimeoutMs    int
}

func (c *Client) toolCalls(ctx context.Context, provider string, calls any, opts ExecuteToolCallsOptions, out any) error {
	nm := opts.NameMap
	body := map[string]any{
		"provider": provider, "calls": calls, "nameMap": &nm,
		"userId": c.user(opts.UserID), "connectionId": opts.ConnectionID, "mode": opts.Mode,
		"pollMs": opts.PollMs, "timeoutMs": opts.TimeoutMs,
	}
	var res struct {
		Results json.RawMessage `json:"results"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/tools/execute-tool-calls", body, nil, &res); err != nil {
		return err
	}
	return json.Unmarshal(res.Results, out)
}

// ExecuteAnthropicToolCalls runs Anthropic tool_use blocks on the server
// and returns one tool_result block per call, in order (failures carry
// is_error). The error is for the request as a whole.
func ExecuteAnthropicToolCalls(ctx context.Context, c *Client, calls []catalog.AnthropicToolCall, opts ExecuteToolCallsOptions) ([]catalog.AnthropicToolResultBlock, error) {
	if calls == nil {
		calls = []catalog.AnthropicToolCall{}
	}
	var out []catalog.AnthropicToolResultBlock
	return out, c.toolCalls(ctx, "anthropic", calls, opts, &out)
}

// ExecuteOpenAIToolCalls runs Chat Completions tool calls (function and
// custom) on the server and returns one role:"tool" message per call, in
// order. The error is for the request as a whole.
func ExecuteOpenAIToolCalls(ctx context.Context, c *Client, calls []catalog.OpenAIToolCall, opts ExecuteToolCallsOptions) ([]catalog.OpenAIToolResultMessage, error) {
	if calls == nil {
		calls = []catalog.OpenAIToolCall{}
	}
	var out []catalog.OpenAIToolResultMessage
	return out, c.toolCalls(ctx, "openai", calls, opts, &out)
}
