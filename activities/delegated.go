package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Actions configure the completion URLs of delegated tools (agent.Actions
// is this type).
type Actions struct {
	// Secret signs completion URLs: at least 16 bytes, the same
	// EVE_ACTION_SECRET the API servers verify them with.
	Secret []byte
	// PublicURL roots the URLs: the API server as external jobs reach it
	// (EVE_PUBLIC_URL, e.g. https://eve.example.com).
	PublicURL string
	// Grace keeps a URL valid after its action's deadline, so a late job
	// is told 410 rather than 401 (default 1 h).
	Grace time.Duration
}

// actionsConfig hands out completion URLs of delegated tools.
type actionsConfig struct {
	signer *capability.Signer
	// baseURL is the API server as jobs reach it, e.g. http://127.0.0.1:4111.
	baseURL string
	grace   time.Duration
}

// newActionsConfig checks a's secret and URL.
func newActionsConfig(a Actions) (*actionsConfig, error) {
	if len(a.Secret) == 0 {
		return nil, errors.New("EVE_ACTION_SECRET is not set: delegated tools cannot hand out completion URLs")
	}
	if a.PublicURL == "" {
		return nil, errors.New("EVE_PUBLIC_URL is empty: jobs need the API server's URL")
	}
	s, err := capability.NewSigner(a.Secret)
	if err != nil {
		return nil, err
	}
	return &actionsConfig{signer: s, baseURL: a.PublicURL, grace: a.Grace}, nil
}

// defaultGrace is how long a completion URL outlives its action's deadline.
const defaultGrace = time.Hour

// url returns the completion URL of a token.
func (c *actionsConfig) url(token string) string { return signals.CompletionURL(c.baseURL, token) }

func (a *activitySet) delegate(ctx context.Context, tctx *tools.Context, t *tools.Tool, in work.ExecuteToolInput) (work.ToolOutcome, error) {
	if a.actions == nil || a.actions.signer == nil {
		return work.ToolOutcome{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s is delegated, but this worker has no action secret: set EVE_ACTION_SECRET (shared with the API server) and EVE_PUBLIC_URL", t.Name),
			work.ErrTypeBadConfig, nil)
	}
	info := activity.GetInfo(ctx)
	grace := a.actions.grace
	if grace <= 0 {
		grace = defaultGrace
	}
	token := a.actions.signer.Sign(capability.Claims{
		Namespace: info.WorkflowNamespace, SessionID: in.Session.ID,
		WorkflowID: info.WorkflowExecution.ID, ActivityID: info.ActivityID,
		ActionID: in.ActionID, Tool: t.Name, Expires: in.Deadline.Add(grace).Unix(),
	})
	action := tools.Action{
		ID:         in.ActionID,
		Completion: tools.Completion{ID: in.ActionID, URL: a.actions.url(token)},
		TaskToken:  info.TaskToken,
		Deadline:   in.Deadline,
	}
	pending, err := t.Delegated.Delegate(tctx, in.Input, action)
	if err != nil {
		msg := fmt.Sprintf("tool %s could not start its job: %v", t.Name, err)
		if tools.IsNonRetryable(err) {
			return work.ToolOutcome{}, temporal.NewNonRetryableApplicationError(msg, work.ErrTypeTool, err)
		}
		return work.ToolOutcome{}, temporal.NewApplicationErrorWithCause(msg, work.ErrTypeTool, err)
	}
	if pending.ActionID() != in.ActionID {
		return work.ToolOutcome{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s must return action.Pending() of the action it was given", t.Name), work.ErrTypeTool, nil)
	}
	return work.ToolOutcome{}, activity.ErrResultPending
}
