package sessions

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/signals"
)

// ErrNoActiveTurn means the session has no running turn to answer.
var ErrNoActiveTurn = errors.New("the session has no running turn with open input requests")

// Respond delivers a batch of answers to the session's running turn: it
// reads the session's summary to find the turn, then calls RespondTo. A
// rejected batch returns the validator's error (which says which answer and
// why) and changes nothing. A closed session answers *EndedError, an
// unknown one ErrNotFound, one whose turn has ended ErrNoActiveTurn.
func (s *Service) Respond(ctx context.Context, sessionID string, req signals.RespondRequest) (signals.RespondResult, error) {
	if res, ok := s.RespondHinted(ctx, sessionID, req); ok {
		return res, nil
	}
	sum, err := s.Summary(ctx, sessionID)
	if err != nil {
		return signals.RespondResult{}, err
	}
	return s.RespondTo(ctx, sessionID, sum.ActiveTurn, req)
}

// RespondHinted sends the answers to the session's last known turn (the
// turn its last message went to, or its summary named): one round trip.
// It reports false when it knows no turn or that turn did not take the
// batch (it ended, or the answers are not its own, or they are wrong);
// then the caller asks the session which turn runs (Respond does), and the
// running turn's verdict is the one that counts.
func (s *Service) RespondHinted(ctx context.Context, sessionID string, req signals.RespondRequest) (signals.RespondResult, bool) {
	wid, ok := s.turns.get(sessionID)
	if !ok {
		return signals.RespondResult{}, false
	}
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   wid,
		UpdateName:   signals.UpdateRespond,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res signals.RespondResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err != nil {
		s.turns.drop(sessionID, wid)
		return signals.RespondResult{}, false
	}
	return res, true
}

// RespondTo is Respond for a caller that has read the session's summary:
// turn is its ActiveTurn (nil: ErrNoActiveTurn). It costs one round trip,
// the turn's respond Update, whose validator decides the whole batch and
// whose handler applies it. Errors are Respond's; a *RejectedError carries
// the validator's words.
func (s *Service) RespondTo(ctx context.Context, sessionID string, turn *signals.ActiveTurn, req signals.RespondRequest) (signals.RespondResult, error) {
	var res signals.RespondResult
	if turn == nil {
		return res, ErrNoActiveTurn
	}
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   turn.WorkflowID,
		UpdateName:   signals.UpdateRespond,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		err = s.classify(ctx, sessionID, fmt.Errorf("respond in session %s: %w", sessionID, err))
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// The session runs but the turn is gone: it ended meanwhile.
			return res, ErrNoActiveTurn
		}
		return res, err
	}
	if err := h.Get(ctx, &res); err != nil {
		if err := s.classify(ctx, sessionID, err); errors.Is(err, ErrEnded) || errors.Is(err, ErrNotFound) {
			return signals.RespondResult{}, err
		}
		return signals.RespondResult{}, &RejectedError{Err: err}
	}
	return res, nil
}

// RejectedError is a batch of answers (or a message) the workflow refused.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// Control runs a control operation (cancel, clear, compact, reset). A
// closed session answers *EndedError, an unknown one ErrNotFound.
func (s *Service) Control(ctx context.Context, sessionID string, req signals.ControlRequest) (signals.ControlResult, error) {
	var res signals.ControlResult
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   sessionID,
		UpdateName:   signals.UpdateControl,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return res, s.classify(ctx, sessionID, fmt.Errorf("%s session %s: %w", req.Op, sessionID, err))
	}
	if err := h.Get(ctx, &res); err != nil {
		if err := s.classify(ctx, sessionID, err); errors.Is(err, ErrEnded) || errors.Is(err, ErrNotFound) {
			return signals.ControlResult{}, err
		}
		return signals.ControlResult{}, &RejectedError{Err: err}
	}
	return res, nil
}
