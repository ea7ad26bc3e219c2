package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// CodeStatusUnavailable: the namespace lacks eve's status attributes.
const CodeStatusUnavailable = "status_unavailable"

// MaxListPageSize bounds ?limit= of the sessions and jobs lists.
const MaxListPageSize = 200

// pageParams reads limit and cursor.
func pageParams(r *http.Request, maxSize int) (size int, cursor []byte, err error) {
	v := r.URL.Query()
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxSize {
			return 0, nil, errorf(http.StatusBadRequest, CodeBadRequest, "limit: expected 1 to %d", maxSize)
		}
		size = n
	}
	if raw := v.Get("cursor"); raw != "" {
		if cursor, err = base64.RawURLEncoding.DecodeString(raw); err != nil {
			return 0, nil, errorf(http.StatusBadRequest, CodeBadRequest, "cursor: pass the nextCursor of the previous page unchanged")
		}
	}
	return size, cursor, nil
}

func (s *Server) listError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, sessions.ErrStatusUnavailable) {
		s.fail(w, errorf(http.StatusServiceUnavailable, CodeStatusUnavailable, "%v", err))
		return
	}
	s.fail(w, s.temporalError(what, "", err))
}

// sessionList: GET /eve/v1/sessions lists sessions newest first from one
// Visibility query per page; each is shown only to a caller who may stream
// it (its owner, a service acting for the owner, or whom the app's hook
// allows). ?owner= keeps the sessions of one principal id (applied to the
// page, so a page may hold fewer items than limit; follow nextCursor).
func (s *Server) sessionList(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.ListQuery{Status: v.Get("status"), Tool: v.Get("tool")}
	if q.Status != "" && !slices.Contains(sessions.ListStatuses, q.Status) {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "status: expected one of %v", sessions.ListStatuses))
		return
	}
	var err error
	if q.PageSize, q.Cursor, err = pageParams(r, MaxListPageSize); err != nil {
		s.fail(w, err)
		return
	}
	owner := v.Get("owner")
	listed, next, err := s.opts.Sessions.List(r.Context(), q)
	if err != nil {
		s.listError(w, "list sessions", err)
		return
	}
	page := protocol.SessionPage{Items: []protocol.SessionItem{}}
	for _, l := range listed {
		if owner != "" && (l.Initiator == nil || l.Initiator.ID != owner) {
			continue
		}
		if !s.allows(r.Context(), SessionAccess{SessionID: l.SessionID, Action: ActionStream, Owner: l.Initiator, Caller: caller}) {
			continue
		}
		it := protocol.SessionItem{SessionID: l.SessionID, Status: l.Status, Tools: l.Tools, StartedAt: l.StartTime}
		if l.Initiator != nil {
			it.Owner = &protocol.PrincipalRef{ID: l.Initiator.ID, Type: l.Initiator.Type}
		}
		if !l.CloseTime.IsZero() {
			t := l.CloseTime
			it.ClosedAt = &t
		}
		page.Items = append(page.Items, it)
	}
	if len(next) > 0 {
		page.NextCursor = base64.RawURLEncoding.EncodeToString(next)
	}
	httpjson.Write(w, http.StatusOK, page)
}

// jobList: GET /eve/v1/jobs lists the delegated actions running turns wait
// on, with each one's deadline and last heartbeat, to callers who may
// cancel their session (cancelling the session's turn cancels its jobs:
// docs/delegated.md, "Cancellation").
func (s *Server) jobList(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.JobsQuery{SessionID: v.Get("session"), Tool: v.Get("tool")}
	if q.SessionID != "" {
		if err := signals.CheckSessionID(q.SessionID); err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "session: %v", err))
			return
		}
	}
	var err error
	if q.PageSize, q.Cursor, err = pageParams(r, MaxListPageSize); err != nil {
		s.fail(w, err)
		return
	}
	jobs, next, err := s.opts.Sessions.Jobs(r.Context(), q)
	if err != nil {
		s.listError(w, "list delegated jobs", err)
		return
	}
	page := protocol.JobPage{Items: []protocol.Job{}}
	for _, j := range jobs {
		owner, _, err := s.owner(r.Context(), j.SessionID)
		if err != nil || !s.allows(r.Context(), SessionAccess{SessionID: j.SessionID, Action: ActionCancel, Owner: owner, Caller: caller}) {
			continue
		}
		it := protocol.Job{ActionID: j.ActionID, SessionID: j.SessionID, TurnID: j.TurnID, WorkflowID: j.WorkflowID, CallID: j.CallID,
			ToolName: j.Tool, State: j.State, Deadline: j.Deadline, StartedAt: j.StartedAt}
		if !j.LastHeartbeat.IsZero() {
			t := j.LastHeartbeat
			it.LastHeartbeatAt = &t
		}
		if json.Valid(j.HeartbeatDetails) {
			it.HeartbeatDetails = j.HeartbeatDetails
		}
		page.Items = append(page.Items, it)
	}
	if len(next) > 0 {
		page.NextCursor = base64.RawURLEncoding.EncodeToString(next)
	}
	httpjson.Write(w, http.StatusOK, page)
}

// Inbox events: hints coalesce within inboxHintWindow; one more follows
// inboxHintTrailer after the last change, since Visibility (which the
// inbox reads) may lag the change the bus announced. Without a bus, a
// hint also goes out every inboxHintTick.
const (
	inboxHintWindow  = 250 * time.Millisecond
	inboxHintTrailer = 1500 * time.Millisecond
	inboxHintTick    = 5 * time.Second
)

// inboxEvents: GET /eve/v1/inbox/events is a text/event-stream of "inbox"
// events (protocol.InboxHint) sent when a session the caller may access
// changed: a request may have opened or settled, so re-list the inbox.
// Fed by the workers' notification bus (and writes through this server),
// so nothing polls per request.
func (s *Server) inboxEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	caller := Caller(ctx)
	release, ok := s.streams.acquire(caller, s.opts.MaxStreamsPerPrincipal)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeError(w, http.StatusTooManyRequests, CodeTooManyStreams, "principal "+strconv.Quote(caller.ID)+" has too many streams open (--max-streams-per-principal, EVE_MAX_STREAMS_PER_PRINCIPAL): close one, or retry later")
		return
	}
	defer release()
	changed := make(chan string, 256)
	unsubscribe := s.hub.listen(func(id string) {
		select {
		case changed <- id:
		default:
			// Full (a burst of changes): say "anything may have changed".
			select {
			case changed <- "":
			default:
			}
		}
	})
	defer unsubscribe()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort
	write := func(b []byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(ids map[string]bool) bool {
		hint := protocol.InboxHint{At: time.Now().UTC()}
		if !ids[""] {
			for id := range ids {
				hint.Sessions = append(hint.Sessions, id)
			}
			slices.Sort(hint.Sessions)
		}
		b, _ := json.Marshal(hint)
		return write([]byte("event: inbox\ndata: " + string(b) + "\n\n"))
	}
	// The first hint at once: list now, then on every hint.
	if !write([]byte("retry: 2000\n\n")) || !send(map[string]bool{"": true}) {
		return
	}
	may := map[string]bool{} // sessions already judged for this caller
	allowed := func(id string) bool {
		if id == "" {
			return true
		}
		if v, ok := may[id]; ok {
			return v
		}
		owner, _, err := s.owner(ctx, id)
		ok := err == nil && s.allows(ctx, SessionAccess{SessionID: id, Action: ActionStream, Owner: owner, Caller: caller})
		if len(may) < 10000 {
			may[id] = ok
		}
		return ok
	}
	heartbeat := time.NewTicker(s.opts.HeartbeatInterval)
	defer heartbeat.Stop()
	var tick <-chan time.Time
	if s.opts.Bus == nil {
		t := time.NewTicker(inboxHintTick)
		defer t.Stop()
		tick = t.C
	}
	pending, trailing := map[string]bool{}, map[string]bool{}
	window := time.NewTimer(time.Hour)
	window.Stop()
	trailer := time.NewTimer(time.Hour)
	trailer.Stop()
	windowOpen := false
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-changed:
			if !allowed(id) {
				continue
			}
			pending[id], trailing[id] = true, true
			if !windowOpen {
				windowOpen = true
				window.Reset(inboxHintWindow)
			}
			trailer.Reset(inboxHintTrailer)
		case <-window.C:
			windowOpen = false
			if len(pending) > 0 {
				if !send(pending) {
					return
				}
				pending = map[string]bool{}
			}
		case <-trailer.C:
			if len(trailing) > 0 {
				if !send(trailing) {
					return
				}
				trailing = map[string]bool{}
			}
		case <-tick:
			if !send(map[string]bool{"": true}) {
				return
			}
		case <-heartbeat.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}
