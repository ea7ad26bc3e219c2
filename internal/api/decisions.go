package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// ActionDecisions is the SessionAccess.Action of reading a session's
// decision record.
const ActionDecisions = "decisions"

// decisionFilter narrows an export; every field is optional.
type decisionFilter struct {
	since, until time.Time
	tool         string
	principal    string
	outcome      string
}

func (f decisionFilter) match(d protocol.Decision) bool {
	switch {
	case !f.since.IsZero() && d.DecidedAt.Before(f.since), !f.until.IsZero() && d.DecidedAt.After(f.until):
		return false
	case f.tool != "" && d.ToolName != f.tool, f.outcome != "" && d.Outcome != f.outcome:
		return false
	case f.principal != "":
		return d.Requester != nil && d.Requester.ID == f.principal || d.Decider != nil && d.Decider.ID == f.principal
	}
	return true
}

// decisions: GET /eve/v1/decisions exports the decision record as JSON
// lines: of one session (?session=), or of every session the caller may
// read with decisions made since ?since= (and until ?until=). Principals of
// type operator read every session's; others those they may act on
// (ActionDecisions: the owner, a service acting for it, or the app's
// AuthorizeSession hook).
func (s *Server) decisions(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	f := decisionFilter{tool: v.Get("tool"), principal: v.Get("principal"), outcome: v.Get("outcome")}
	if err := checkFilters(v, "tool", "principal", "outcome"); err != nil {
		s.fail(w, err)
		return
	}
	if err := queryTimes(v, map[string]*time.Time{"since": &f.since, "until": &f.until}); err != nil {
		s.fail(w, err)
		return
	}
	sid := v.Get("session")
	if sid == "" && f.since.IsZero() {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "give ?session=<id> for one session's decisions, or ?since=<RFC 3339 time> (and optionally ?until=) for every session's"))
		return
	}
	if !f.until.IsZero() && f.until.Before(f.since) {
		s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "until (%s) is before since (%s)", f.until.Format(time.RFC3339), f.since.Format(time.RFC3339)))
		return
	}
	ctx := r.Context()
	caller := Caller(ctx)
	if sid != "" {
		if err := signals.CheckSessionID(sid); err != nil {
			s.fail(w, errorf(http.StatusBadRequest, CodeInvalidID, "session: %v", err))
			return
		}
		a, ok, err := s.mayReadDecisions(ctx, caller, sid)
		if err == nil && !ok {
			err = s.forbidden(a)
		}
		if err != nil {
			s.fail(w, s.temporalError("read the decisions", sid, err))
			return
		}
		ds, err := s.opts.Sessions.Decisions(ctx, sid)
		if err != nil {
			s.fail(w, s.temporalError("read the decisions", sid, err))
			return
		}
		out := s.decisionWriter(w)
		for _, d := range ds {
			if f.match(d) {
				out(d)
			}
		}
		return
	}
	// Across sessions: a Visibility page of sessions at a time, each read
	// once (a session may list once per run), those the caller may not
	// read skipped. Lines stream as they are found.
	var out func(any)
	var unreadable []string
	seen := map[string]bool{}
	var cursor []byte
	for {
		qctx, cancel := context.WithTimeout(ctx, ListTimeout)
		listed, next, err := s.opts.Sessions.DecisionSessions(qctx, f.since, f.until, cursor)
		cancel()
		if err != nil {
			if out == nil {
				s.fail(w, s.listFailure("list sessions for the decisions", err))
			} else {
				s.log.Warn("api: decisions export cut short", "err", err)
			}
			return
		}
		for _, ls := range listed {
			id := ls.ID
			if seen[id] {
				continue
			}
			seen[id] = true
			// The owner from the session's memo: deciding on sessions the
			// caller may not read costs no query of theirs.
			if !s.mayReadDecisionsOf(ctx, caller, id, ls.Initiator) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, s.decisionsTimeout())
			ds, err := s.opts.Sessions.Decisions(rctx, id)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("api: decisions of a session unreadable; the export says so in its last line", "session", id, "err", err)
				unreadable = append(unreadable, id)
				continue
			}
			for _, d := range ds {
				if f.match(d) {
					if out == nil {
						out = s.decisionWriter(w)
					}
					out(d)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		cursor = next
	}
	if out == nil {
		out = s.decisionWriter(w) // headers; no lines unless incomplete
	}
	if len(unreadable) > 0 {
		out(protocol.DecisionsIncomplete{Incomplete: true, Sessions: unreadable,
			Error: fmt.Sprintf("%d sessions did not answer within %s (is a worker serving their task queue?); their decisions are missing: export them again later, or one session at a time", len(unreadable), s.decisionsTimeout())})
	}
}

// DecisionsSessionTimeout bounds reading one session's record in an
// export across sessions (a query its worker answers).
const DecisionsSessionTimeout = 15 * time.Second

func (s *Server) decisionsTimeout() time.Duration {
	if d := s.opts.DecisionsSessionTimeout; d > 0 {
		return d
	}
	return DecisionsSessionTimeout
}

// mayReadDecisions: an operator reads any session's record; anyone else
// needs ActionDecisions on the session (its owner, a service acting for
// it, or the app's hook), closed sessions included. It logs nothing: an
// export across sessions skips thousands it may not read.
func (s *Server) mayReadDecisions(ctx context.Context, caller *auth.Principal, id string) (SessionAccess, bool, error) {
	a := SessionAccess{SessionID: id, Action: ActionDecisions, Caller: caller}
	if caller != nil && caller.Type == auth.TypeOperator {
		return a, true, nil
	}
	owner, _, err := s.owner(ctx, id)
	var ended *sessions.EndedError
	if errors.As(err, &ended) {
		if owner == nil {
			owner = ended.Initiator
		}
		err = nil
	}
	if err != nil {
		return a, false, err
	}
	a.Owner = owner
	return a, s.allows(ctx, a), nil
}

// mayReadDecisionsOf is mayReadDecisions for a session whose owner is
// known.
func (s *Server) mayReadDecisionsOf(ctx context.Context, caller *auth.Principal, id string, owner *auth.Principal) bool {
	if caller != nil && caller.Type == auth.TypeOperator {
		return true
	}
	return s.allows(ctx, SessionAccess{SessionID: id, Action: ActionDecisions, Caller: caller, Owner: owner})
}

// decisionWriter starts a JSON-lines answer and returns its line writer.
func (s *Server) decisionWriter(w http.ResponseWriter) func(any) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	return func(line any) {
		_ = enc.Encode(line)
		if fl != nil {
			fl.Flush()
		}
	}
}
