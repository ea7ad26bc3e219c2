package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// ActionsConfig is what a worker needs to hand out completion URLs of
// delegated tools. Build it with NewActionsConfig.
type ActionsConfig struct {
	signer *capability.Signer
	// BaseURL is the API server as jobs reach it, e.g. http://127.0.0.1:4111.
	BaseURL string
	// Grace keeps a URL valid after the deadline, so a late job is told 410
	// rather than 401 (default 1 h).
	Grace time.Duration
}

// NewActionsConfig signs completion URLs with secret (at least 16 bytes,
// the same EVE_ACTION_SECRET the API servers verify them with) and roots
// them at publicURL, the API server as external jobs reach it
// (EVE_PUBLIC_URL, e.g. https://eve.example.com).
func NewActionsConfig(secret []byte, publicURL string) (*ActionsConfig, error) {
	if len(secret) == 0 {
		return nil, errors.New("EVE_ACTION_SECRET is not set: delegated tools cannot hand out completion URLs")
	}
	if publicURL == "" {
		return nil, errors.New("EVE_PUBLIC_URL is empty: jobs need the API server's URL")
	}
	s, err := capability.NewSigner(secret)
	if err != nil {
		return nil, err
	}
	return &ActionsConfig{signer: s, BaseURL: publicURL}, nil
}

// DefaultGrace is how long a completion URL outlives its action's deadline.
const DefaultGrace = time.Hour

// ActionsPath is the API route prefix of completion URLs.
//
// Deprecated: use signals.ActionsPath, where the rules of delegated actions live.
const ActionsPath = signals.ActionsPath

// URL returns the completion URL of a token.
func (c *ActionsConfig) URL(token string) string { return signals.CompletionURL(c.BaseURL, token) }

// ActionID derives a delegated call's action id from its turn workflow and
// call.
//
// Deprecated: use signals.ActionID.
func ActionID(turnWorkflowID, callID string) string { return signals.ActionID(turnWorkflowID, callID) }

// ResultKind marks a completion payload built by eve.
//
// Deprecated: use signals.ResultKind.
const ResultKind = signals.ResultKind

// ActionResult is the payload that completes a delegated activity.
//
// Deprecated: use signals.ActionResult.
type ActionResult = signals.ActionResult

// DecodeActionResult reads what a delegated activity completed with.
//
// Deprecated: use signals.DecodeActionResult, or ActionState.Observe.
func DecodeActionResult(raw json.RawMessage) ActionResult { return signals.DecodeActionResult(raw) }

// OutcomeOf is a delegated call's result (signals.ActionState.Observe or
// End) as the tool outcome the workflow records.
func OutcomeOf(r signals.ActionResult) ToolOutcome {
	if r.Status == protocol.StatusFailed {
		e := r.Error
		if e == nil {
			e = &protocol.ActionError{Code: protocol.CodeToolExecution, Message: "the job failed"}
		}
		out := FailedOutcome(e.Code, e.Message)
		out.Error = e // keeps the job's own error name
		return out
	}
	return ToolOutcome{Status: protocol.StatusCompleted, Output: r.Output}
}

func (a *Activities) delegate(ctx context.Context, tctx *tools.Context, t *tools.Tool, in ExecuteToolInput) (ToolOutcome, error) {
	if a.Actions == nil || a.Actions.signer == nil {
		return ToolOutcome{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s is delegated, but this worker has no action secret: set EVE_ACTION_SECRET (shared with the API server) and EVE_PUBLIC_URL", t.Name),
			ErrTypeBadConfig, nil)
	}
	info := activity.GetInfo(ctx)
	grace := a.Actions.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	token := a.Actions.signer.Sign(capability.Claims{
		Namespace: info.WorkflowNamespace, SessionID: in.Session.ID,
		WorkflowID: info.WorkflowExecution.ID, ActivityID: info.ActivityID,
		ActionID: in.ActionID, Tool: t.Name, Expires: in.Deadline.Add(grace).Unix(),
	})
	action := tools.Action{
		ID:         in.ActionID,
		Completion: tools.Completion{ID: in.ActionID, URL: a.Actions.URL(token)},
		TaskToken:  info.TaskToken,
		Deadline:   in.Deadline,
	}
	pending, err := t.Delegated.Delegate(tctx, in.Input, action)
	if err != nil {
		msg := fmt.Sprintf("tool %s could not start its job: %v", t.Name, err)
		if tools.IsNonRetryable(err) {
			return ToolOutcome{}, temporal.NewNonRetryableApplicationError(msg, ErrTypeTool, err)
		}
		return ToolOutcome{}, temporal.NewApplicationErrorWithCause(msg, ErrTypeTool, err)
	}
	if pending.ActionID() != in.ActionID {
		return ToolOutcome{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s must return action.Pending() of the action it was given", t.Name), ErrTypeTool, nil)
	}
	return ToolOutcome{}, activity.ErrResultPending
}
