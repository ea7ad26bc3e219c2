package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/tools"
)

// planFollowUps records in a call's plan what follows its approval request:
// the policy's per-call deadline, the tool's reminders and the policy's
// escalation.
func planFollowUps(p *CallPlan, t *tools.Tool, pc approval.PromptContext) {
	if d := t.Approval.Deadline(pc); d != 0 {
		if d > 0 {
			d = min(max(d, tools.MinInputDeadline), tools.MaxInputDeadline)
		}
		p.RequestDeadline = d
	}
	p.Reminders = t.InputReminders
	if e, ok := t.Approval.Escalation(); ok {
		p.Escalation = &e
	}
}

// RemindName is the activity that runs the worker's reminder hook.
const RemindName = "eve.Remind"

// ReminderHook is the worker's hook: it notifies people (email, chat, a
// webhook). It runs in an activity, once per notice; a failed attempt is
// retried (RemindRetry), so it must tolerate a repeat of the same
// IdempotencyKey.
type ReminderHook func(ctx context.Context, r tools.Reminder) error

// RemindTimeout bounds one attempt of the hook; RemindAttempts the
// attempts of one notice.
const (
	RemindTimeout  = 30 * time.Second
	RemindAttempts = 5
)

// Remind runs the hook; without one (a worker restarted without it) it
// logs and does nothing.
func (a *Activities) Remind(ctx context.Context, r tools.Reminder) error {
	if a.OnReminder == nil {
		a.logger().Warn("a reminder is due but this worker has no reminder hook (agent.Agent.OnReminder)", "session", r.SessionID, "request", r.RequestID)
		return nil
	}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("the reminder hook panicked: %v", p), ErrTypeReminder, nil)
			}
		}()
		return a.OnReminder(ctx, r)
	}()
	if err != nil {
		a.logger().Error("reminder hook failed", "session", r.SessionID, "request", r.RequestID, "number", r.Number, "err", err)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return err
		}
		return temporal.NewApplicationErrorWithCause("the reminder hook failed: "+err.Error(), ErrTypeReminder, err)
	}
	return nil
}

// ErrTypeReminder is the error type of a failed reminder hook.
const ErrTypeReminder = "ReminderError"
