package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// followUps is what a request's plan and the session's config ask for.
type followUps struct {
	on bool
	// requestDeadline is an approval's own (its policy's, per call).
	requestDeadline time.Duration
	reminders       *tools.Reminders
	escalation      *approval.Escalation
}

// followState is what happened of them.
type followState struct {
	reminded    int
	escalatedAt time.Time
	escalation  *approval.Escalation
}

// followUpsOf reads r's follow-ups; the version marker is recorded only
// for a request that has any, so older histories replay unchanged.
func (t *turn) followUpsOf(ctx workflow.Context, r *openRequest) followUps {
	p := r.plan
	fu := followUps{reminders: p.Reminders, escalation: p.Escalation}
	if fu.reminders == nil {
		fu.reminders = t.cfg.InputReminders
	}
	if r.req.Kind == protocol.KindToolApproval {
		fu.requestDeadline = p.RequestDeadline // not a question the running call asks
	}
	if r.req.Kind != protocol.KindToolApproval || !t.judged(r) {
		fu.escalation = nil
	}
	if fu.requestDeadline == 0 && fu.reminders == nil && fu.escalation == nil {
		return followUps{}
	}
	if workflow.GetVersion(ctx, changeFollowUps, workflow.DefaultVersion, 1) < 1 {
		return followUps{}
	}
	fu.on = true
	return fu
}

// watchFollowUps starts r's reminder and escalation timers (after its
// deadline's, so a request due for both expires first).
func (t *turn) watchFollowUps(ctx workflow.Context, r *openRequest, fu followUps) {
	if !fu.on {
		return
	}
	if times := fu.reminders.Times(r.opened, r.deadline); len(times) > 0 {
		workflow.Go(ctx, func(ctx workflow.Context) { t.remind(ctx, r, times) })
	}
	if e := fu.escalation; e != nil && (r.deadline.IsZero() || r.opened.Add(e.After).Before(r.deadline)) {
		workflow.Go(ctx, func(ctx workflow.Context) {
			answered, err := workflow.AwaitWithTimeout(ctx, e.After, func() bool { return r.settled })
			if answered || err != nil || r.settled {
				return
			}
			t.escalate(ctx, r, e)
		})
	}
}

// remind sends r's reminders at their times while it stays open. After a
// worker was down past several, it sends one for all of them.
func (t *turn) remind(ctx workflow.Context, r *openRequest, times []time.Time) {
	for i := 0; i < len(times); i++ {
		if wait := times[i].Sub(workflow.Now(ctx)); wait > 0 {
			answered, err := workflow.AwaitWithTimeout(ctx, wait, func() bool { return r.settled })
			if answered || err != nil {
				return
			}
		}
		now := workflow.Now(ctx)
		if r.settled || !now.Before(r.deadline) {
			return // the deadline is due: the request expires instead
		}
		for i+1 < len(times) && !times[i+1].After(now) {
			i++
		}
		r.follow.reminded++
		n := r.follow.reminded
		t.log.emit(ctx, protocol.InputReminder, protocol.InputReminderData{RequestID: r.req.RequestID, At: times[i], Deadline: r.deadline, Number: n, StepRef: t.step(r.stepIdx)})
		t.notify(ctx, r, fmt.Sprint(n), func(rm *tools.Reminder) { rm.At, rm.Number = times[i], n })
	}
}

// escalate widens who may settle r: the inbox lists it for the second
// group (publishInbox follows openKey), and its response policy sees it as
// escalated from now on.
func (t *turn) escalate(ctx workflow.Context, r *openRequest, e *approval.Escalation) {
	now := workflow.Now(ctx)
	r.follow.escalatedAt, r.follow.escalation = now, e
	t.log.emit(ctx, protocol.ApprovalEscalated, protocol.ApprovalEscalatedData{RequestID: r.req.RequestID, At: now, Group: e.GroupLabel(), StepRef: t.step(r.stepIdx)})
	t.notify(ctx, r, "escalation", func(rm *tools.Reminder) {
		rm.At, rm.Escalation, rm.EscalationAttribute, rm.EscalationValue = now, e.GroupLabel(), e.Attribute, e.Value
	})
}

// notify runs the worker's hook in an activity, if the session has one: a
// retried workflow task never schedules it twice, and a failed hook is
// retried (RemindAttempts) without touching the turn.
func (t *turn) notify(ctx workflow.Context, r *openRequest, key string, set func(*tools.Reminder)) {
	if !t.cfg.ReminderHook {
		return
	}
	rm := tools.Reminder{SessionID: t.in.SessionID, TurnID: t.in.TurnID, RequestID: r.req.RequestID, Kind: r.req.Kind,
		ToolName: r.req.Action.ToolName, Prompt: r.req.Prompt, Requester: t.requester(), Owner: t.in.Auth.Initiator,
		OpenedAt: r.opened, Deadline: r.deadline,
		IdempotencyKey: t.in.SessionID + "/" + t.in.TurnID + "/" + r.req.RequestID + "/" + key}
	set(&rm)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "remind_" + r.req.RequestID + "_" + key,
		StartToCloseTimeout: work.RemindTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: work.RemindAttempts},
	})
	if err := workflow.ExecuteActivity(actx, work.RemindName, rm).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("reminder hook failed", "requestId", r.req.RequestID, "notice", key, "error", err.Error())
	}
}

// escalatedRequest tells a response policy whether r escalated.
func (r *openRequest) escalatedRequest(req *approval.Request) {
	if at := r.follow.escalatedAt; !at.IsZero() {
		req.EscalatedAt, req.Escalation = &at, r.follow.escalation.GroupLabel()
	}
}

// inboxEscalation is what the inbox publishes of r's escalation.
func (r *openRequest) inboxEscalation(e *signals.InboxEntry) {
	if at := r.follow.escalatedAt; !at.IsZero() {
		x := r.follow.escalation
		e.EscalatedAt = &at
		e.Escalation = &signals.InboxEscalation{Group: x.GroupLabel(), Attribute: x.Attribute, Value: x.Value}
	}
}

// escalatedAtStamp is when r escalated, for the decision record (nil: it
// did not).
func (r *openRequest) escalatedAtStamp() *time.Time {
	if r.follow.escalatedAt.IsZero() {
		return nil
	}
	at := stamp(r.follow.escalatedAt)
	return &at
}
