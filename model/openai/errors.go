package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/internal/apierror"
)

// Error is a failed model step: an error answer from the server, an error
// inside its stream, or a failure to reach it. Step returns it wrapped in
// model.Retryable when another attempt may succeed.
type Error struct {
	// StatusCode is the HTTP status, or 0 when no error status came back
	// (connection failures, timeouts, errors inside a 200 stream).
	StatusCode int
	// Code is the error's code or, when it has none, its type, e.g.
	// "invalid_api_key", "rate_limit_exceeded", "model_not_found".
	Code string
	// Message is the server's own message, or a description of the failure.
	Message string
	// RequestID is the x-request-id header, for support requests.
	RequestID string
	// Hint says how to fix a non-retryable error.
	Hint string
	// Delay is the wait the server asked for (retry-after), 0 if none.
	Delay time.Duration
	// Transient reports whether another attempt may succeed.
	Transient bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	f := apierror.Failure{StatusCode: e.StatusCode, Code: e.Code, Message: e.Message, RequestID: e.RequestID, Hint: e.Hint, Delay: e.Delay}
	return "openai: " + f.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// RetryAfter is the delay the server asked for before the next attempt; see
// model.RetryDelay.
func (e *Error) RetryAfter() time.Duration { return e.Delay }

// wrap gives f this package's Error type, retryable when it is transient.
func wrap(f *apierror.Failure) error {
	e := &Error{StatusCode: f.StatusCode, Code: f.Code, Message: f.Message, RequestID: f.RequestID, Hint: f.Hint, Delay: f.Delay, Transient: f.Transient, Err: f.Err}
	if e.Transient {
		return model.Retryable(e)
	}
	return e
}

// chatAPI is how an OpenAI-compatible server fails; keyHint says how to fix
// a rejected key for this server.
func chatAPI(keyHint string) *apierror.API {
	return &apierror.API{
		Name:            "openai",
		Server:          "the server",
		BaseURLEnv:      EnvBaseURL,
		RequestIDHeader: "x-request-id",
		ParseBody: func(f *apierror.Failure, body []byte) {
			f.Code, f.Message = parseBody(body)
		},
		StreamError: streamError,
		Classify:    func(f *apierror.Failure) { classify(f, keyHint) },
		Wrap:        wrap,
	}
}

// parseBody reads the error shapes seen in the wild:
// {"error":{"message","type","code"}} (OpenAI, Ollama, LM Studio),
// {"error":"..."}, {"object":"error","message","type","code"} (vLLM),
// {"detail":"..."} and {"message":"..."}.
func parseBody(body []byte) (code, msg string) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return "", apierror.Clip(body)
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	var str string
	switch {
	case json.Unmarshal(v.Error, &obj) == nil && (obj.Message != "" || obj.Type != ""):
		msg = obj.Message
		if c, ok := obj.Code.(string); ok && c != "" {
			code = c
		} else {
			code = obj.Type
		}
	case json.Unmarshal(v.Error, &str) == nil && str != "":
		msg = str
	case v.Message != "":
		msg, code = v.Message, v.Type
	case json.Unmarshal(v.Detail, &str) == nil && str != "":
		msg = str
	default:
		msg = apierror.Clip(body)
	}
	return code, msg
}

// streamError reads an error event inside a 200 stream.
func streamError(err error) (*apierror.Failure, bool) {
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		return nil, false
	}
	f := &apierror.Failure{Err: err}
	f.Code, f.Message = parseBody(se.Event.Data)
	if f.Message == "" {
		f.Message = se.Message
	}
	f.Message = "error in the response stream: " + f.Message
	return f, true
}

// classify sets Transient and Hint from the status and the code.
func classify(f *apierror.Failure, keyHint string) {
	lower := strings.ToLower(f.Message)
	switch {
	case f.Code == "insufficient_quota":
		// A 429 that waiting does not fix.
		f.Hint = "the account has no quota left; check the plan and billing of the key's organization"
		return
	case apierror.TransientStatus(f.StatusCode):
		f.Transient = true
		return
	case f.StatusCode == 0:
		// An error inside a 200 stream: the request was accepted, so it is
		// transient unless it says the request itself is wrong.
		if f.Code != "invalid_request_error" && f.Code != "context_length_exceeded" {
			f.Transient = true
			return
		}
	}
	switch {
	case f.StatusCode == http.StatusUnauthorized || f.Code == "invalid_api_key":
		f.Hint = keyHint
	case f.StatusCode == http.StatusForbidden:
		f.Hint = "the key may not use this model or endpoint; check its project, organization and permissions"
	case f.StatusCode == http.StatusNotFound || f.Code == "model_not_found":
		f.Hint = fmt.Sprintf("check the model name in EVE_MODEL (openai:<model>) and that %s points at a server that serves it (on Ollama, `ollama pull <model>` first)", EnvBaseURL)
	case f.Code == "context_length_exceeded" || strings.Contains(lower, "context length") || strings.Contains(lower, "maximum context"):
		f.Hint = apierror.ContextWindowHint
	case strings.Contains(lower, "does not support tools") || strings.Contains(lower, "tool") && strings.Contains(lower, "not supported"):
		f.Hint = "the model does not support tool calling; choose one that does"
	case f.StatusCode == http.StatusRequestEntityTooLarge:
		f.Hint = "the request is too large; start a new session or shorten tool outputs"
	case f.StatusCode == http.StatusBadRequest || f.StatusCode == http.StatusUnprocessableEntity:
		f.Hint = "the server rejected the request; its message names the part at fault (often the model name or a tool's input schema)"
	}
}
