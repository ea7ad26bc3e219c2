// Package sessions drives session workflows through a Temporal client:
// create, send, and read events (from the session's log plus the running
// turn's). The CLI and the API server both use it.
package sessions

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Service talks to session workflows.
type Service struct {
	Client    client.Client
	TaskQueue string
	// SearchAttributes: the namespace has eve's search attributes
	// (visibility.Missing found none missing). A session then starts with
	// its status and id in its start request, and writes them only when
	// they change (a session created with its first message writes none
	// until its turn ends).
	SearchAttributes bool
	// StartWithMessage: CreateAndSend puts the first message in the
	// session's start request (signals.SessionInput.First) instead of an
	// Update-with-Start, so a create is answered once Temporal recorded the
	// start, without waiting for the session's first workflow task (which,
	// in a burst, queues behind the turns the burst started). Set it only
	// when every worker of the task queue runs eve 0.5.0 with
	// eve-first-message or later: an older worker ignores the field and
	// never runs the message.
	StartWithMessage bool
	// turns are the sessions' last known turns, so a respond takes one
	// round trip when the guess is right (see Respond).
	turns turnHints
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

// MemoInitiator is the memo key of a session's initiator, so the owner of
// a closed session (whose queries no longer answer) is known.
const MemoInitiator = signals.MemoInitiator

// startOptionsFor is startOptions with the initiator in the memo (carried
// across continue-as-new) and, where the namespace has eve's attributes,
// the session's id in EveSessionId. No status: a session started with
// signals.SessionVersions = 3 writes none, its running turn's is its
// (List).
func (s *Service) startOptionsFor(id string, initiator *auth.Principal) client.StartWorkflowOptions {
	o := s.startOptions(id)
	if initiator != nil {
		o.Memo = map[string]any{MemoInitiator: initiator}
	}
	if s.SearchAttributes {
		o.TypedSearchAttributes = temporal.NewSearchAttributes(searchSession.ValueSet(id))
	}
	return o
}

// The attribute a session starts with (workflows/visibility.go).
var searchSession = temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionID)

// Create starts a session workflow. id may be empty (one is generated).
func (s *Service) Create(ctx context.Context, id string, initiator *auth.Principal) (string, error) {
	return s.CreateStubbed(ctx, id, initiator, nil)
}

// CreateStubbed is Create with eve's tool stubs (checked by the caller:
// protocol.ParseToolStubs and the caller's grant).
func (s *Service) CreateStubbed(ctx context.Context, id string, initiator *auth.Principal, stubs []protocol.ToolStub) (string, error) {
	if id == "" {
		id = NewID("ses")
	}
	_, err := s.Client.ExecuteWorkflow(ctx, s.startOptionsFor(id, initiator), signals.SessionWorkflow, signals.SessionInput{SessionID: id, Initiator: initiator, Stubs: stubs, Versions: signals.SessionVersions})
	if err != nil {
		return "", s.classify(ctx, id, fmt.Errorf("start session %s: %w", id, err))
	}
	return id, nil
}

// CreateAndSend starts a session and delivers its first message in one call.
func (s *Service) CreateAndSend(ctx context.Context, id string, initiator *auth.Principal, req signals.SendRequest) (signals.SendResult, error) {
	return s.CreateAndSendOnce(ctx, id, initiator, "", req)
}

// CreateAndSendOnce is CreateAndSend with the Update ID of the message
// (updateID; "" lets Temporal pick one). A retry with the same session id
// and Update ID joins the first one (the session already runs: the
// conflict policy uses it) and answers its result: one turn, not two.
func (s *Service) CreateAndSendOnce(ctx context.Context, id string, initiator *auth.Principal, updateID string, req signals.SendRequest) (signals.SendResult, error) {
	return s.CreateAndSendStubbed(ctx, id, initiator, updateID, nil, req)
}

// CreateAndSendStubbed is CreateAndSendOnce with eve's tool stubs.
func (s *Service) CreateAndSendStubbed(ctx context.Context, id string, initiator *auth.Principal, updateID string, stubs []protocol.ToolStub, req signals.SendRequest) (signals.SendResult, error) {
	if id == "" {
		id = NewID("ses")
	}
	if req.Caller == nil {
		req.Caller = initiator
	}
	if s.StartWithMessage && !req.Wait && checkFirst(req) == nil {
		res, err := s.startWithMessage(ctx, id, initiator, updateID, stubs, req)
		if err == nil || !isAlreadyStarted(err) {
			return res, err
		}
		// The id is taken: a retry of this create (its Update ID and
		// delivery join the first), a session by that id, or a closed one.
		// The Update-with-Start below answers each as before.
	}
	start := s.Client.NewWithStartWorkflowOperation(s.startOptionsFor(id, initiator), signals.SessionWorkflow, signals.SessionInput{SessionID: id, Initiator: initiator, Stubs: stubs, Versions: signals.SessionVersions})
	h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:     updateID,
			WorkflowID:   id,
			UpdateName:   signals.UpdateSend,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		// The id is taken by a closed workflow (REJECT_DUPLICATE): ended.
		return signals.SendResult{}, s.classify(ctx, id, fmt.Errorf("start session %s with a message: %w", id, err))
	}
	var res signals.SendResult
	if err := h.Get(ctx, &res); err != nil {
		return signals.SendResult{}, s.classify(ctx, id, fmt.Errorf("send to session %s: %w", id, err))
	}
	s.learnTurn(res)
	return res, nil
}

// startWithMessage starts session id with req as its first message, in
// the start request (StartWithMessage). The workflow queues it as turn 0.
// updateID is the Update ID a retry would send it with (see
// CreateAndSendOnce).
// An id already in use answers Temporal's WorkflowExecutionAlreadyStarted.
func (s *Service) startWithMessage(ctx context.Context, id string, initiator *auth.Principal, updateID string, stubs []protocol.ToolStub, req signals.SendRequest) (signals.SendResult, error) {
	switch {
	case req.DeliveryID != "":
	case updateID != "":
		// The delivery id the send Update gives a message without one, so
		// a retry of this create by Update (the id then exists) joins it.
		req.DeliveryID = "dlv_" + updateID
	default:
		req.DeliveryID = NewID("dlv")
	}
	o := s.startOptionsFor(id, initiator)
	o.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	o.WorkflowExecutionErrorWhenAlreadyStarted = true
	if _, err := s.Client.ExecuteWorkflow(ctx, o, signals.SessionWorkflow, signals.SessionInput{SessionID: id, Initiator: initiator, Stubs: stubs, First: &req, Versions: signals.SessionVersions}); err != nil {
		if isAlreadyStarted(err) {
			return signals.SendResult{}, err
		}
		return signals.SendResult{}, s.classify(ctx, id, fmt.Errorf("start session %s with a message: %w", id, err))
	}
	res := signals.SendResult{SessionID: id, DeliveryID: req.DeliveryID, TurnID: signals.TurnID(0), Sequence: 0}
	s.learnTurn(res)
	return res, nil
}

func isAlreadyStarted(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started)
}

// checkFirst is the session's send validator (workflows.validateSend) for
// the first message of a new session: a message it would refuse goes
// through the Update, which answers the refusal as it always has.
func checkFirst(req signals.SendRequest) error {
	switch {
	case strings.TrimSpace(req.Message) == "":
		return errors.New("empty message")
	case len(req.Message) > signals.MaxMessageBytes:
		return errors.New("message too long")
	case req.TurnPolicy != "" && req.TurnPolicy != signals.TurnPolicySteer && req.TurnPolicy != signals.TurnPolicyQueue:
		return errors.New("unknown turn policy")
	}
	return nil
}

// learnTurn notes the turn a sent message went to.
func (s *Service) learnTurn(res signals.SendResult) {
	if res.SessionID != "" && res.TurnID != "" {
		s.turns.put(res.SessionID, signals.TurnWorkflowID(res.SessionID, res.TurnID))
	}
}

// Send delivers a message to an existing session. It returns only once the
// session's Update accepted the message (its validator ran and the workflow
// recorded it); every other outcome is an error: ErrNotFound (wrapped) for
// an unknown id, *EndedError when the session's workflow is closed, a
// rejection of the validator, or the failure as it came.
//
// A nil error means the message is in the session's history. It does not
// promise that its turn runs: a workflow terminated after accepting it (by
// an operator, or by Temporal for a history over its size limit) drops the
// messages still queued; later calls then answer *EndedError.
func (s *Service) Send(ctx context.Context, id string, req signals.SendRequest) (signals.SendResult, error) {
	return s.SendOnce(ctx, id, "", req)
}

// SendOnce is Send with the Update ID of the message (updateID; "" lets
// Temporal pick one). Temporal deduplicates Updates by ID within a run: a
// retry with the same ID answers the first one's result and records
// nothing. Give the retry the same req.DeliveryID too, so the session
// workflow's own delivery dedupe covers a retry after a continue-as-new.
func (s *Service) SendOnce(ctx context.Context, id, updateID string, req signals.SendRequest) (signals.SendResult, error) {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		WorkflowID:   id,
		UpdateName:   signals.UpdateSend,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return signals.SendResult{}, s.classify(ctx, id, fmt.Errorf("send to session %s: %w", id, err))
	}
	var res signals.SendResult
	if err := h.Get(ctx, &res); err != nil {
		return signals.SendResult{}, s.classify(ctx, id, fmt.Errorf("send to session %s: %w", id, err))
	}
	s.learnTurn(res)
	return res, nil
}

// Events returns all of the session's events from a global index on, up
// to the tail as it was at the first read (a negative from counts back
// from the tail, as in Read). It reads page after page and holds them all
// in memory: readers of long sessions should page with Read and ReadNext.
func (s *Service) Events(ctx context.Context, id string, from int) ([]protocol.Event, error) {
	return s.events(ctx, id, from, false)
}

// events is Events; ended: of a closed session (ReadEnded).
func (s *Service) events(ctx context.Context, id string, from int, ended bool) ([]protocol.Event, error) {
	p, err := s.readFrom(ctx, id, from, ended)
	if err != nil {
		return nil, err
	}
	evs := p.Events
	end := p.Total
	for next := p.Next(); next < end; next = p.Next() {
		if p, err = s.ReadNext(ctx, id, next, p); err != nil {
			return nil, err
		}
		if len(p.Events) == 0 {
			break // the log shrank (a turn workflow that died): nothing more to read
		}
		evs = append(evs, p.Events...)
	}
	return evs, nil
}

// Summary reads the session's state (*EndedError when its workflow is closed).
func (s *Service) Summary(ctx context.Context, id string) (signals.SessionSummary, error) {
	var sum signals.SessionSummary
	v, err := s.querySession(ctx, id, signals.QueryState)
	if err != nil {
		return sum, err
	}
	if err := v.Get(&sum); err != nil {
		return sum, fmt.Errorf("decode the state of session %s: %w", id, err)
	}
	if sum.ActiveTurn != nil {
		s.turns.put(id, sum.ActiveTurn.WorkflowID)
	}
	return sum, nil
}
