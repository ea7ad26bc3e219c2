package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// recordDecisions records the settlement of each resolution's request.
// Events are workflow state, so a retried task records them again in the
// same places, with the same ids.
func (t *turn) recordDecisions(ctx workflow.Context, resolutions []protocol.InputResolution) {
	if len(resolutions) == 0 || workflow.GetVersion(ctx, changeDecisions, workflow.DefaultVersion, 1) < 1 {
		return
	}
	for _, res := range resolutions {
		r := t.board.byID[res.RequestID]
		if r == nil || !r.settled || res.Outcome == protocol.OutcomeInvalid {
			continue // an invalid answer settles nothing: the request waits on
		}
		t.log.emit(ctx, protocol.DecisionRecorded, t.decisionOf(ctx, r, res))
	}
}

func (t *turn) decisionOf(ctx workflow.Context, r *openRequest, res protocol.InputResolution) protocol.Decision {
	d := protocol.Decision{
		SessionID: t.in.SessionID,
		TurnID:    t.in.TurnID,
		RequestID: r.req.RequestID,
		Kind:      r.req.Kind,
		ToolName:  r.req.Action.ToolName,
		CallID:    r.req.Action.CallID,
		Prompt:    r.req.Prompt,
		Input:     r.req.Action.Input,
		Requester: principalRef(t.requester()),
		AskedAt:   stamp(r.opened),
		DecidedAt: stamp(workflow.Now(ctx)),
		Outcome:   res.Outcome,
		Note:      r.reason,
		Withdrawn: r.withdrawn,
	}
	if !r.deadline.IsZero() {
		dl := stamp(r.deadline)
		d.Deadline = &dl
	}
	if res.Response != nil {
		d.OptionID, d.Text = res.Response.OptionID, res.Response.Text
		if d.Outcome == protocol.OutcomeDenied {
			d.Text = "" // a denial's text is its note
		}
	}
	if !r.expired && !r.withdrawn && res.Response != nil {
		d.Decider = principalRef(t.responder(r.decider))
	}
	if r.edit != nil {
		d.EditedInput = r.edit.input // approved with edits (changeEdits)
	}
	d.Candidates = append(d.Candidates, r.refused...)
	d.EscalatedAt = r.escalatedAtStamp()
	return d
}

// principalRef is p in the decision record; nil for an anonymous caller.
func principalRef(p *auth.Principal) *protocol.PrincipalRef {
	if p == nil {
		return nil
	}
	return &protocol.PrincipalRef{ID: p.ID, Type: p.Type}
}

// stamp is a time of the record at the precision of an event's meta.at,
// so a decision's times match the events it sums up.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
