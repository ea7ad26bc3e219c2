// Package client is the Go client of eve's session protocol (the HTTP API
// that `eve serve` and `eve dev` serve, and that eve's own npm client
// speaks): create sessions, send messages, answer input requests, stream
// typed events, and cancel, clear, compact or reset sessions.
//
//	c := client.New("http://127.0.0.1:4111", client.WithAPIKey(os.Getenv("EVE_API_KEY")))
//	acc, err := c.CreateAndSend(ctx, "what's the weather in Paris")
//	turn, err := c.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, 0, nil)
//	fmt.Println(turn.Reply)
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/eve-temporal/eve/protocol"
)

// DefaultURL is where `eve serve` and `eve dev` listen by default.
const DefaultURL = "http://127.0.0.1:4111"

// Client talks to one eve API server. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	apiKey  string
	http    *http.Client
	headers http.Header
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends Authorization: Bearer key (nothing when key is empty).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = strings.TrimSpace(key) } }

// WithHTTPClient uses hc instead of a default client (which has no overall
// timeout, since streams are long-lived; use contexts to bound calls).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithHeader adds a header to every request.
func WithHeader(name, value string) Option {
	return func(c *Client) { c.headers.Add(name, value) }
}

// New returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:4111", or a prefix such as "https://host/eve/myagent").
// An empty baseURL is DefaultURL.
func New(baseURL string, opts ...Option) *Client {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		u = &url.URL{Scheme: "http", Host: strings.TrimPrefix(baseURL, "//")}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, http: &http.Client{}, headers: http.Header{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server's base URL.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is an error answer of the server: {ok:false, error, code}.
type Error struct {
	Status  int
	Code    string
	Message string
	// Field is the JSON pointer of an edited input's failing field (422
	// invalid_input).
	Field string
	// Refused are the answers a policy refused when none of the batch
	// settled (400 rejected): each names its request and the reason. The
	// requests stay open.
	Refused []protocol.Refusal
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("eve API %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("eve API %d: %s", e.Status, e.Message)
}

// Errors an *Error matches with errors.Is, by its code.
var (
	// ErrSessionNotFound: no session has that id (404 session_not_found).
	ErrSessionNotFound = errors.New("session not found")
	// ErrSessionEnded: the session's workflow closed (its lifetime ended,
	// or it was terminated, failed, timed out or canceled) and takes
	// nothing more (410 session_ended); Message says how and why. What it
	// recorded stays readable (Events; a Stream reads it and ends at its
	// session.completed, or with this error). Start a new session.
	ErrSessionEnded = errors.New("session ended")
)

// Is matches ErrSessionNotFound and ErrSessionEnded by code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrSessionNotFound:
		return e.Code == "session_not_found"
	case ErrSessionEnded:
		return e.Code == "session_ended"
	}
	return false
}

// IsStatus reports whether err is an *Error with that HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// routeURL joins a route (e.g. "/eve/v1/session") to the base URL. A base
// that is a named mount (/eve/<agent> or /eve/<agent>/v1) replaces the
// route's /eve/v1 prefix, as eve's client does.
func (c *Client) routeURL(route string, query url.Values) string {
	u := *c.base
	p := u.Path
	base := strings.TrimSuffix(u.EscapedPath(), "/")
	var joined string // escaped; route's own segments are escaped already
	switch {
	case isNamedMount(p):
		joined = base + strings.TrimPrefix(route, "/eve")
	case isNamedProtocol(p):
		joined = base + strings.TrimPrefix(route, "/eve/v1")
	default:
		joined = base + route
	}
	u.RawPath = joined
	u.Path, _ = url.PathUnescape(joined)
	q := u.Query()
	for k, vs := range query {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func isNamedMount(p string) bool {
	rest, ok := strings.CutPrefix(p, "/eve/")
	return ok && rest != "" && rest != "v1" && !strings.Contains(rest, "/")
}

func isNamedProtocol(p string) bool {
	rest, ok := strings.CutPrefix(p, "/eve/")
	if !ok {
		return false
	}
	name, v, ok := strings.Cut(rest, "/")
	return ok && name != "" && v == "v1"
}

func sessionRoute(id, suffix string) string {
	return "/eve/v1/session/" + url.PathEscape(id) + suffix
}

func (c *Client) newRequest(ctx context.Context, method, route string, query url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.routeURL(route, query), rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, route string, body, out any) (int, error) {
	return c.doWith(ctx, method, route, body, out, nil)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, route string, body, out any, headers map[string]string) (int, error) {
	req, err := c.newRequest(ctx, method, route, nil, body)
	if err != nil {
		return 0, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, route, err)
		}
	}
	return resp.StatusCode, nil
}

func decodeError(status int, data []byte) error {
	var b protocol.ErrorBody
	if json.Unmarshal(data, &b) == nil && b.Error != "" {
		return &Error{Status: status, Code: b.Code, Message: b.Error, Field: b.Field, Refused: b.Refused}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Message: msg}
}

// Health is GET /eve/v1/health.
type Health = protocol.Health

// Health checks the server (and, behind it, Temporal).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	_, err := c.do(ctx, http.MethodGet, "/eve/v1/health", nil, &h)
	return h, err
}

// Info returns GET /eve/v1/info (eve's agent info, version 5) as raw JSON.
func (c *Client) Info(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	_, err := c.do(ctx, http.MethodGet, "/eve/v1/info", nil, &raw)
	return raw, err
}

// Accepted is the answer to a create, message or answers request. For
// answers, Status is "accepted" when every answer settled (Resolutions)
// or repeated a settled one (Duplicates), and "partial" when a policy
// refused some (Refused); when it refused all, Respond returns an *Error
// (400 rejected) whose Refused says which and why.
type Accepted = protocol.Accepted

// Create starts a session without a message and returns its id.
func (c *Client) Create(ctx context.Context) (string, error) {
	var a Accepted
	if _, err := c.do(ctx, http.MethodPost, "/eve/v1/session", nil, &a); err != nil {
		return "", err
	}
	return a.SessionID, nil
}

// CreateAndSend starts a session with its first message.
func (c *Client) CreateAndSend(ctx context.Context, message string) (Accepted, error) {
	var a Accepted
	_, err := c.do(ctx, http.MethodPost, "/eve/v1/session", map[string]any{"message": message}, &a)
	return a, err
}

// Send delivers a message to a session. The answer's DeliveryID is on
// every event of the turn it starts (meta.deliveryIds).
func (c *Client) Send(ctx context.Context, sessionID, message string) (Accepted, error) {
	var a Accepted
	_, err := c.do(ctx, http.MethodPost, sessionRoute(sessionID, ""), map[string]any{"message": message}, &a)
	return a, err
}

// SendOnce is Send with an Idempotency-Key: sending the same message again
// with the same key (a retry after a timeout or a dropped connection)
// answers the first acknowledgement and never starts a second turn.
func (c *Client) SendOnce(ctx context.Context, sessionID, message, idempotencyKey string) (Accepted, error) {
	var a Accepted
	_, err := c.doWith(ctx, http.MethodPost, sessionRoute(sessionID, ""), map[string]any{"message": message}, &a, map[string]string{"Idempotency-Key": idempotencyKey})
	return a, err
}

// CreateAndSendOnce is CreateAndSend with an Idempotency-Key: a retry with
// the same key answers the session and turn the first request started.
func (c *Client) CreateAndSendOnce(ctx context.Context, message, idempotencyKey string) (Accepted, error) {
	var a Accepted
	_, err := c.doWith(ctx, http.MethodPost, "/eve/v1/session", map[string]any{"message": message}, &a, map[string]string{"Idempotency-Key": idempotencyKey})
	return a, err
}

// Respond answers input requests of a session (all or nothing: a batch
// with any invalid answer is refused and changes nothing). An answer a
// response policy refuses is never accepted: Accepted.Refused lists it
// beside the answers that settled, or, when none did, Respond returns an
// *Error (400 rejected) naming each request and the policy's reason.
func (c *Client) Respond(ctx context.Context, sessionID string, responses ...protocol.InputResponse) (Accepted, error) {
	if len(responses) == 0 {
		return Accepted{}, errors.New("respond: at least one input response is required")
	}
	var a Accepted
	_, err := c.do(ctx, http.MethodPost, sessionRoute(sessionID, ""), map[string]any{"inputResponses": responses}, &a)
	return a, err
}

// ControlResult is the answer of Cancel, Clear, Compact and Reset: Status
// is accepted, no_active_turn, no_active_session or reset.
type ControlResult = protocol.ControlResult

// Cancel cancels the session's running turn (only turnID's, when set).
func (c *Client) Cancel(ctx context.Context, sessionID, turnID string) (ControlResult, error) {
	body := map[string]any{}
	if turnID != "" {
		body["turnId"] = turnID
	}
	return c.control(ctx, sessionID, "/cancel", body)
}

// Clear forgets the conversation the model sees (the events stay).
func (c *Client) Clear(ctx context.Context, sessionID string) (ControlResult, error) {
	return c.control(ctx, sessionID, "/clear", nil)
}

// Compact shrinks the conversation the model sees.
func (c *Client) Compact(ctx context.Context, sessionID string) (ControlResult, error) {
	return c.control(ctx, sessionID, "/compact", nil)
}

// Reset retires the session.
func (c *Client) Reset(ctx context.Context, sessionID, reason string) (ControlResult, error) {
	body := map[string]any{}
	if reason != "" {
		body["reason"] = reason
	}
	return c.control(ctx, sessionID, "/reset", body)
}

func (c *Client) control(ctx context.Context, sessionID, suffix string, body any) (ControlResult, error) {
	var r ControlResult
	_, err := c.do(ctx, http.MethodPost, sessionRoute(sessionID, suffix), body, &r)
	return r, err
}
