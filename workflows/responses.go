package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Who may settle an approval, as in eve 0.80.1 (docs/tools/human-in-the-loop.md,
// "Authorizing approval responses"). Without a response policy only the
// requester (the caller of the turn) may approve or cancel a call: the
// answer settles directly, approval.settled then input.resolved. With one,
// the response is first recorded as approval.candidate "pending", the
// policy runs in a local activity, and the candidate ends rejected, failed,
// timed-out or stale (the request stays open, turn.waiting{on:"input"}
// again), or the request settles.

// requester is who asked for the turn's calls: nil for an anonymous
// caller, whom nobody matches (then anyone may settle, as in eve).
func (t *turn) requester() *auth.Principal {
	c := t.in.Auth.Current
	if c == nil || c.Type == auth.TypeAnonymous {
		return nil
	}
	return c
}

// responder is who sent an answer: a respond request without one comes
// from a trusted in-process client (no API server named a caller), and
// counts as the requester.
func (t *turn) responder(p *auth.Principal) *auth.Principal {
	if p == nil {
		return t.requester()
	}
	return p
}

// judged reports whether a response to r goes through a response policy.
func (t *turn) judged(r *openRequest) bool {
	return t.responses && r.req.Kind == protocol.KindToolApproval && r.plan.ResponsePolicy
}

// refusedResponder reports why responder may not settle r by default
// (tools without a response policy); "" when it may.
func (t *turn) refusedResponder(r *openRequest, responder *auth.Principal) string {
	if !t.responses || r.req.Kind != protocol.KindToolApproval || r.plan.ResponsePolicy {
		return ""
	}
	if approval.MayRespond(t.requester(), responder) {
		return ""
	}
	return approval.ReasonRequesterOnly
}

// checkResponders rejects a batch (the respond Update's validator) when it
// answers an approval its responder may not settle by default.
func (t *turn) checkResponders(req signals.RespondRequest) error {
	responder := t.responder(req.Responder)
	for i, resp := range req.Responses {
		r := t.board.byID[resp.RequestID]
		if r == nil || r.settled {
			continue
		}
		if why := t.refusedResponder(r, responder); why != "" {
			return fmt.Errorf("response %d (requestId %q): %s Tool %s sets no response policy; give its approval policy one (approval.Policy.WithResponse) to let others decide",
				i+1, resp.RequestID, why, r.plan.Call.Name)
		}
	}
	return nil
}

// candidate is one response waiting for its tool's response policy.
type candidate struct {
	id        string
	r         *openRequest
	d         decision
	resp      protocol.InputResponse
	responder *auth.Principal
	// refused is set for a response refused without running a policy.
	refused string
}

func principalID(p *auth.Principal) string {
	if p == nil {
		return auth.TypeAnonymous
	}
	return p.ID
}

func (t *turn) newCandidate(r *openRequest, d decision, resp protocol.InputResponse, responder *auth.Principal) *candidate {
	r.candidates++
	return &candidate{id: fmt.Sprintf("cnd_%s.%d", r.req.RequestID, r.candidates), r: r, d: d, resp: resp, responder: responder}
}

func (t *turn) emitCandidate(ctx workflow.Context, c *candidate, outcome, reason string) {
	t.log.emit(ctx, protocol.ApprovalCandidate, protocol.ApprovalCandidateData{
		CandidateID: c.id, Outcome: outcome, RequestID: c.r.req.RequestID,
		ResponderPrincipalID: principalID(c.responder), Reason: reason, StepRef: t.step(c.r.stepIdx),
	})
	if outcome != protocol.CandidatePending {
		c.r.refused = append(c.r.refused, protocol.DecisionCandidate{
			CandidateID: c.id, Principal: principalRef(c.responder), Outcome: outcome, Reason: reason, At: stamp(workflow.Now(ctx)),
		})
	}
}

// settleBy settles r with a person's decision: the approver is recorded
// (the tool's context carries it) and, in this model, approval.settled
// precedes input.resolved.
func (t *turn) settleBy(ctx workflow.Context, r *openRequest, d decision, responder *auth.Principal) {
	t.board.settle(r, d)
	r.decider = responder
	if !t.responses || r.req.Kind != protocol.KindToolApproval {
		return
	}
	outcome := protocol.OutcomeCancelled
	if d.res.Outcome == protocol.OutcomeApproved {
		outcome = protocol.OutcomeApproved
		r.approver = responder
	}
	t.log.emit(ctx, protocol.ApprovalSettled, protocol.ApprovalSettledData{
		Outcome: outcome, RequestID: r.req.RequestID, ResponderPrincipalID: principalID(responder), StepRef: t.step(r.stepIdx),
	})
}

// judge puts candidates to their response policies: each is recorded as
// pending first, then the policies run concurrently, then each candidate
// settles its request or ends without settling it. It returns the
// resolutions it recorded.
func (t *turn) judge(ctx workflow.Context, cs []*candidate) []protocol.InputResolution {
	if len(cs) == 0 {
		return nil
	}
	futures := make([]workflow.Future, len(cs))
	for i, c := range cs {
		t.emitCandidate(ctx, c, protocol.CandidatePending, "")
		if c.refused == "" {
			futures[i] = t.evaluateCandidate(ctx, c)
		}
	}
	var settled []protocol.InputResolution
	rejected := false
	for i, c := range cs {
		outcome, reason := protocol.CandidateRejected, c.refused
		if f := futures[i]; f != nil {
			var v approval.Verdict
			err := f.Get(ctx, &v)
			switch {
			case c.r.settled:
				outcome, reason = protocol.CandidateStale, "The request was settled before this response was verified."
			case err != nil:
				outcome, reason = candidateFailure(err)
			case v.Status == approval.Allowed:
				t.settleBy(ctx, c.r, c.d, c.responder)
				t.recordResolutions(ctx, []protocol.InputResolution{c.d.res})
				settled = append(settled, c.d.res)
				continue
			default:
				reason = v.Reason
				if reason == "" {
					reason = "The approval policy rejected this response."
				}
			}
		}
		if c.r.settled && outcome == protocol.CandidateRejected {
			outcome = protocol.CandidateStale
		}
		if c.d.edit != nil {
			c.r.editRefusal = reason
		}
		t.emitCandidate(ctx, c, outcome, reason)
		rejected = true
	}
	if rejected && len(t.board.open()) > 0 && ctx.Err() == nil {
		// The request stays answerable: the turn says so again.
		t.waitForInput(ctx)
	}
	return settled
}

// candidateFailure is how a policy that did not decide ends its candidate.
func candidateFailure(err error) (string, string) {
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) || (errors.As(err, &appErr) && appErr.Type() == work.ErrTypeResponseTimeout) {
		return protocol.CandidateTimedOut, work.ReasonResponseTimedOut
	}
	return protocol.CandidateFailed, work.ReasonResponseFailed
}

// evaluateResponse runs a tool's response policy in a local activity, once:
// a policy that fails asks the person to try again rather than retry in
// their name.
func (t *turn) evaluateResponse(ctx workflow.Context, c *candidate) workflow.Future {
	decision := approval.DecisionApprove
	if c.d.res.Outcome != protocol.OutcomeApproved {
		decision = approval.DecisionCancel
	}
	p := c.r.plan
	in := work.ResponseInput{Context: approval.ResponseContext{
		Request: approval.Request{RequestID: c.r.req.RequestID, CallID: p.Call.ID, ToolName: p.Call.Name,
			ToolInput: p.Call.Input, Principal: t.requester()},
		Response: approval.Response{Decision: decision, Note: c.d.reason, Principal: c.responder},
		Session:  t.session(),
		TurnID:   t.in.TurnID,
	}, Dynamic: t.dynamicFor(p.Call.Name)}
	c.editedRequest(&in.Context.Request)
	c.r.escalatedRequest(&in.Context.Request)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: work.ResponsePolicyTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteLocalActivity(lctx, work.EvaluateResponseName, in)
}
