// Package model is the interface between a turn and a language model: one
// step takes the conversation and the tool descriptors and returns assistant
// text and/or tool calls.
package model

import (
	"context"
	"encoding/json"
	"errors"
)

// Roles of conversation messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons, as eve names them.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool-calls"
	FinishLength    = "length"
	FinishError     = "error"
	FinishOther     = "other"
)

// Message is one entry of the conversation.
type Message struct {
	Role string `json:"role"`
	// Kind marks a user message the runtime wrote, not a person (eve's
	// framework messages): KindTaskResult, KindContextState. Adapters send
	// it as an ordinary user message; "" is a person's.
	Kind        string       `json:"kind,omitempty"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"toolCalls,omitempty"`   // assistant
	ToolResults []ToolResult `json:"toolResults,omitempty"` // tool
}

// The kinds of the runtime's user messages (Message.Kind).
const (
	// KindTaskResult carries tasks' results as <task_result> blocks.
	KindTaskResult = "task.result"
	// KindContextState carries the [Tasks] note: the session's working
	// tasks (eve's context.state message).
	KindContextState = "context.state"
)

// ToolCall is one call the model asks for.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult is what the model sees of one call.
type ToolResult struct {
	CallID  string          `json:"callId"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
	IsError bool            `json:"isError,omitempty"`
	// Note is the runtime's word to the model beside the output, such as
	// that a person edited the call's input before it ran. Adapters send it
	// with the result (a second text block); "" adds nothing.
	Note string `json:"note,omitempty"`
}

// ToolDescriptor is a tool as the model sees it.
type ToolDescriptor struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Request is one model step's input.
type Request struct {
	System   string           `json:"system,omitempty"`
	Messages []Message        `json:"messages"`
	Tools    []ToolDescriptor `json:"tools,omitempty"`
}

// Usage is a step's token usage.
type Usage struct {
	InputTokens      int `json:"inputTokens,omitempty"`
	OutputTokens     int `json:"outputTokens,omitempty"`
	CacheReadTokens  int `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
}

// Response is one model step's output.
type Response struct {
	Text         string     `json:"text,omitempty"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	FinishReason string     `json:"finishReason"`
	Usage        Usage      `json:"usage"`
}

// Stream receives text deltas while a step generates. Providers that stream
// call it as text arrives; it may be nil.
type Stream func(textDelta string)

// Model runs one step. Implementations must be safe for concurrent use.
type Model interface {
	// ID names the model in step.started events, e.g. "scripted:demo".
	ID() string
	Step(ctx context.Context, req Request, stream Stream) (Response, error)
}

// LastUserText returns the text of the last user message, or "".
func LastUserText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return msgs[i].Text
		}
	}
	return ""
}

// retryable marks a transient model error (rate limit, 5xx, timeout).
type retryable struct{ err error }

func (e retryable) Error() string { return e.err.Error() }
func (e retryable) Unwrap() error { return e.err }

// Retryable marks err as transient: the step is retried with backoff.
// Unmarked errors fail the turn at once.
func Retryable(err error) error { return retryable{err} }

// IsRetryable reports whether err was marked Retryable.
func IsRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}
