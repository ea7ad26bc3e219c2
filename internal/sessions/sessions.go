// Package sessions drives session workflows through a Temporal client:
// create, send, and read events (from the session's log plus the running
// turn's). The CLI and the API server both use it.
package sessions

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// Service talks to session workflows.
type Service struct {
	Client    client.Client
	TaskQueue string
}

// NewID returns a fresh id with a prefix, e.g. "ses_01J...".
func NewID(prefix string) string {
	return prefix + "_" + ulid.MustNew(ulid.Now(), rand.Reader).String()
}

// ErrNotFound means no session has that id.
var ErrNotFound = errors.New("session not found")

func (s *Service) startOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
}

// Create starts a session workflow. id may be empty (one is generated).
func (s *Service) Create(ctx context.Context, id string, initiator *auth.Principal) (string, error) {
	if id == "" {
		id = NewID("ses")
	}
	_, err := s.Client.ExecuteWorkflow(ctx, s.startOptions(id), signals.SessionWorkflow, workflows.SessionInput{SessionID: id, Initiator: initiator})
	if err != nil {
		return "", fmt.Errorf("start session %s: %w", id, err)
	}
	return id, nil
}

// CreateAndSend starts a session and delivers its first message in one call.
func (s *Service) CreateAndSend(ctx context.Context, id string, initiator *auth.Principal, req signals.SendRequest) (signals.SendResult, error) {
	if id == "" {
		id = NewID("ses")
	}
	if req.Caller == nil {
		req.Caller = initiator
	}
	start := s.Client.NewWithStartWorkflowOperation(s.startOptions(id), signals.SessionWorkflow, workflows.SessionInput{SessionID: id, Initiator: initiator})
	h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   id,
			UpdateName:   signals.UpdateSend,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return signals.SendResult{}, fmt.Errorf("start session %s with a message: %w", id, err)
	}
	var res signals.SendResult
	if err := h.Get(ctx, &res); err != nil {
		return res, fmt.Errorf("send to session %s: %w", id, err)
	}
	return res, nil
}

// Send delivers a message to an existing session.
func (s *Service) Send(ctx context.Context, id string, req signals.SendRequest) (signals.SendResult, error) {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   signals.UpdateSend,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return signals.SendResult{}, wrapNotFound(id, fmt.Errorf("send to session %s: %w", id, err))
	}
	var res signals.SendResult
	if err := h.Get(ctx, &res); err != nil {
		return res, fmt.Errorf("send to session %s: %w", id, err)
	}
	return res, nil
}

func wrapNotFound(id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return err
}

// Events returns the session's events from a global index: the session's
// own log, then the running turn's events.
func (s *Service) Events(ctx context.Context, id string, from int) ([]protocol.Event, error) {
	for attempt := 0; ; attempt++ {
		evs, retry, err := s.events(ctx, id, from)
		if err == nil || !retry || attempt >= 20 {
			return evs, err
		}
		// The turn just ended and the session has not recorded it yet.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *Service) page(ctx context.Context, id, runID string, from int) (signals.EventsPage, error) {
	var page signals.EventsPage
	v, err := s.Client.QueryWorkflow(ctx, id, runID, signals.QueryEvents, signals.EventsQuery{From: from})
	if err != nil {
		return page, wrapNotFound(id, fmt.Errorf("read events of session %s: %w", id, err))
	}
	if err := v.Get(&page); err != nil {
		return page, fmt.Errorf("decode events of session %s: %w", id, err)
	}
	return page, nil
}

func (s *Service) events(ctx context.Context, id string, from int) ([]protocol.Event, bool, error) {
	page, err := s.page(ctx, id, "", from)
	if err != nil {
		return nil, false, err
	}
	var evs []protocol.Event
	// Events recorded before a continue-as-new are read from their run.
	for _, r := range page.Runs {
		if from >= r.To {
			continue
		}
		old, err := s.page(ctx, id, r.RunID, max(from, r.From))
		if err != nil {
			return nil, false, fmt.Errorf("events %d-%d of session %s (run %s): %w", r.From, r.To, id, r.RunID, err)
		}
		evs = append(evs, old.Events...)
	}
	evs = append(evs, page.Events...)
	if page.ActiveTurn == nil {
		return evs, false, nil
	}
	turnFrom := from - page.ActiveTurn.Base
	if turnFrom < 0 {
		turnFrom = 0
	}
	tv, err := s.Client.QueryWorkflow(ctx, page.ActiveTurn.WorkflowID, "", signals.QueryTurnEvents, turnFrom)
	if err != nil {
		return nil, true, fmt.Errorf("read events of turn %s: %w", page.ActiveTurn.WorkflowID, err)
	}
	var turnEvs []protocol.Event
	if err := tv.Get(&turnEvs); err != nil {
		return nil, false, fmt.Errorf("decode events of turn %s: %w", page.ActiveTurn.WorkflowID, err)
	}
	return append(evs, turnEvs...), false, nil
}

// Follow calls fn for each event from index from on, polling every
// interval, until fn returns false, ctx ends, or an error occurs.
func (s *Service) Follow(ctx context.Context, id string, from int, interval time.Duration, fn func(index int, e protocol.Event) bool) error {
	if interval <= 0 {
		interval = 20 * time.Millisecond
	}
	next := from
	for {
		evs, err := s.Events(ctx, id, next)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if !fn(next, e) {
				return nil
			}
			next++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Summary reads the session's state.
func (s *Service) Summary(ctx context.Context, id string) (signals.SessionSummary, error) {
	var sum signals.SessionSummary
	v, err := s.Client.QueryWorkflow(ctx, id, "", signals.QueryState)
	if err != nil {
		return sum, wrapNotFound(id, fmt.Errorf("read session %s: %w", id, err))
	}
	return sum, v.Get(&sum)
}
