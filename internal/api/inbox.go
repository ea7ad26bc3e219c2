package api

import (
	"bytes"
	"context"
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
// across sessions, from Visibility queries over parked turns. A request is
// shown only to a caller who may answer its session (ActionRespond, with
// the request, as the respond route decides) and, for an approval without
// a response policy, who is its requester (the default rule); an approval
// a response policy decides is shown to everyone who may answer the
// session, and its policy judges the answer. A page holds the requests of
// up to limit turns the caller may see (scan).
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	caller := Caller(r.Context())
	v := r.URL.Query()
	q := sessions.InboxQuery{Tool: v.Get("tool"), SessionID: v.Get("session"), Requester: v.Get("requester"), Kind: v.Get("kind")}
	if err := checkFilters(v, "tool", "requester", "kind", "tenant", "root"); err != nil {
		s.fail(w, err)
		return
	}
	if q.Kind != "" && !slices.Contains(inboxKinds, q.Kind) {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "kind: expected one of %v", inboxKinds))
		return
	}
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
	limit := sessions.DefaultInboxPageSize
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxInboxPageSize {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "limit: expected 1 to %d (the turns one page holds)", MaxInboxPageSize))
			return
		}
		limit = n
	}
	if q.SessionID != "" {
		if err := signals.CheckSessionID(q.SessionID); err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "session: %v", err))
			return
		}
	}
	pos, err := s.listCursor(r, "inbox")
	if err != nil {
		s.fail(w, err)
		return
	}
	// The items of each turn the caller may see, by its key.
	items := map[string][]protocol.InboxItem{}
	key := func(m signals.InboxMemo) string { return m.SessionID + "/" + m.TurnID }
	fetch := func(ctx context.Context, token []byte, size int) ([]signals.InboxMemo, []byte, error) {
		qq := q
		qq.Cursor, qq.PageSize = token, size
		return s.opts.Sessions.Inbox(ctx, qq)
	}
	keep := func(ctx context.Context, memos []signals.InboxMemo) ([]bool, error) {
		ok := make([]bool, len(memos))
		for i, m := range memos {
			its := s.inboxItems(r, caller, q, f, m)
			items[key(m)], ok[i] = its, len(its) > 0
		}
		return ok, nil
	}
	memos, next, err := scan(r.Context(), pos, limit, fetch, key, keep)
	if err != nil {
		if errors.Is(err, sessions.ErrInboxUnavailable) {
			s.fail(w, errorf(http.StatusServiceUnavailable, CodeInboxUnavailable, "%v", err))
			return
		}
		s.fail(w, s.listFailure("list the inbox", err))
		return
	}
	page := protocol.InboxPage{Items: []protocol.InboxItem{}, NextCursor: s.nextCursor(r, "inbox", next)}
	for _, m := range memos {
		page.Items = append(page.Items, items[key(m)]...)
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
	httpjson.Write(w, http.StatusOK, page)
}

// inboxKinds are the request kinds ?kind= takes.
var inboxKinds = []string{protocol.KindToolApproval, protocol.KindQuestion, protocol.KindSessionLimit}

// inboxItems are the requests of a parked turn that the page shows the
// caller: those the filters keep and the caller may answer.
func (s *Server) inboxItems(r *http.Request, caller *auth.Principal, q sessions.InboxQuery, f inboxFilter, m signals.InboxMemo) []protocol.InboxItem {
	if !f.turn(m) {
		return nil
	}
	var out []protocol.InboxItem
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
		out = append(out, inboxItem(m, e))
	}
	return out
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
	if o := m.Origin; o != nil {
		it.RootSessionID, it.Path, it.Depth = o.RootSessionID, o.Path, o.Depth()
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
