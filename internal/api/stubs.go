package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/stubmatch"
	"github.com/eve-temporal/eve/protocol"
)

// ActionStubs is the SessionAccess.Action of reading a session's tool
// stub verification (GET /eve/v1/session/{id}/stubs).
const ActionStubs = "stubs"

// errStubsForbidden is eve's refusal of a caller without the grant.
var errStubsForbidden = errorf(http.StatusForbidden, CodeForbidden, "Tool stubbing is not permitted for this caller: give its key allowToolStubs in the keys file, or grant it with Options.AllowToolStubs (docs/evals.md).")

// mayStub reports whether the caller may use tool stubs: the keys file's
// allowToolStubs, the app's hook, or an open server that answers loopback
// only (eve dev: every local caller is the same anonymous developer).
func (s *Server) mayStub(ctx context.Context) bool {
	p := Caller(ctx)
	switch {
	case p.AllowToolStubs:
		return true
	case len(s.keys) == 0 && !s.opts.InsecureOpen:
		return true
	case s.opts.AllowToolStubs != nil:
		return s.opts.AllowToolStubs(ctx, p)
	}
	return false
}

// parseStubs reads a create's "stubs": the grant first (as eve checks it
// before anything else), then the rules' shape and matchers. nil: none.
func (s *Server) parseStubs(ctx context.Context, obj map[string]json.RawMessage) ([]protocol.ToolStub, error) {
	raw, ok := obj["stubs"]
	if !ok {
		return nil, nil
	}
	if !s.mayStub(ctx) {
		return nil, errStubsForbidden
	}
	rules, err := protocol.ParseToolStubs(raw)
	if err == nil {
		err = stubmatch.Check(rules)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "%s", err.Error())
	}
	return rules, nil
}

// stubs: GET /eve/v1/session/{id}/stubs answers eve's verification after a
// stubbed eval: the rules that settled calls, and the playback error (null:
// none). It needs the grant, then the session's read access.
func (s *Server) stubs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.mayStub(r.Context()) {
		s.fail(w, errStubsForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	// An ended session's recorded events verify as an open one's.
	if _, _, err := s.authorizeEnded(ctx, id, ActionStubs, SessionAccess{}); err != nil {
		s.fail(w, s.temporalError("verify the session's tool stubs", id, err))
		return
	}
	evs, err := s.opts.Sessions.History(ctx, id)
	if err != nil {
		s.fail(w, s.temporalError("verify the session's tool stubs", id, err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpjson.Write(w, http.StatusOK, verifyStubs(evs))
}

// verifyStubs collects the rules that settled calls from the action.result
// events (their stub mark), in the order they first did.
func verifyStubs(evs []protocol.Event) protocol.StubsVerification {
	v := protocol.StubsVerification{MatchedRuleIDs: []string{}}
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Type != protocol.ActionResult {
			continue
		}
		var d protocol.ActionResultData
		if json.Unmarshal(e.Data, &d) != nil || d.Stub == nil || seen[d.Stub.RuleID] {
			continue
		}
		seen[d.Stub.RuleID] = true
		v.MatchedRuleIDs = append(v.MatchedRuleIDs, d.Stub.RuleID)
	}
	return v
}

// exportStubs: GET /eve/v1/session/{id}/export-stubs turns a session's
// history into a test (protocol.SessionRecording): eve's stubs for every
// call that ran, the messages and answers that drove it, and its
// trajectory. It reads what the stream shows, so it needs the session's
// stream access; no stub grant (replaying the stubs needs one).
func (s *Server) exportStubs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	// An ended session (its lifetime over, say) exports what it recorded.
	if _, _, err := s.authorizeEnded(ctx, id, ActionStream, SessionAccess{Caller: Caller(ctx)}); err != nil {
		s.fail(w, s.temporalError("export the session's tool stubs", id, err))
		return
	}
	evs, err := s.opts.Sessions.History(ctx, id)
	if err != nil {
		s.fail(w, s.temporalError("export the session's tool stubs", id, err))
		return
	}
	rec, err := protocol.RecordSession(id, evs)
	if err != nil {
		s.fail(w, errorf(http.StatusUnprocessableEntity, CodeBadRequest, "%s", err.Error()))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpjson.Write(w, http.StatusOK, rec)
}
