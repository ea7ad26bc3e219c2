package api

import (
	"context"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Escalation (approval.Policy.EscalateAfter) widens who may settle an
// approval left unanswered to a second group: principals with an
// attribute. Its members may list and answer that request (and only it)
// without other access to the session; the tool's response policy still
// judges their answers, so the turn, not this check, decides.

// escalatedTo reports whether entry e escalated to a group caller belongs
// to.
func escalatedTo(e signals.InboxEntry, caller *auth.Principal) bool {
	x := e.Escalation
	return e.EscalatedAt != nil && x != nil && x.Attribute != "" &&
		approval.Escalation{Attribute: x.Attribute, Value: x.Value}.Includes(caller)
}

// mayAnswerEscalated reports whether every response answers an approval of
// the running turn that escalated to caller's group (read from the turn's
// memo, which the turn upserts in the task that escalates).
func (s *Server) mayAnswerEscalated(ctx context.Context, active *signals.ActiveTurn, caller *auth.Principal, rs []protocol.InputResponse) bool {
	if active == nil || len(rs) == 0 || caller == nil || caller.Type == auth.TypeAnonymous {
		return false
	}
	m, err := s.opts.Sessions.TurnInbox(ctx, active.WorkflowID)
	if err != nil {
		s.log.Warn("api: read the turn's escalations", "turn", active.WorkflowID, "err", err)
		return false
	}
	for _, resp := range rs {
		ok := false
		for _, e := range m.Items {
			if e.Request.RequestID == resp.RequestID && escalatedTo(e, caller) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
