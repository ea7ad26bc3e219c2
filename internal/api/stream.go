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

// fastWindow keeps a polling feed fast for a while after its last event
// or write, so the first events of a turn are not delayed by the idle interval.
const fastWindow = 2 * time.Second

// readTimeout bounds one read of the workflows' logs (a query waits for a
// worker; while none runs, the stream keeps heartbeating).
const readTimeout = 10 * time.Second

// openReads is how many reads, readTimeout each, a stream's first read
// makes before it answers 503: eve's clients do not retry a stream that
// fails to open, so a worker slow to answer (a loaded machine, a cold
// cache replaying a long history) is waited for, within bounds.
const openReads = 3

// openRead is a stream's first read of the session's log (ended: of a
// closed session's, sessions.ReadEnded).
func (s *Server) openRead(ctx context.Context, id string, start int, ended bool) (sessions.Page, error) {
	read := s.opts.Sessions.Read
	if ended {
		read = s.opts.Sessions.ReadEnded
	}
	for i := 1; ; i++ {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		page, err := read(rctx, id, start)
		timedOut := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil || !timedOut || i == openReads {
			return page, err
		}
		s.log.Debug("api: stream's first read timed out; reading again", "session", id, "attempt", i)
	}
}

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
	_, closed, err := s.authorizeEnded(rctx, id, ActionStream, SessionAccess{Caller: caller})
	cancel()
	var page sessions.Page
	if err == nil && closed == nil {
		page, err = s.openRead(ctx, id, start, false)
		if errors.As(err, &closed) {
			err = nil // closed since its owner was remembered: authorized
		}
	}
	if err == nil && closed != nil {
		// A closed session's stream is what it recorded: readable, then
		// done. One followed from its end answers 410, so a client stops.
		page, err = s.openRead(ctx, id, start, true)
		if err == nil && follow && page.From >= page.Total {
			err = closed
		}
	}
	var he *httpError
	if errors.As(err, &he) {
		s.fail(w, he)
		return
	}
	if err != nil {
		switch {
		case errors.Is(err, sessions.ErrNotFound):
			writeError(w, http.StatusNotFound, CodeSessionNotFound, "session "+id+" not found")
		case errors.As(err, &closed):
			s.hub.gone(id) // streams still open on it end too
			s.fail(w, endedError(closed))
		case ctx.Err() != nil:
		default:
			s.log.Warn("api: stream unavailable", "session", id, "err", err)
			s.fail(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "session stream unavailable (the session's workers did not answer in time; retry after Retry-After): %v", err))
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
	// readOn reads from cursor by itself, up to the tail as it was at the
	// first read (end) or, for end < 0, until it has caught up.
	readOn := func(end int) (ok bool) {
		for end < 0 || cursor < end {
			rctx, cancel := context.WithTimeout(ctx, readTimeout)
			next, err := s.opts.Sessions.ReadNext(rctx, id, cursor, page) // a closed session's page reads on as one
			cancel()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, sessions.ErrNotFound) && !errors.Is(err, sessions.ErrEnded) {
					s.log.Warn("api: stream read failed", "session", id, "cursor", cursor, "err", err)
				}
				return false // the client resumes from its cursor
			}
			page = next
			if ok, ended := writeEvents(page.Events); !ok || ended {
				return false
			}
			cursor = page.Next()
			if len(page.Events) == 0 || (end < 0 && !page.More()) {
				return end < 0 // caught up (or the log shrank: a turn workflow that died)
			}
		}
		return true
	}
	if !follow || closed != nil {
		// Up to the tail as it was at the first read, a page at a time
		// (a closed session's is its end: a follower that reconnects
		// from there is answered 410).
		readOn(page.Total)
		return
	}
	if page.More() && !readOn(-1) {
		return
	}

	// Caught up: the session's feed (one reader per session on this
	// server) hands this stream the events that follow.
	sub := s.hub.subscribe(id, cursor)
	defer sub.close()
	lastWrite := time.Now()
	var leaseEnd <-chan time.Time
	if control {
		t := time.NewTimer(s.opts.LeaseDuration)
		defer t.Stop()
		leaseEnd = t.C
	}
	heartbeat := time.NewTimer(s.opts.HeartbeatInterval)
	defer heartbeat.Stop()
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
		case <-sub.C:
		}
		for {
			evs, behind, ended := sub.since(cursor)
			if behind {
				// Further back than the feed keeps: read on alone.
				if !readOn(-1) {
					return
				}
				continue
			}
			if ended {
				return // gone: a reconnect answers 404 or 410
			}
			if len(evs) == 0 {
				break
			}
			ok, end := writeEvents(evs)
			if !ok || end {
				return
			}
			cursor += len(evs)
			lastWrite = time.Now()
		}
	}
}
