package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// CodeStatusUnavailable: the namespace lacks eve's status attributes.
const CodeStatusUnavailable = "status_unavailable"

// MaxListPageSize bounds ?limit= of the sessions and jobs lists.
const MaxListPageSize = 200

// pageLimit reads ?limit= (def without one).
func pageLimit(r *http.Request, def, maxSize int) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxSize {
		return 0, errorf(http.StatusBadRequest, CodeBadRequest, "limit: expected 1 to %d", maxSize)
	}
	return n, nil
}

func (s *Server) listError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, sessions.ErrStatusUnavailable) {
		s.fail(w, errorf(http.StatusServiceUnavailable, CodeStatusUnavailable, "%v", err))
		return
	}
	s.fail(w, s.listFailure(what, err))
}

// seesOnlyItsOwn reports whether caller can see no session but its own:
// a keyed server without the app's hook, and a caller with no keys-file
// grant (canActFor, reviews). Such a caller's filter naming another owner
// could match nothing, so it is answered at once, without a query.
func (s *Server) seesOnlyItsOwn(caller *auth.Principal) bool {
	return !s.Open() && s.opts.AuthorizeSession == nil && caller.Review == nil && len(caller.CanActFor) == 0
}

// sessionList: GET /eve/v1/sessions lists sessions newest first from
// Visibility queries; each is shown only to a caller who may stream it
// (its owner, a service acting for the owner, a reviewer, or whom the
// app's hook allows). ?owner= keeps the sessions of one principal id (read
// from each session's memo); a page holds up to limit sessions the caller
// may see (scan).
func (s *Server) sessionList(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.ListQuery{Status: v.Get("status"), Tool: v.Get("tool")}
	if err := checkFilters(v, "status", "tool", "owner"); err != nil {
		s.fail(w, err)
		return
	}
	if q.Status != "" && !slices.Contains(sessions.ListStatuses, q.Status) {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "status: expected one of %v", sessions.ListStatuses))
		return
	}
	limit, err := pageLimit(r, sessions.DefaultListPageSize, MaxListPageSize)
	if err != nil {
		s.fail(w, err)
		return
	}
	owner := v.Get("owner")
	if owner != "" && owner != caller.ID && s.seesOnlyItsOwn(caller) {
		// Narrowed to nothing: no query reads other owners' sessions.
		httpjson.Write(w, http.StatusOK, protocol.SessionPage{Items: []protocol.SessionItem{}})
		return
	}
	pos, err := s.listCursor(r, "sessions")
	if err != nil {
		s.fail(w, err)
		return
	}
	fetch := func(ctx context.Context, token []byte, size int) ([]sessions.Listed, []byte, error) {
		qq := q
		qq.Cursor, qq.PageSize = token, size
		return s.opts.Sessions.List(ctx, qq)
	}
	key := func(l sessions.Listed) string { return l.SessionID + "/" + l.RunID }
	keep := func(ctx context.Context, listed []sessions.Listed) ([]bool, error) {
		ok := make([]bool, len(listed))
		for i, l := range listed {
			ok[i] = (owner == "" || l.Initiator != nil && l.Initiator.ID == owner) &&
				s.allows(ctx, SessionAccess{SessionID: l.SessionID, Action: ActionStream, Owner: l.Initiator, Caller: caller})
		}
		return ok, nil
	}
	listed, next, err := scan(r.Context(), pos, limit, fetch, key, keep)
	if err != nil {
		s.listError(w, "list sessions", err)
		return
	}
	page := protocol.SessionPage{Items: []protocol.SessionItem{}, NextCursor: s.nextCursor(r, "sessions", next)}
	for _, l := range listed {
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
	httpjson.Write(w, http.StatusOK, page)
}

// jobList: GET /eve/v1/jobs lists the delegated actions running turns wait
// on, with each one's deadline and last heartbeat, to callers who may
// cancel their session (cancelling the session's turn cancels its jobs:
// docs/delegated.md, "Cancellation"). A page holds the jobs of up to limit
// turns the caller may see (scan); only those turns' jobs are read.
func (s *Server) jobList(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.JobsQuery{SessionID: v.Get("session"), Tool: v.Get("tool")}
	if err := checkFilters(v, "tool"); err != nil {
		s.fail(w, err)
		return
	}
	if q.SessionID != "" {
		if err := signals.CheckSessionID(q.SessionID); err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "session: %v", err))
			return
		}
	}
	limit, err := pageLimit(r, sessions.DefaultListPageSize, MaxListPageSize)
	if err != nil {
		s.fail(w, err)
		return
	}
	pos, err := s.listCursor(r, "jobs")
	if err != nil {
		s.fail(w, err)
		return
	}
	fetch := func(ctx context.Context, token []byte, size int) ([]sessions.JobTurn, []byte, error) {
		qq := q
		qq.Cursor, qq.PageSize = token, size
		return s.opts.Sessions.JobTurns(ctx, qq)
	}
	key := func(jt sessions.JobTurn) string { return jt.WorkflowID }
	keep := func(ctx context.Context, turns []sessions.JobTurn) ([]bool, error) {
		owners, err := s.ownersOf(ctx, turns)
		if err != nil {
			return nil, err
		}
		ok := make([]bool, len(turns))
		for i, jt := range turns {
			ok[i] = s.allows(ctx, SessionAccess{SessionID: jt.SessionID, Action: ActionCancel, Owner: owners[jt.SessionID], Caller: caller})
		}
		return ok, nil
	}
	turns, next, err := scan(r.Context(), pos, limit, fetch, key, keep)
	if err != nil {
		s.listError(w, "list delegated jobs", err)
		return
	}
	page := protocol.JobPage{Items: []protocol.Job{}, NextCursor: s.nextCursor(r, "jobs", next)}
	for _, jt := range turns {
		for _, j := range s.opts.Sessions.TurnJobs(r.Context(), jt, q.Tool) {
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
	}
	httpjson.Write(w, http.StatusOK, page)
}

// ownersOf returns the owners of the turns' sessions: remembered, or read
// from the sessions' memos in Visibility (one query for the lot, not a
// state query per session). A session Visibility does not list yet is
// left out; one without an initiator maps to nil.
func (s *Server) ownersOf(ctx context.Context, turns []sessions.JobTurn) (map[string]*auth.Principal, error) {
	out := map[string]*auth.Principal{}
	var ask []string
	for _, jt := range turns {
		if _, done := out[jt.SessionID]; done || slices.Contains(ask, jt.SessionID) {
			continue
		}
		if p, ok := s.owners.get(jt.SessionID); ok {
			out[jt.SessionID] = p
		} else {
			ask = append(ask, jt.SessionID)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	qctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	found, err := s.opts.Sessions.Owners(qctx, ask)
	if err != nil {
		return nil, err
	}
	for _, id := range ask {
		p := found[id] // nil: listed without an initiator, or not (yet)
		out[id] = p
		if p != nil {
			s.owners.put(id, p)
		}
	}
	return out, nil
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
		// The owner is remembered, or looked up once for all streams
		// hearing of id at once (ownerCache.join).
		owner, _, err := s.owner(ctx, id)
		if err != nil {
			return false // not remembered: a later change asks again
		}
		ok := s.allows(ctx, SessionAccess{SessionID: id, Action: ActionStream, Owner: owner, Caller: caller})
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
