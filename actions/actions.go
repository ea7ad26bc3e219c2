// Package actions is for external jobs: it completes, fails or heartbeats a
// delegated tool call through its completion URL. Calls are at-least-once:
// network errors and 5xx are retried with backoff and jitter, and a
// duplicate completion is answered 200 like the first.
//
// The capability token in a completion URL is a secret. The client sends it
// in an "Authorization: Bearer" header (the URL it posts to names only the
// action id), and no error it returns contains it: URLs in errors are
// redacted with RedactURL.
package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/signals"
)

// Errors the server answers that retrying cannot fix.
var (
	// ErrConflict (409): the action already settled with a different outcome.
	ErrConflict = errors.New("action already settled with a different outcome")
	// ErrGone (410): the action ended first (deadline or cancellation).
	ErrGone = errors.New("action ended before this completion")
	// ErrInvalidOutput (422): the output breaks the tool's output schema;
	// the action stays pending for a correct completion.
	ErrInvalidOutput = errors.New("output breaks the tool's output schema")
	// ErrInvalidCapability (401/404): forged, expired or unknown URL.
	ErrInvalidCapability = errors.New("completion URL is invalid, expired or unknown")
)

// StatusError carries the server's answer; errors.Is matches the sentinels above.
type StatusError struct {
	Status  int
	Code    string
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("completion endpoint answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *StatusError) Is(target error) bool {
	switch e.Status {
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusGone:
		return target == ErrGone
	case http.StatusUnprocessableEntity:
		return target == ErrInvalidOutput
	case http.StatusUnauthorized, http.StatusNotFound:
		return target == ErrInvalidCapability
	}
	return false
}

// Client posts to completion URLs.
type Client struct {
	HTTP *http.Client
	// MaxAttempts bounds retries of network errors and 5xx (default 8).
	MaxAttempts int
	// InitialBackoff doubles each retry up to MaxBackoff (defaults 200 ms, 10 s).
	InitialBackoff, MaxBackoff time.Duration
	// TokenInURL posts to the completion URL as it is, the capability in
	// its path, instead of sending the capability in an Authorization
	// header. Only for servers older than the header form.
	TokenInURL bool
}

// Default is the client the package functions use.
var Default = &Client{}

// Complete settles the action with output.
func Complete(ctx context.Context, c signals.Completion, output any) error {
	return Default.Complete(ctx, c, output)
}

// Fail settles the action as failed; the model sees message.
func Fail(ctx context.Context, c signals.Completion, code, message string) error {
	return Default.Fail(ctx, c, code, message)
}

// Heartbeat keeps the job alive and reports whether it should stop.
func Heartbeat(ctx context.Context, c signals.Completion, details any) (cancelRequested bool, err error) {
	return Default.Heartbeat(ctx, c, details)
}

// Complete settles the action with output.
func (cl *Client) Complete(ctx context.Context, c signals.Completion, output any) error {
	raw, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = cl.post(ctx, c, "", map[string]json.RawMessage{"output": raw})
	return err
}

// Fail settles the action as failed.
func (cl *Client) Fail(ctx context.Context, c signals.Completion, code, message string) error {
	_, err := cl.post(ctx, c, "", map[string]any{"error": map[string]string{"code": code, "message": message}})
	return err
}

// Heartbeat posts to the heartbeat endpoint.
func (cl *Client) Heartbeat(ctx context.Context, c signals.Completion, details any) (bool, error) {
	body := map[string]any{}
	if details != nil {
		body["details"] = details
	}
	raw, err := cl.post(ctx, c, "/heartbeat", body)
	if err != nil {
		return false, err
	}
	var r struct {
		CancelRequested bool `json:"cancelRequested"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return false, fmt.Errorf("decode heartbeat answer: %w", err)
	}
	return r.CancelRequested, nil
}

// endpoint splits a completion URL into the URL to post to and the
// capability to send in the Authorization header. The URL it returns names
// the action id in place of the capability (…/actions/<action id>); a URL
// whose capability it cannot find is posted to as it is, with no header.
func (cl *Client) endpoint(c signals.Completion) (target, token string) {
	u, err := url.Parse(c.URL)
	if err != nil || cl.TokenInURL {
		return c.URL, ""
	}
	prefix, tok, ok := signals.SplitCompletionPath(u.Path)
	if !ok {
		return c.URL, ""
	}
	id := c.ID
	if id == "" {
		id = capability.PeekActionID(tok)
	}
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return c.URL, ""
	}
	u.Path, u.RawPath = prefix+id, ""
	return u.String(), tok
}

// RedactURL returns a completion URL fit for logs and error messages: the
// capability is replaced by "…" (see RedactPath), and user info, query and
// fragment are dropped. A URL it cannot read is "…" whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "…"
	}
	path := RedactPath(u.Path)
	if u.Host == "" {
		return path
	}
	return u.Scheme + "://" + u.Host + path
}

// RedactPath replaces the capability in a completion URL's path by "…":
// "/eve/v1/actions/<token>/heartbeat" becomes "/eve/v1/actions/…/heartbeat".
// Other paths, and completion paths that name an action id rather than a
// capability, are returned as they are.
func RedactPath(path string) string {
	prefix, _, ok := signals.SplitCompletionPath(path)
	if !ok {
		return path
	}
	if strings.HasSuffix(path, "/heartbeat") {
		return prefix + "…/heartbeat"
	}
	return prefix + "…"
}

// scrub makes sure err says nothing of the capability: url.Errors (which
// quote the request URL) are redacted in place, so errors.Is and errors.As
// keep working; any other error that still contains it is replaced by a
// redacted copy of its text.
func scrub(err error, token, rawURL string) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	msg := err.Error()
	if token != "" && strings.Contains(msg, token) || rawURL != "" && strings.Contains(msg, rawURL) {
		if rawURL != "" {
			msg = strings.ReplaceAll(msg, rawURL, RedactURL(rawURL))
		}
		if token != "" {
			msg = strings.ReplaceAll(msg, token, "…")
		}
		return errors.New(msg)
	}
	return err
}

func (cl *Client) post(ctx context.Context, c signals.Completion, suffix string, body any) ([]byte, error) {
	if c.URL == "" {
		return nil, errors.New("completion URL is empty")
	}
	target, token := cl.endpoint(c)
	secret := token
	if secret == "" {
		_, secret, _ = signals.SplitCompletionPath(strings.SplitN(c.URL, "?", 2)[0])
	}
	raw, err := cl.do(ctx, target+suffix, token, body)
	return raw, scrub(err, secret, c.URL)
}

func (cl *Client) do(ctx context.Context, target, token string, body any) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	hc := cl.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	attempts, backoff, maxBackoff := cl.MaxAttempts, cl.InitialBackoff, cl.MaxBackoff
	if attempts <= 0 {
		attempts = 8
	}
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	var last error
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("completion request to %s: the URL is not valid", RedactURL(target))
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch {
			case rerr == nil && resp.StatusCode == http.StatusOK:
				return raw, nil
			case resp.StatusCode >= 500 || rerr != nil:
				last = statusError(resp.StatusCode, raw)
			default:
				return nil, statusError(resp.StatusCode, raw)
			}
		} else {
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = RedactURL(ue.URL)
			}
			last = err
		}
		if attempt >= attempts || ctx.Err() != nil {
			return nil, fmt.Errorf("after %d attempts: %w", attempt, last)
		}
		// Full jitter keeps many jobs from retrying in step.
		sleep := time.Duration(rand.Int64N(int64(backoff) + 1))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("after %d attempts: %w (last: %v)", attempt, ctx.Err(), last)
		case <-time.After(sleep):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func statusError(status int, raw []byte) error {
	var b struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	json.Unmarshal(raw, &b)
	if b.Error == "" {
		b.Error = http.StatusText(status)
	}
	return &StatusError{Status: status, Code: b.Code, Message: b.Error}
}
