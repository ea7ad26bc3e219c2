package openai

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

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/eve-temporal/eve/model"
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
	var b strings.Builder
	b.WriteString("openai: ")
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "%d ", e.StatusCode)
	}
	if e.Code != "" {
		b.WriteString(e.Code)
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

// RetryAfter is the delay the server asked for before the next attempt; see
// model.RetryDelay.
func (e *Error) RetryAfter() time.Duration { return e.Delay }

func (e *Error) result() error {
	if e.Transient {
		return model.Retryable(e)
	}
	return e
}

// captureErrors turns every error status into an *Error before the SDK sees
// it, so the status, headers and body are kept whatever the body's shape:
// OpenAI-compatible servers differ in how they report errors.
func captureErrors(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return nil, statusError(res, body, time.Now())
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
		return "", clip(string(body), 300)
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
		msg = clip(string(body), 300)
	}
	return code, msg
}

func statusError(res *http.Response, body []byte, now time.Time) *Error {
	e := &Error{StatusCode: res.StatusCode, RequestID: res.Header.Get("x-request-id")}
	e.Code, e.Message = parseBody(body)
	if e.Message == "" {
		e.Message = http.StatusText(res.StatusCode)
	}
	if d, ok := model.ParseRetryAfter(res.Header, now); ok {
		e.Delay = d
	}
	return e
}

// classify sets Transient and Hint from the status and the code.
func (m *Model) classify(e *Error) {
	lower := strings.ToLower(e.Message)
	switch {
	case e.Code == "insufficient_quota":
		// A 429 that waiting does not fix.
		e.Hint = "the account has no quota left; check the plan and billing of the key's organization"
		return
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		e.Transient = true
		return
	case e.StatusCode == 0:
		// An error inside a 200 stream: the request was accepted, so it is
		// transient unless it says the request itself is wrong.
		if e.Code != "invalid_request_error" && e.Code != "context_length_exceeded" {
			e.Transient = true
			return
		}
	}
	switch {
	case e.StatusCode == http.StatusUnauthorized || e.Code == "invalid_api_key":
		e.Hint = m.keyHint
	case e.StatusCode == http.StatusForbidden:
		e.Hint = "the key may not use this model or endpoint; check its project, organization and permissions"
	case e.StatusCode == http.StatusNotFound || e.Code == "model_not_found":
		e.Hint = fmt.Sprintf("check the model name in EVE_MODEL (openai:<model>) and that %s points at a server that serves it (on Ollama, `ollama pull <model>` first)", EnvBaseURL)
	case e.Code == "context_length_exceeded" || strings.Contains(lower, "context length") || strings.Contains(lower, "maximum context"):
		e.Hint = "the conversation exceeds the model's context window; start a new session or shorten tool outputs"
	case strings.Contains(lower, "does not support tools") || strings.Contains(lower, "tool") && strings.Contains(lower, "not supported"):
		e.Hint = "the model does not support tool calling; choose one that does"
	case e.StatusCode == http.StatusRequestEntityTooLarge:
		e.Hint = "the request is too large; start a new session or shorten tool outputs"
	case e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusUnprocessableEntity:
		e.Hint = "the server rejected the request; its message names the part at fault (often the model name or a tool's input schema)"
	}
}

// stepError converts whatever the SDK returned into the error Step returns.
func (m *Model) stepError(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		m.classify(e)
		return e.result()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return (&Error{Message: "the request timed out", Transient: true, Err: ctxErr}).result()
		}
		return fmt.Errorf("openai: %w", ctxErr)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		e := &Error{Err: err}
		e.Code, e.Message = parseBody(se.Event.Data)
		if e.Message == "" {
			e.Message = se.Message
		}
		e.Message = "error in the response stream: " + e.Message
		m.classify(e)
		return e.result()
	}
	if isCertError(err) {
		return &Error{Message: err.Error(), Hint: "the server's TLS certificate is not trusted; check " + EnvBaseURL, Err: err}
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return (&Error{Message: "cannot reach the server: " + err.Error(), Transient: true, Err: err}).result()
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
