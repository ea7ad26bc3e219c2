package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/tools"
)

// Remind runs the hook; without one (a worker restarted without it) it
// logs and does nothing.
func (a *activitySet) Remind(ctx context.Context, r tools.Reminder) error {
	if a.OnReminder == nil {
		a.logger().Warn("a reminder is due but this worker has no reminder hook (agent.Agent.OnReminder)", "session", r.SessionID, "request", r.RequestID)
		return nil
	}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("the reminder hook panicked: %v", p), work.ErrTypeReminder, nil)
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
		return temporal.NewApplicationErrorWithCause("the reminder hook failed: "+err.Error(), work.ErrTypeReminder, err)
	}
	return nil
}
