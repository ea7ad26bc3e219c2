package anthropic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/eve-temporal/eve/model"
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
	var b strings.Builder
	b.WriteString("anthropic: ")
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "%d ", e.StatusCode)
	}
	if e.Type != "" {
		b.WriteString(e.Type)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Hint != "" {
		b.WriteString(" — ")
		b.WriteString(e.Hint)
	}
	if e.Delay > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.Delay)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request-id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// RetryAfter is the delay the API asked for before the next attempt; see
// model.RetryDelay.
func (e *Error) RetryAfter() time.Duration { return e.Delay }

// result marks e retryable when it is transient.
func (e *Error) result() error {
	if e.Transient {
		return model.Retryable(e)
	}
	return e
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

// captureErrors turns every error status into an *Error before the SDK sees
// it, so the status, headers and body are all kept whatever the body's shape
// (a proxy's HTML page as well as Anthropic's JSON envelope).
func captureErrors(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return nil, statusError(res, body, time.Now())
}

func statusError(res *http.Response, body []byte, now time.Time) *Error {
	e := &Error{StatusCode: res.StatusCode, RequestID: res.Header.Get("request-id")}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && (eb.Error.Type != "" || eb.Error.Message != "") {
		e.Type, e.Message = eb.Error.Type, eb.Error.Message
		if e.RequestID == "" {
			e.RequestID = eb.RequestID
		}
	} else {
		e.Message = clip(string(body), 300)
		if e.Message == "" {
			e.Message = http.StatusText(res.StatusCode)
		}
	}
	if d, ok := model.ParseRetryAfter(res.Header, now); ok {
		e.Delay = d
	}
	classify(e)
	return e
}

// classify sets Transient and Hint from the status and the error type.
func classify(e *Error) {
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		e.Transient = true
		return
	case e.StatusCode == 0:
		// An error event inside a 200 stream: its type says what happened.
		switch e.Type {
		case "overloaded_error", "api_error", "rate_limit_error", "timeout_error", "":
			e.Transient = true
			return
		}
	}
	switch {
	case e.StatusCode == http.StatusUnauthorized || e.Type == "authentication_error":
		e.Hint = "set ANTHROPIC_API_KEY to a valid API key (https://console.anthropic.com/settings/keys)"
	case e.StatusCode == http.StatusPaymentRequired || e.Type == "billing_error":
		e.Hint = "the organization's credit or billing needs attention in the Anthropic console"
	case e.StatusCode == http.StatusForbidden || e.Type == "permission_error":
		e.Hint = "the API key is valid but may not use this model or resource; check its workspace and permissions"
	case e.StatusCode == http.StatusNotFound || e.Type == "not_found_error":
		e.Hint = "check the model name in EVE_MODEL (anthropic:<model>, e.g. anthropic:claude-sonnet-4-5) and ANTHROPIC_BASE_URL"
	case e.StatusCode == http.StatusRequestEntityTooLarge || e.Type == "request_too_large":
		e.Hint = "the conversation is too large for one request; start a new session or shorten tool outputs"
	case strings.Contains(strings.ToLower(e.Message), "prompt is too long"):
		e.Hint = "the conversation exceeds the model's context window; start a new session or shorten tool outputs"
	case e.StatusCode == http.StatusBadRequest || e.Type == "invalid_request_error":
		e.Hint = "the API rejected the request; its message names the part at fault (often the model name or a tool's input schema)"
	}
}

// stepError converts whatever the SDK returned into the error Step returns.
func stepError(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e.result()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return (&Error{Message: "the request timed out", Transient: true, Err: ctxErr}).result()
		}
		return fmt.Errorf("anthropic: %w", ctxErr)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		// An "event: error" inside the stream; the HTTP status was 200.
		e := &Error{Type: string(apiErr.Type()), RequestID: apiErr.RequestID, Err: err}
		var eb errorBody
		if json.Unmarshal([]byte(apiErr.RawJSON()), &eb) == nil {
			e.Message = eb.Error.Message
		}
		if e.Message == "" {
			e.Message = "error event in the response stream"
		}
		classify(e)
		return e.result()
	}
	if isCertError(err) {
		return &Error{Message: err.Error(), Hint: "the server's TLS certificate is not trusted; check ANTHROPIC_BASE_URL", Err: err}
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return (&Error{Message: "cannot reach the Messages API: " + err.Error(), Transient: true, Err: err}).result()
	}
	return &Error{Message: err.Error(), Err: err}
}

// isCertError reports a TLS verification failure: a configuration problem
// that retrying does not fix.
func isCertError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var h x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &h) || errors.As(err, &ci)
}

// clip collapses whitespace in a non-JSON error body (a proxy's page, say)
// and cuts it to n bytes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
