package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// StreamOptions adjusts Stream.
type StreamOptions struct {
	// NoFollow reads up to the tail as it was when the stream opened, then ends.
	NoFollow bool
	// IdleTimeout reconnects when no byte arrived for this long (default
	// 15 s; the server writes a heartbeat every 10 s).
	IdleTimeout time.Duration
	// MaxReconnects bounds consecutive reconnects that yield no event
	// (default 8). A lease end (every 60 s by default) reconnects at once
	// and does not count.
	MaxReconnects int
}

// Stream reads a session's events from an index on, reconnecting from its
// cursor when the server ends a lease or the connection drops:
//
//	st := c.Stream(ctx, sessionID, 0, nil)
//	defer st.Close()
//	for st.Next() {
//		fmt.Println(st.Index(), st.Event().Type)
//	}
//	if err := st.Err(); err != nil { ... }
//
// A Stream is used by one goroutine; to stop it from another, cancel the
// context it was opened with.
type Stream struct {
	c         *Client
	ctx       context.Context
	cancel    context.CancelFunc
	sessionID string
	opts      StreamOptions
	cursor    int
	tail      int // NoFollow: stop after this index; -2 until known

	body       io.ReadCloser
	bodyCancel context.CancelFunc
	lines      chan lineOrErr
	event      protocol.Event
	index      int
	err        error
	done       bool
	retries    int
	// Opened counts the HTTP responses the stream has read (for tests).
	Opened int
	// Leases counts the lease-ended lines received.
	Leases int
}

type lineOrErr struct {
	line []byte
	err  error
}

// Stream opens a session's event stream at index from (a negative from
// counts back from the tail, as the server's tail header resolves it).
func (c *Client) Stream(ctx context.Context, sessionID string, from int, opts *StreamOptions) *Stream {
	var o StreamOptions
	if opts != nil {
		o = *opts
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 15 * time.Second
	}
	if o.MaxReconnects <= 0 {
		o.MaxReconnects = 8
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{c: c, ctx: ctx, cancel: cancel, sessionID: sessionID, opts: o, cursor: from, tail: -2, index: -1}
}

// Next advances to the next event; false at the end (see Err).
func (s *Stream) Next() bool {
	for !s.done {
		if s.body == nil {
			if s.opts.NoFollow && s.tail >= -1 && s.cursor > s.tail {
				s.finish(nil)
				return false
			}
			if err := s.open(); err != nil {
				s.finish(err)
				return false
			}
		}
		var l lineOrErr
		idle := time.NewTimer(s.opts.IdleTimeout)
		select {
		case <-s.ctx.Done():
			idle.Stop()
			s.finish(s.ctx.Err())
			return false
		case <-idle.C:
			l = lineOrErr{err: errors.New("stream idle")}
		case l = <-s.lines:
			idle.Stop()
		}
		if l.err != nil {
			// The response ended (io.EOF) or broke: reconnect from the cursor.
			s.closeBody()
			if s.opts.NoFollow && s.tail >= -1 && s.cursor > s.tail {
				s.finish(nil)
				return false
			}
			if s.cursor < 0 {
				// No tail header came back: a tail-relative cursor cannot resume.
				s.finish(nil)
				return false
			}
			s.retries++
			if s.retries > s.opts.MaxReconnects {
				s.finish(fmt.Errorf("stream of session %s: gave up after %d reconnects: %v", s.sessionID, s.opts.MaxReconnects, l.err))
				return false
			}
			if !s.sleep(backoff(s.retries)) {
				return false
			}
			continue
		}
		line := bytes.TrimSpace(l.line)
		if len(line) == 0 {
			continue // heartbeat
		}
		if bytes.Contains(line, []byte(`"$eve"`)) {
			var ctl struct {
				Eve     string `json:"$eve"`
				Version int    `json:"version"`
			}
			if json.Unmarshal(line, &ctl) == nil && ctl.Eve == "stream.lease-ended" {
				s.Leases++
				s.closeBody()
				s.retries = 0
				continue
			}
		}
		var e protocol.Event
		if err := json.Unmarshal(line, &e); err != nil {
			s.finish(fmt.Errorf("stream of session %s: bad event line %q: %w", s.sessionID, truncate(line), err))
			return false
		}
		s.event = e
		s.index = s.cursor
		if s.cursor >= 0 {
			s.cursor++
		}
		s.retries = 0
		if e.Type == protocol.SessionCompleted || e.Type == protocol.SessionFailed {
			s.closeBody()
			s.done = true
		}
		return true
	}
	return false
}

// Event is the current event.
func (s *Stream) Event() protocol.Event { return s.event }

// Index is the current event's global index.
func (s *Stream) Index() int { return s.index }

// Cursor is the index the stream reads next (where a reconnect resumes).
func (s *Stream) Cursor() int { return s.cursor }

// Tail is the tail index the server reported when the stream first opened.
func (s *Stream) Tail() int { return s.tail }

// Err is the error that ended the stream (nil at a normal end).
func (s *Stream) Err() error {
	if errors.Is(s.err, context.Canceled) && s.ctx.Err() != nil {
		return nil
	}
	return s.err
}

// Close ends the stream.
func (s *Stream) Close() {
	s.finish(nil)
}

func (s *Stream) finish(err error) {
	if !s.done {
		s.done = true
		s.err = err
	}
	s.closeBody()
	s.cancel()
}

func (s *Stream) closeBody() {
	if s.body != nil {
		s.bodyCancel()
		s.body.Close()
		s.body = nil
	}
}

func (s *Stream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		s.finish(s.ctx.Err())
		return false
	case <-t.C:
		return true
	}
}

func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt-1, 4)
	return min(d, 4*time.Second)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// open starts one HTTP response at the cursor, retrying statuses the
// protocol calls transient.
func (s *Stream) open() error {
	q := url.Values{}
	q.Set("streamControlVersion", "1")
	if s.cursor != 0 {
		q.Set("startIndex", strconv.Itoa(s.cursor))
	}
	if s.tail == -2 {
		q.Set("includeTailIndex", "1")
	}
	if s.opts.NoFollow {
		q.Set("follow", "false")
	}
	for attempt := 1; ; attempt++ {
		req, err := s.c.newRequest(s.ctx, http.MethodGet, sessionRoute(s.sessionID, "/stream"), q, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Cache-Control", "no-store")
		resp, err := s.c.http.Do(req)
		if err != nil {
			if s.ctx.Err() != nil || attempt >= 5 {
				return err
			}
			if !s.sleep(backoff(attempt)) {
				return s.ctx.Err()
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			err := decodeError(resp.StatusCode, data)
			switch resp.StatusCode {
			case 409, 425, 500, 502, 503, 504:
				if attempt < 12 {
					if !s.sleep(backoff(attempt)) {
						return s.ctx.Err()
					}
					continue
				}
			}
			return err
		}
		if v := resp.Header.Get("x-eve-stream-version"); v == "" {
			resp.Body.Close()
			return fmt.Errorf("stream of session %s: the server sent no x-eve-stream-version header (is %s an eve server?)", s.sessionID, s.c.BaseURL())
		}
		if s.tail == -2 {
			if t, err := strconv.Atoi(resp.Header.Get("x-eve-stream-tail-index")); err == nil {
				s.tail = t
				if s.cursor < 0 {
					// The server resolved the tail-relative start against
					// this same tail: from here on the cursor is absolute.
					s.cursor = max(0, t+1+s.cursor)
				}
			} else if s.opts.NoFollow {
				resp.Body.Close()
				return fmt.Errorf("stream of session %s: the server sent no x-eve-stream-tail-index header", s.sessionID)
			}
		}
		s.Opened++
		s.body = resp.Body
		lines := make(chan lineOrErr)
		s.lines = lines
		bctx, cancel := context.WithCancel(s.ctx)
		s.bodyCancel = cancel
		go readLines(bctx, resp.Body, lines)
		return nil
	}
}

func readLines(ctx context.Context, body io.Reader, out chan<- lineOrErr) {
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			select {
			case out <- lineOrErr{line: line}:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			select {
			case out <- lineOrErr{err: err}:
			case <-ctx.Done():
			}
			return
		}
	}
}

// Events returns a session's events from index from up to the current tail
// (follow=false), and the tail index.
func (c *Client) Events(ctx context.Context, sessionID string, from int) ([]protocol.Event, int, error) {
	if from < 0 {
		return nil, 0, errors.New("events: from must be >= 0")
	}
	st := c.Stream(ctx, sessionID, from, &StreamOptions{NoFollow: true})
	defer st.Close()
	var evs []protocol.Event
	for st.Next() {
		evs = append(evs, st.Event())
	}
	return evs, st.Tail(), st.Err()
}

// Tail returns the index of the session's last event (-1 when it has none).
func (c *Client) Tail(ctx context.Context, sessionID string) (int, error) {
	for attempt := 1; ; attempt++ {
		req, err := c.newRequest(ctx, http.MethodGet, sessionRoute(sessionID, "/stream"), url.Values{"startIndex": {"-1"}, "follow": {"false"}, "includeTailIndex": {"1"}}, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			err := decodeError(resp.StatusCode, data)
			if transient(resp.StatusCode) && attempt < 12 {
				// A read changes nothing: retry as a stream's open does.
				if err := sleepCtx(ctx, retryDelay(resp, attempt)); err != nil {
					return 0, err
				}
				continue
			}
			return 0, err
		}
		resp.Body.Close()
		t, err := strconv.Atoi(resp.Header.Get("x-eve-stream-tail-index"))
		if err != nil {
			return 0, fmt.Errorf("tail of session %s: the server sent no x-eve-stream-tail-index header", sessionID)
		}
		return t, nil
	}
}

// transient reports the statuses the protocol calls transient for reads.
func transient(status int) bool {
	switch status {
	case 409, 425, 429, 500, 502, 503, 504:
		return true
	}
	return false
}

// retryDelay is the server's Retry-After when it sent one (capped at 30 s),
// else the backoff of the attempt.
func retryDelay(resp *http.Response, attempt int) time.Duration {
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
		return min(time.Duration(n)*time.Second, 30*time.Second)
	}
	return backoff(attempt)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
