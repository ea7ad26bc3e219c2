package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Executor runs one tool by canonical name. The Temporal-backed executor
// (an execution workflow per call, keyed by the idempotency key) implements
// it; so can an in-process executor in tests.
//
// Execute returns the execution's state: terminal for sync mode; possibly
// queued or running for async mode. A non-nil error means the execution
// could not be started or observed (the call becomes an error result).
type Executor interface {
	Execute(ctx context.Context, name string, opts ExecuteToolOptions) (ExecutionResult, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, name string, opts ExecuteToolOptions) (ExecutionResult, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, name string, opts ExecuteToolOptions) (ExecutionResult, error) {
	return f(ctx, name, opts)
}

// ExecutionWaiter is implemented by executors that can wait for an
// execution they returned before it finished. ExecuteToolCalls uses it for
// results that are not terminal.
type ExecutionWaiter interface {
	Wait(ctx context.Context, executionID string, poll time.Duration) (ExecutionResult, error)
}

// ExecuteToolCallsOptions configures ExecuteAnthropicToolCalls and
// ExecuteOpenAIToolCalls (ExecuteToolCallsOptions in the reference).
type ExecuteToolCallsOptions struct {
	// NameMap is the exact map emitted with the model-facing bundle. A call
	// whose name is not in it becomes an error result and is never executed.
	NameMap      ToolNameMap   `json:"nameMap"`
	UserID       string        `json:"userId,omitempty"`
	ConnectionID string        `json:"connectionId,omitempty"`
	Mode         ExecutionMode `json:"mode,omitempty"`
	// PollMs is the poll interval handed to an ExecutionWaiter (default 500).
	PollMs int `json:"pollMs,omitempty"`
	// TimeoutMs bounds each call, waiting included (0: only ctx bounds it).
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// MaxConcurrency bounds calls in flight (0: all at once).
	MaxConcurrency int `json:"-"`
	// IdempotencyKey derives each call's key; the default is
	// "toolcall:<call id>", so a retried turn joins the executions its
	// first attempt started. Return "" to let the executor decide.
	IdempotencyKey func(callID, tool string) string `json:"-"`
}

// callOutcome is the provider-neutral result of one call.
type callOutcome struct {
	ok      bool
	content string // success: output text
	err     *ExecutionError
}

// preparedCall is a call translated to a canonical name and JSON input, or
// rejected before execution.
type preparedCall struct {
	id     string
	tool   string
	input  json.RawMessage
	reject *ExecutionError
}

// ExecuteAnthropicToolCalls runs Anthropic tool_use blocks and returns one
// tool_result block per call, in the calls' order. Calls run concurrently;
// failures (unknown names, bad input, tool errors) come back with is_error.
func ExecuteAnthropicToolCalls(ctx context.Context, exec Executor, calls []AnthropicToolCall, opts ExecuteToolCallsOptions) []AnthropicToolResultBlock {
	prepared := make([]preparedCall, len(calls))
	for i, call := range calls {
		p := preparedCall{id: call.ID}
		switch {
		case call.Type != "" && call.Type != "tool_use":
			p.reject = &ExecutionError{Code: CodeInvalidInput, Message: fmt.Sprintf("block type %q is not a tool_use block", call.Type)}
		default:
			p.tool, p.reject = resolveName(opts.NameMap, call.Name)
			if p.reject == nil {
				p.input, p.reject = objectInput(call.Input)
			}
		}
		prepared[i] = p
	}
	outcomes := runCalls(ctx, exec, prepared, opts)
	out := make([]AnthropicToolResultBlock, len(calls))
	for i, o := range outcomes {
		b := AnthropicToolResultBlock{Type: "tool_result", ToolUseID: calls[i].ID}
		if o.ok {
			b.Content = o.content
		} else {
			b.Content = errorText(prepared[i].tool, o.err)
			b.IsError = true
		}
		out[i] = b
	}
	return out
}

// ExecuteOpenAIToolCalls runs Chat Completions tool calls (function calls
// with arguments as a JSON string or object; custom calls with a string
// input) and returns one role:"tool" message per call, in the calls' order.
// A failed call's content is a JSON object {"error":{"message","code"}}.
//
// A custom call's input is used as the tool's input when it is a JSON
// object; otherwise it is passed as {"input": "<text>"}.
func ExecuteOpenAIToolCalls(ctx context.Context, exec Executor, calls []OpenAIToolCall, opts ExecuteToolCallsOptions) []OpenAIToolResultMessage {
	prepared := make([]preparedCall, len(calls))
	for i, call := range calls {
		var p preparedCall
		switch c := call.(type) {
		case *OpenAIFunctionToolCall:
			p.id = c.ID
			p.tool, p.reject = resolveName(opts.NameMap, c.Function.Name)
			if p.reject == nil {
				p.input, p.reject = functionArguments(c.Function.Arguments)
			}
		case *OpenAICustomToolCall:
			p.id = c.ID
			p.tool, p.reject = resolveName(opts.NameMap, c.Custom.Name)
			if p.reject == nil {
				p.input = customInput(c.Custom.Input)
			}
		case nil:
			p.reject = &ExecutionError{Code: CodeInvalidInput, Message: "nil tool call"}
		default:
			p.id = call.CallID()
			p.reject = &ExecutionError{Code: CodeInvalidInput, Message: fmt.Sprintf("unsupported tool call type %T", call)}
		}
		prepared[i] = p
	}
	outcomes := runCalls(ctx, exec, prepared, opts)
	out := make([]OpenAIToolResultMessage, len(calls))
	for i, o := range outcomes {
		m := OpenAIToolResultMessage{Role: "tool", ToolCallID: prepared[i].id}
		if o.ok {
			m.Content = o.content
		} else {
			b, _ := json.Marshal(map[string]*ExecutionError{"error": o.err})
			m.Content = string(b)
		}
		out[i] = m
	}
	return out
}

// DecodeOpenAIToolCalls decodes a JSON array of Chat Completions tool calls
// (the assistant message's tool_calls) into function and custom calls.
func DecodeOpenAIToolCalls(data []byte) ([]OpenAIToolCall, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, err
	}
	out := make([]OpenAIToolCall, len(raws))
	for i, raw := range raws {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("tool call %d: %w", i, err)
		}
		switch head.Type {
		case "function", "":
			var c OpenAIFunctionToolCall
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, fmt.Errorf("tool call %d: %w", i, err)
			}
			out[i] = &c
		case "custom":
			var c OpenAICustomToolCall
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, fmt.Errorf("tool call %d: %w", i, err)
			}
			out[i] = &c
		default:
			return nil, fmt.Errorf("tool call %d: unknown type %q", i, head.Type)
		}
	}
	return out, nil
}

func resolveName(m ToolNameMap, wire string) (string, *ExecutionError) {
	if c, ok := m.WireToCanonical[wire]; ok && c != "" {
		return c, nil
	}
	return "", &ExecutionError{Code: CodeUnknownTool, Message: fmt.Sprintf("unknown tool %q: it is not in the name map sent with the tools, so it was not run", wire)}
}

// objectInput accepts a JSON object (null or absent counts as {}).
func objectInput(raw json.RawMessage) (json.RawMessage, *ExecutionError) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}"), nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return nil, &ExecutionError{Code: CodeInvalidInput, Message: "tool input must be a JSON object"}
	}
	return t, nil
}

// functionArguments accepts the arguments as a JSON string holding an
// object (what the API sends) or as an object.
func functionArguments(raw json.RawMessage) (json.RawMessage, *ExecutionError) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, &ExecutionError{Code: CodeInvalidInput, Message: "arguments are not a valid JSON string"}
		}
		if len(bytes.TrimSpace([]byte(s))) == 0 {
			return json.RawMessage("{}"), nil
		}
		if !json.Valid([]byte(s)) {
			return nil, &ExecutionError{Code: CodeInvalidInput, Message: "arguments are not valid JSON"}
		}
		t = bytes.TrimSpace([]byte(s))
	}
	return objectInput(t)
}

func customInput(s string) json.RawMessage {
	t := bytes.TrimSpace([]byte(s))
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	b, _ := json.Marshal(map[string]string{"input": s})
	return b
}

// runCalls executes the prepared calls concurrently, keeping their order.
func runCalls(ctx context.Context, exec Executor, calls []preparedCall, opts ExecuteToolCallsOptions) []callOutcome {
	out := make([]callOutcome, len(calls))
	var sem chan struct{}
	if opts.MaxConcurrency > 0 {
		sem = make(chan struct{}, opts.MaxConcurrency)
	}
	var wg sync.WaitGroup
	for i := range calls {
		if calls[i].reject != nil {
			out[i] = callOutcome{err: calls[i].reject}
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					out[i] = callOutcome{err: ctxError(ctx.Err())}
					return
				}
			}
			out[i] = runOne(ctx, exec, calls[i], opts)
		}(i)
	}
	wg.Wait()
	return out
}

func runOne(ctx context.Context, exec Executor, call preparedCall, opts ExecuteToolCallsOptions) (o callOutcome) {
	defer func() {
		if r := recover(); r != nil {
			o = callOutcome{err: &ExecutionError{Code: CodeExecutionFailed, Message: fmt.Sprintf("executor panicked: %v", r)}}
		}
	}()
	if opts.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(opts.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	key := "toolcall:" + call.id
	if opts.IdempotencyKey != nil {
		key = opts.IdempotencyKey(call.id, call.tool)
	} else if call.id == "" {
		key = ""
	}
	res, err := exec.Execute(ctx, call.tool, ExecuteToolOptions{
		UserID:         opts.UserID,
		Input:          call.input,
		Mode:           opts.Mode,
		IdempotencyKey: key,
		ConnectionID:   opts.ConnectionID,
	})
	if err == nil && !res.Status.Terminal() && res.Status != "" {
		if w, ok := exec.(ExecutionWaiter); ok && res.ID != "" {
			poll := 500 * time.Millisecond
			if opts.PollMs > 0 {
				poll = time.Duration(opts.PollMs) * time.Millisecond
			}
			res, err = w.Wait(ctx, res.ID, poll)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return callOutcome{err: ctxError(ctx.Err())}
		}
		var ee *ExecutionError
		if errors.As(err, &ee) {
			return callOutcome{err: ee}
		}
		return callOutcome{err: &ExecutionError{Code: CodeExecutionFailed, Message: err.Error()}}
	}
	return outcomeOf(res)
}

func ctxError(err error) *ExecutionError {
	if errors.Is(err, context.DeadlineExceeded) {
		return &ExecutionError{Code: CodeTimeout, Message: "the tool call timed out"}
	}
	return &ExecutionError{Code: CodeCanceled, Message: "the tool call was canceled"}
}

// outcomeOf turns an execution result into call content.
func outcomeOf(res ExecutionResult) callOutcome {
	switch {
	case res.Error != nil:
		e := *res.Error
		if e.Code == "" {
			e.Code = string(res.Status)
			if e.Code == "" {
				e.Code = CodeExecutionFailed
			}
		}
		return callOutcome{err: &e}
	case res.Status == StatusSucceeded || res.Status == "":
		return callOutcome{ok: true, content: outputText(res.Output)}
	case res.Status.Terminal():
		code := string(res.Status)
		return callOutcome{err: &ExecutionError{Code: code, Message: "the tool execution ended with status " + code}}
	default:
		// Async and not awaited: tell the model where the execution is.
		b, _ := json.Marshal(struct {
			ExecutionID string          `json:"executionId"`
			Status      ExecutionStatus `json:"status"`
		}{res.ID, res.Status})
		return callOutcome{ok: true, content: string(b)}
	}
}

// outputText renders output for the model: a JSON string as its text,
// anything else as compact JSON, nothing as "null".
func outputText(out json.RawMessage) string {
	t := bytes.TrimSpace(out)
	if len(t) == 0 {
		return "null"
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, t) == nil {
		return buf.String()
	}
	return string(t)
}

func errorText(tool string, e *ExecutionError) string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	if tool != "" {
		return "tool " + tool + " failed: " + msg
	}
	return msg
}

// ValidatingExecutor checks and normalizes each call's input against the
// catalog (Catalog.NormalizeInput) before handing it to next. Input that
// does not match the schema comes back as a failed result listing the
// violations, so the model can correct its call; unknown tools fail too.
func ValidatingExecutor(c *Catalog, next Executor) Executor {
	return ExecutorFunc(func(ctx context.Context, name string, opts ExecuteToolOptions) (ExecutionResult, error) {
		input, err := c.NormalizeInput(name, opts.Input)
		if err != nil {
			code := CodeInvalidInput
			if errors.Is(err, ErrUnknownTool) {
				code = CodeUnknownTool
			}
			return ExecutionResult{Tool: name, Status: StatusFailed, Error: &ExecutionError{Code: code, Message: err.Error()}}, nil
		}
		opts.Input = input
		if opts.Mode == "" {
			if d, ok := c.Lookup(name); ok && d.Annotations.Async {
				opts.Mode = ModeAsync
			}
		}
		return next.Execute(ctx, name, opts)
	})
}
