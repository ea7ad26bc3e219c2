// Package apierror is what the HTTP model providers share about failed
// calls: reading an error answer before the SDK does, telling failures that
// another attempt may get past from those that need a fix, and the one
// message format. Each provider describes its own API (error shapes, stream
// errors, hints) in an API and keeps its own exported error type.
package apierror

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eve-temporal/eve/model"
)

// Failure is a failed call in the providers' common terms; a provider's
// Wrap copies it into its exported error type.
type Failure struct {
	// StatusCode is the HTTP status, or 0 when no error status came back.
	StatusCode int
	// Code is the provider's name for the error (its type or code).
	Code string
	// Message is the server's own message, or a description of the failure.
	Message string
	// RequestID is the server's request id, for support requests.
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

// Error formats f without the provider's name:
// "<status> <code>: <message> — <hint> (retry after <delay>) (request-id <id>)",
// each part only when set.
func (f *Failure) Error() string {
	var b strings.Builder
	if f.StatusCode != 0 {
		fmt.Fprintf(&b, "%d ", f.StatusCode)
	}
	if f.Code != "" {
		b.WriteString(f.Code)
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	if f.Hint != "" {
		b.WriteString(" — ")
		b.WriteString(f.Hint)
	}
	if f.Delay > 0 {
		fmt.Fprintf(&b, " (retry after %s)", f.Delay)
	}
	if f.RequestID != "" {
		fmt.Fprintf(&b, " (request-id %s)", f.RequestID)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// API is one provider's HTTP API as its failures need it.
type API struct {
	// Name prefixes the messages of errors that are not Failures: "anthropic".
	Name string
	// Server names what could not be reached: "the Messages API".
	Server string
	// BaseURLEnv is the variable that sets the server's address; the hint
	// for an untrusted certificate names it.
	BaseURLEnv string
	// RequestIDHeader is the response header that holds the request id.
	RequestIDHeader string
	// ParseBody reads an error answer's body into f: its code, its message
	// (Clip of the body when it is not an error the provider knows; the
	// status text when that is empty too) and, if the header had none, the
	// request id.
	ParseBody func(f *Failure, body []byte)
	// StreamError recognises an error the SDK reports from inside a 200
	// stream and describes it; Classify then runs on it.
	StreamError func(err error) (*Failure, bool)
	// Classify sets Transient and Hint of an error the server reported,
	// from its status, code and message.
	Classify func(f *Failure)
	// Wrap gives a Failure the provider's exported error type (wrapped in
	// model.Retryable when it is transient).
	Wrap func(f *Failure) error
}

// Middleware is the SDK middleware that turns every error status into a
// *Failure before the SDK sees it, so the status, headers and body are kept
// whatever the body's shape (a proxy's HTML page as well as the provider's
// JSON): install it with the SDK's option.WithMiddleware.
func (a *API) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return nil, a.statusFailure(res, body, time.Now())
}

func (a *API) statusFailure(res *http.Response, body []byte, now time.Time) *Failure {
	f := &Failure{StatusCode: res.StatusCode, RequestID: res.Header.Get(a.RequestIDHeader)}
	a.ParseBody(f, body)
	if f.Message == "" {
		f.Message = http.StatusText(res.StatusCode)
	}
	if d, ok := model.ParseRetryAfter(res.Header, now); ok {
		f.Delay = d
	}
	return f
}

// StepError converts whatever the SDK returned into the error Step
// returns: the provider's error type for anything but the end of the
// caller's context (a deadline is a transient failure, a cancellation is
// returned as it is, so errors.Is finds context.Canceled).
func (a *API) StepError(ctx context.Context, err error) error {
	var f *Failure
	if errors.As(err, &f) {
		a.Classify(f)
		return a.Wrap(f)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return a.Wrap(&Failure{Message: "the request timed out", Transient: true, Err: ctxErr})
		}
		return fmt.Errorf("%s: %w", a.Name, ctxErr)
	}
	if f, ok := a.StreamError(err); ok {
		a.Classify(f)
		return a.Wrap(f)
	}
	if isCertError(err) {
		return a.Wrap(&Failure{Message: err.Error(), Hint: "the server's TLS certificate is not trusted; check " + a.BaseURLEnv, Err: err})
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return a.Wrap(&Failure{Message: "cannot reach " + a.Server + ": " + err.Error(), Transient: true, Err: err})
	}
	return a.Wrap(&Failure{Message: err.Error(), Err: err})
}

// TransientStatus reports the statuses another attempt may get past:
// timeouts, conflicts, rate limits and server errors.
func TransientStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// ContextWindowHint is the hint for a conversation longer than the model's
// context window.
const ContextWindowHint = "the conversation exceeds the model's context window; start a new session or shorten tool outputs"

// isCertError reports a TLS verification failure: a configuration problem
// that retrying does not fix.
func isCertError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var h x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &h) || errors.As(err, &ci)
}

// Clip collapses whitespace in an error body that is not the provider's
// JSON (a proxy's page, say) and cuts it to 300 bytes.
func Clip(body []byte) string {
	const n = 300
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
