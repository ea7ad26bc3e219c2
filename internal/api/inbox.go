package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// CodeInboxUnavailable: the namespace lacks the inbox's search attributes.
const CodeInboxUnavailable = "inbox_unavailable"

// MaxInboxPageSize bounds ?limit= (the turns one page reads).
const MaxInboxPageSize = 1000

// inbox: GET /eve/v1/inbox lists the open requests the caller may settle,
// across sessions, from one Visibility query per page. A request is shown
// only to a caller who may answer its session (ActionRespond, with the
// request, as the respond route decides) and, for an approval without a
// response policy, who is its requester (the default rule); an approval a
// response policy decides is shown to everyone who may answer the session,
// and its policy judges the answer.
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.InboxQuery{Tool: v.Get("tool"), SessionID: v.Get("session"), Requester: v.Get("requester"), Kind: v.Get("kind")}
	if err := queryTimes(v, map[string]*time.Time{"openedBefore": &q.OpenedBefore, "openedAfter": &q.OpenedAfter}); err != nil {
		s.fail(w, err)
		return
	}
	f, err := inboxFilterOf(v)
	if err != nil {
		s.fail(w, err)
		return
	}
	if raw := v.Get("minAge"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "minAge: expected a duration such as 15m"))
			return
		}
		if b := time.Now().Add(-d); q.OpenedBefore.IsZero() || b.Before(q.OpenedBefore) {
			q.OpenedBefore = b
		}
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxInboxPageSize {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "limit: expected 1 to %d (the turns one page reads)", MaxInboxPageSize))
			return
		}
		q.PageSize = n
	}
	if raw := v.Get("cursor"); raw != "" {
		c, err := base64.RawURLEncoding.DecodeString(raw)
		if err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "cursor: pass the nextCursor of the previous page unchanged"))
			return
		}
		q.Cursor = c
	}
	if q.SessionID != "" {
		if err := signals.CheckSessionID(q.SessionID); err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "session: %v", err))
			return
		}
	}
	ctx := r.Context()
	memos, next, err := s.opts.Sessions.Inbox(ctx, q)
	if err != nil {
		if errors.Is(err, sessions.ErrInboxUnavailable) {
			s.fail(w, errorf(http.StatusServiceUnavailable, CodeInboxUnavailable, "%v", err))
			return
		}
		s.fail(w, s.temporalError("list the inbox", "", err))
		return
	}
	page := protocol.InboxPage{Items: []protocol.InboxItem{}}
	for _, m := range memos {
		if !f.turn(m) {
			continue
		}
		for _, e := range m.Items {
			if !f.entry(e) {
				continue
			}
			if q.Kind != "" && e.Request.Kind != q.Kind || q.Tool != "" && e.Request.Action.ToolName != q.Tool {
				continue // the turn matched; this request of it does not
			}
			if !s.mayAnswer(r, caller, m, e) {
				continue
			}
			page.Items = append(page.Items, inboxItem(m, e))
		}
	}
	// Within the page: the nearest deadline first (requests without one
	// after), then the oldest.
	slices.SortStableFunc(page.Items, func(a, b protocol.InboxItem) int {
		switch {
		case a.Deadline != nil && b.Deadline != nil:
			if c := a.Deadline.Compare(*b.Deadline); c != 0 {
				return c
			}
		case a.Deadline != nil:
			return -1
		case b.Deadline != nil:
			return 1
		}
		return a.OpenedAt.Compare(b.OpenedAt)
	})
	if len(next) > 0 {
		page.NextCursor = base64.RawURLEncoding.EncodeToString(next)
	}
	httpjson.Write(w, http.StatusOK, page)
}

// mayAnswer applies the rules that settle a request, before anything is
// sent: the default response rule, then session access.
func (s *Server) mayAnswer(r *http.Request, caller *auth.Principal, m signals.InboxMemo, e signals.InboxEntry) bool {
	if escalatedTo(e, caller) {
		return true // the second group of an escalated approval
	}
	if e.Request.Kind == protocol.KindToolApproval && !e.Judged && !approval.MayRespond(m.Requester, caller) {
		return false
	}
	return s.allows(r.Context(), SessionAccess{SessionID: m.SessionID, Action: ActionRespond, Owner: m.Owner, Caller: caller,
		Requests: []protocol.InputRequest{e.Request}})
}

func inboxItem(m signals.InboxMemo, e signals.InboxEntry) protocol.InboxItem {
	it := protocol.InboxItem{ID: protocol.InboxID(m.SessionID, e.Request.RequestID), SessionID: m.SessionID, TurnID: m.TurnID,
		Kind: e.Request.Kind, ToolName: e.Request.Action.ToolName, Request: e.Request, OpenedAt: e.OpenedAt, Deadline: e.Deadline,
		Editable: e.Editable, InputSchema: e.InputSchema, EscalatedAt: e.EscalatedAt}
	if e.Escalation != nil {
		it.EscalatedTo = e.Escalation.Group
	}
	if m.Requester != nil {
		it.RequesterPrincipalID, it.RequesterPrincipalType = m.Requester.ID, m.Requester.Type
	}
	return it
}

// inboxAnswer: POST /eve/v1/inbox/{id} settles one request through the
// session's respond path (the same authorization, validation and errors
// as inputResponses), without the caller knowing the session.
func (s *Server) inboxAnswer(w http.ResponseWriter, r *http.Request) {
	sid, rid, ok := protocol.SplitInboxID(r.PathValue("id"))
	if !ok || signals.CheckSessionID(sid) != nil {
		s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "the inbox id in the URL is malformed: pass an item's id from GET /eve/v1/inbox (<sessionId>:<requestId>)"))
		return
	}
	obj, err := s.readObject(w, r, false)
	if err != nil {
		s.fail(w, err)
		return
	}
	raw, _ := json.Marshal(obj)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var a protocol.InboxAnswer
	if err := dec.Decode(&a); err != nil {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "expected {optionId?, text?, input?}: %v", err))
		return
	}
	s.respond(w, r, sid, []protocol.InputResponse{{RequestID: rid, OptionID: a.OptionID, Text: a.Text, Input: inputOrAbsent(a.Input)}})
}
