// Package httpbody guards how eve's HTTP servers read request bodies: a
// body must arrive within a deadline (a client that stalls is cut off, not
// waited on), a JSON body must be application/json and one JSON value, and
// a refusal sent before the body is read closes the connection, so the
// server does not first wait to drain a body that never comes.
package httpbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultReadTimeout bounds how long a request's body may take to arrive.
// JSON bodies are small (at most a few MiB), so a slow but honest client
// sends one well within it.
const DefaultReadTimeout = 10 * time.Second

// Deadline gives r's body timeout to arrive: the connection's read
// deadline is set now and cleared once the body has been read to its end
// (so a handler that then waits, or streams, is not cut off by it). A
// request without a body gets no deadline, and a body that has one keeps
// it: the server that mounts a handler decides (api.Options.BodyReadTimeout
// holds for the tools API and completion URLs it serves). It returns the
// request to pass on.
func Deadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) *http.Request {
	if _, set := r.Body.(*deadlineBody); set || !HasBody(r) || timeout <= 0 {
		return r
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return r // not a connection that takes deadlines (a test recorder)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, timeout: timeout, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
	return r
}

type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
	once    sync.Once
	clear   func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.clear)
	}
	return n, err
}

// Errors of Read.
var (
	ErrTooLarge = errors.New("request body too large")
	ErrTimeout  = errors.New("request body too slow")
)

// Read reads r's body, at most limit bytes. A body over the limit is
// ErrTooLarge (refused before any of it is read when its Content-Length
// says so); one that does not arrive within its Deadline is ErrTimeout,
// and the connection closes after the answer. The errors say the limit
// and how to mend it, for the caller's answer.
func Read(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	tooLarge := fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, limit)
	if r.ContentLength > limit {
		Refusing(w, r)
		return nil, tooLarge
	}
	var timeout time.Duration
	if db, ok := r.Body.(*deadlineBody); ok {
		timeout = db.timeout
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return body, nil
	case errors.As(err, &mbe):
		return nil, tooLarge
	case IsTimeout(err):
		w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("%w: the body did not arrive within %s: send it at once", ErrTimeout, timeout)
	}
	return nil, fmt.Errorf("unreadable request body: %w", err)
}

// HasBody reports whether the request says it carries a body.
func HasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && (r.ContentLength > 0 || r.ContentLength == -1)
}

// Refusing marks a response that is sent before the request's body was
// read: the connection closes after it, because Go's server would otherwise
// read (and wait for) the unread body before it writes the answer.
func Refusing(w http.ResponseWriter, r *http.Request) {
	if HasBody(r) {
		w.Header().Set("Connection", "close")
	}
}

// IsTimeout reports a body read that ran past its deadline.
func IsTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// IsJSON reports whether a Content-Type is application/json (parameters
// such as charset allowed; nothing else is).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// ErrTrailingData is a JSON body with more after its first value.
var ErrTrailingData = errors.New("the body has data after its JSON value: send exactly one JSON value")

// DecodeOne decodes exactly one JSON value from body into v: whitespace
// may follow it, nothing else.
func DecodeOne(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}

// Empty reports a body of whitespace only.
func Empty(body []byte) bool { return strings.TrimSpace(string(body)) == "" }
