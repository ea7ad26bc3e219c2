package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/internal/apierror"
)

// Error is a failed model step: an error answer from the Messages API, an
// error event in its stream, or a failure to reach it. Step returns it
// wrapped in model.Retryable when another attempt may succeed.
type Error struct {
	// StatusCode is the HTTP status, or 0 when no error status came back
	// (connection failures, timeouts, error events inside a 200 stream).
	StatusCode int
	// Type is Anthropic's error type, e.g. "rate_limit_error",
	// "authentication_error", "overloaded_error".
	Type string
	// Message is the API's own message, or a description of the failure.
	Message string
	// RequestID is Anthropic's request-id, for support requests.
	RequestID string
	// Hint says how to fix a non-retryable error.
	Hint string
	// Delay is the wait the API asked for (retry-after), 0 if none.
	Delay time.Duration
	// Transient reports whether another attempt may succeed.
	Transient bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	f := apierror.Failure{StatusCode: e.StatusCode, Code: e.Type, Message: e.Message, RequestID: e.RequestID, Hint: e.Hint, Delay: e.Delay}
	return "anthropic: " + f.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// RetryAfter is the delay the API asked for before the next attempt; see
// model.RetryDelay.
func (e *Error) RetryAfter() time.Duration { return e.Delay }

// wrap gives f this package's Error type, retryable when it is transient.
func wrap(f *apierror.Failure) error {
	e := &Error{StatusCode: f.StatusCode, Type: f.Code, Message: f.Message, RequestID: f.RequestID, Hint: f.Hint, Delay: f.Delay, Transient: f.Transient, Err: f.Err}
	if e.Transient {
		return model.Retryable(e)
	}
	return e
}

// messagesAPI is how the Messages API fails.
var messagesAPI = &apierror.API{
	Name:            "anthropic",
	Server:          "the Messages API",
	BaseURLEnv:      EnvBaseURL,
	RequestIDHeader: "request-id",
	ParseBody:       parseBody,
	StreamError:     streamError,
	Classify:        classify,
	Wrap:            wrap,
}

// errorBody is Anthropic's error envelope:
// {"type":"error","error":{"type":"...","message":"..."},"request_id":"..."}.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func parseBody(f *apierror.Failure, body []byte) {
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil || (eb.Error.Type == "" && eb.Error.Message == "") {
		f.Message = apierror.Clip(body)
		return
	}
	f.Code, f.Message = eb.Error.Type, eb.Error.Message
	if f.RequestID == "" {
		f.RequestID = eb.RequestID
	}
}

// streamError reads an "event: error" inside the stream; the HTTP status
// was 200.
func streamError(err error) (*apierror.Failure, bool) {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return nil, false
	}
	f := &apierror.Failure{Code: string(apiErr.Type()), RequestID: apiErr.RequestID, Err: err}
	var eb errorBody
	if json.Unmarshal([]byte(apiErr.RawJSON()), &eb) == nil {
		f.Message = eb.Error.Message
	}
	if f.Message == "" {
		f.Message = "error event in the response stream"
	}
	return f, true
}

// classify sets Transient and Hint from the status and the error type.
func classify(f *apierror.Failure) {
	switch {
	case apierror.TransientStatus(f.StatusCode):
		f.Transient = true
		return
	case f.StatusCode == 0:
		// An error event inside a 200 stream: its type says what happened.
		switch f.Code {
		case "overloaded_error", "api_error", "rate_limit_error", "timeout_error", "":
			f.Transient = true
			return
		}
	}
	switch {
	case f.StatusCode == http.StatusUnauthorized || f.Code == "authentication_error":
		f.Hint = "set ANTHROPIC_API_KEY to a valid API key (https://console.anthropic.com/settings/keys)"
	case f.StatusCode == http.StatusPaymentRequired || f.Code == "billing_error":
		f.Hint = "the organization's credit or billing needs attention in the Anthropic console"
	case f.StatusCode == http.StatusForbidden || f.Code == "permission_error":
		f.Hint = "the API key is valid but may not use this model or resource; check its workspace and permissions"
	case f.StatusCode == http.StatusNotFound || f.Code == "not_found_error":
		f.Hint = "check the model name in EVE_MODEL (anthropic:<model>, e.g. anthropic:claude-sonnet-4-5) and ANTHROPIC_BASE_URL"
	case f.StatusCode == http.StatusRequestEntityTooLarge || f.Code == "request_too_large":
		f.Hint = "the conversation is too large for one request; start a new session or shorten tool outputs"
	case strings.Contains(strings.ToLower(f.Message), "prompt is too long"):
		f.Hint = apierror.ContextWindowHint
	case f.StatusCode == http.StatusBadRequest || f.Code == "invalid_request_error":
		f.Hint = "the API rejected the request; its message names the part at fault (often the model name or a tool's input schema)"
	}
}
