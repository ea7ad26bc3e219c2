package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// Stream protocol constants (eve 0.80.1 protocol/message.js).
const (
	StreamVersion       = "26"
	HeaderStreamVersion = "x-eve-stream-version"
	HeaderTailIndex     = "x-eve-stream-tail-index"
	HeaderSessionID     = "x-eve-session-id"
	HeaderStreamFormat  = "x-eve-stream-format"
)

// LeaseEndedLine ends a stream response when the client asked for stream
// control (streamControlVersion=1); the client reconnects from its cursor.
const LeaseEndedLine = `{"$eve":"stream.lease-ended","version":1}` + "\n"

// fastWindow keeps a stream polling fast for a while after its last event
// or write, so the first events of a turn are not delayed by the idle interval.
const fastWindow = 2 * time.Second

// readTimeout bounds one read of the workflows' logs (a query waits for a
// worker; while none runs, the stream keeps heartbeating).
const readTimeout = 10 * time.Second

// streamRetryAfter is the Retry-After (seconds) of a stream refused by the
// per-principal cap.
const streamRetryAfter = 5

var intPattern = regexp.MustCompile(`^-?\d+$`)

// stream: GET /eve/v1/session/{id}/stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	start := 0
	if v := q.Get("startIndex"); v != "" {
		n, err := strconv.Atoi(v)
		if !intPattern.MatchString(v) || err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "expected startIndex to be an integer")
			return
		}
		start = n
	}
	// A negative startIndex reads at most the last MaxTailEvents events.
	start = max(start, -s.opts.MaxTailEvents)
	follow := q.Get("follow") != "false" && q.Get("follow") != "0"
	control := q.Get("streamControlVersion") == "1"

	ctx := r.Context()
	caller := Caller(ctx)
	release, ok := s.streams.acquire(caller, s.opts.MaxStreamsPerPrincipal)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeError(w, http.StatusTooManyRequests, CodeTooManyStreams, fmt.Sprintf(
			"principal %q has %d streams open, the limit per principal (--max-streams-per-principal, EVE_MAX_STREAMS_PER_PRINCIPAL): close one, or retry after %d s",
			caller.ID, s.opts.MaxStreamsPerPrincipal, streamRetryAfter))
		return
	}
	defer release()

	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	_, err := s.authorize(rctx, id, ActionStream, SessionAccess{Caller: caller})
	var page sessions.Page
	if err == nil {
		page, err = s.opts.Sessions.Read(rctx, id, start)
	}
	cancel()
	var he *httpError
	if errors.As(err, &he) {
		s.fail(w, he)
		return
	}
	wake, unsubscribe := s.wakes.subscribe(id)
	defer unsubscribe()
	if err != nil {
		var ended *sessions.EndedError
		switch {
		case errors.Is(err, sessions.ErrNotFound):
			writeError(w, http.StatusNotFound, CodeSessionNotFound, "session "+id+" not found")
		case errors.As(err, &ended):
			s.fail(w, endedError(ended))
		case ctx.Err() != nil:
		default:
			s.log.Warn("api: stream unavailable", "session", id, "err", err)
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "session stream unavailable: "+err.Error())
		}
		return
	}

	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson; charset=utf-8")
	h.Set("Cache-Control", "no-store, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set(HeaderSessionID, id)
	h.Set(HeaderStreamFormat, "ndjson")
	h.Set(HeaderStreamVersion, StreamVersion)
	h.Set(HeaderTailIndex, strconv.Itoa(page.Tail()))
	w.WriteHeader(http.StatusOK)

	// Every write has a deadline: a client that stops reading fails the
	// write after StreamWriteTimeout, which ends this handler.
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort, for the next request on the connection
	write := func(b []byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	writeEvents := func(evs []protocol.Event) (ok, ended bool) {
		if len(evs) == 0 {
			return true, false
		}
		var buf []byte
		for _, e := range evs {
			line, err := json.Marshal(e)
			if err != nil {
				s.log.Error("api: encode event", "session", id, "id", e.Meta.ID, "err", err)
				return false, true
			}
			buf = append(buf, line...)
			buf = append(buf, '\n')
			if e.Type == protocol.SessionCompleted || e.Type == protocol.SessionFailed {
				ended = true
				break
			}
		}
		return write(buf), ended
	}

	if !write([]byte("\n")) {
		return
	}
	ok, ended := writeEvents(page.Events)
	if !ok || ended {
		return
	}
	cursor := page.Next()
	lastType := ""
	if n := len(page.Events); n > 0 {
		lastType = page.Events[n-1].Type
	}
	if !follow {
		// Up to the tail as it was at the first read, a page at a time.
		end := page.Total
		for cursor < end {
			rctx, cancel := context.WithTimeout(ctx, readTimeout)
			next, err := s.opts.Sessions.ReadNext(rctx, id, cursor, page)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("api: stream read failed", "session", id, "cursor", cursor, "err", err)
				}
				return // the client resumes from its cursor
			}
			if len(next.Events) == 0 {
				return // the log shrank (a turn workflow that died)
			}
			page = next
			if ok, ended := writeEvents(page.Events); !ok || ended {
				return
			}
			cursor = page.Next()
		}
		return
	}

	now := time.Now()
	lastActivity := now
	lastWrite := now
	active := page.Active
	var leaseEnd <-chan time.Time
	if control {
		t := time.NewTimer(s.opts.LeaseDuration)
		defer t.Stop()
		leaseEnd = t.C
	}
	heartbeat := time.NewTimer(s.opts.HeartbeatInterval)
	defer heartbeat.Stop()
	first := s.interval(active, lastType, lastActivity)
	if page.More() {
		first = 0
	}
	poll := time.NewTimer(first)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-leaseEnd:
			write([]byte(LeaseEndedLine))
			return
		case <-heartbeat.C:
			if time.Since(lastWrite) >= s.opts.HeartbeatInterval {
				if !write([]byte("\n")) {
					return
				}
				lastWrite = time.Now()
			}
			heartbeat.Reset(s.opts.HeartbeatInterval - time.Since(lastWrite))
			continue
		case <-wake:
			lastActivity = time.Now()
		case <-poll.C:
		}
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		next, err := s.opts.Sessions.ReadNext(rctx, id, cursor, page)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, sessions.ErrNotFound), errors.Is(err, sessions.ErrEnded):
			// Gone: end the response; a reconnect answers 404 or 410.
			return
		case err != nil:
			s.log.Debug("api: stream read failed; retrying", "session", id, "err", err)
			active = false
		default:
			page = next
			active = page.Active
			if len(page.Events) > 0 {
				ok, ended := writeEvents(page.Events)
				if !ok || ended {
					return
				}
				cursor = page.Next()
				lastType = page.Events[len(page.Events)-1].Type
				lastActivity = time.Now()
				lastWrite = lastActivity
			}
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		if err == nil && page.More() {
			poll.Reset(0) // a page cut at the size bound: read on at once
		} else {
			poll.Reset(s.interval(active, lastType, lastActivity))
		}
	}
}

// interval is the wait before the next poll: PollInterval while events
// flow (within fastWindow of the last event or write), five times that
// while a turn runs quietly (a long tool or model call), and
// IdlePollInterval when the session is idle or the turn is parked on input
// (its answer comes through a write, which wakes the stream).
func (s *Server) interval(active bool, lastType string, lastActivity time.Time) time.Duration {
	switch {
	case time.Since(lastActivity) < fastWindow:
		return s.opts.PollInterval
	case active && lastType != protocol.TurnWaiting:
		return min(5*s.opts.PollInterval, s.opts.IdlePollInterval)
	}
	return s.opts.IdlePollInterval
}
