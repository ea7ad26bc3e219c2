package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
)

// deadlineOf is a request's deadline: the call's own (changeFollowUps),
// else the tool's, else the agent's (0: none; a negative one turns those
// after it off).
func (t *turn) deadlineOf(r *openRequest, fu followUps) time.Duration {
	if fu.on && fu.requestDeadline != 0 {
		return max(fu.requestDeadline, 0)
	}
	d := r.plan.InputDeadline
	if d == 0 {
		d = t.cfg.InputDeadline
	}
	return max(d, 0)
}

// watchDeadline starts r's deadline timer, if it has one. The timer is
// Temporal's: it fires on the server whether or not a worker runs, and the
// turn settles the request in the workflow task that follows.
func (t *turn) watchDeadline(ctx workflow.Context, r *openRequest) {
	fu := t.followUpsOf(ctx, r)
	d := t.deadlineOf(r, fu)
	if d > 0 && workflow.GetVersion(ctx, changeDeadlines, workflow.DefaultVersion, 1) >= 1 {
		r.deadline = r.opened.Add(d)
		workflow.Go(ctx, func(ctx workflow.Context) {
			answered, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return r.settled })
			if answered || err != nil || r.settled {
				return
			}
			t.expire(ctx, r)
		})
	}
	t.watchFollowUps(ctx, r, fu)
}

// expire settles an unanswered request at its deadline: outcome expired
// (approval.settled too, for an approval under changeResponses), then
// input.resolved; the call reads that nobody answered (expiredOutcome).
func (t *turn) expire(ctx workflow.Context, r *openRequest) {
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeExpired, RequestID: r.req.RequestID}
	t.board.settle(r, decision{res: res})
	r.expired = true
	if t.responses && r.req.Kind == protocol.KindToolApproval {
		t.log.emit(ctx, protocol.ApprovalSettled, protocol.ApprovalSettledData{Outcome: protocol.OutcomeExpired, RequestID: r.req.RequestID, StepRef: t.step(r.stepIdx)})
	}
	t.recordResolutions(ctx, []protocol.InputResolution{res})
}

// expiredOutcome is what the model reads of a call whose person never
// answered.
func expiredOutcome(tool string, r *openRequest) work.ToolOutcome {
	what := "approval"
	if r.req.Kind == protocol.KindQuestion {
		what = "question"
	}
	msg := fmt.Sprintf("Nobody answered the %s for %s before its deadline (%s); the tool did not run. Go on without it, or ask again if it is still needed.",
		what, tool, r.deadline.Sub(r.opened))
	out, _ := json.Marshal(map[string]string{"error": msg, "code": protocol.CodeInputExpired})
	return work.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeInputExpired, Message: msg}}
}
