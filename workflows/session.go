package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// MaxMessageBytes bounds one user message.
const MaxMessageBytes = 256 << 10

// SessionInput starts (or continues) a session.
type SessionInput struct {
	SessionID string          `json:"sessionId"`
	Initiator *auth.Principal `json:"initiator,omitempty"`
	// State is set when the session continues as new.
	State *SessionState `json:"state,omitempty"`
}

// SessionState is everything a session carries across continue-as-new.
type SessionState struct {
	Config   Config              `json:"config"`
	Events   []protocol.Event    `json:"events"`
	Messages []model.Message     `json:"messages"`
	NextSeq  int                 `json:"nextSeq"`
	Queue    []QueuedMessage     `json:"queue,omitempty"`
	Usage    protocol.TokenUsage `json:"usage"`
	// Deliveries maps delivery ids to turn sequences, so a re-sent message
	// (a client retry) joins its first delivery instead of running twice.
	Deliveries map[string]int `json:"deliveries,omitempty"`
}

// QueuedMessage is a message waiting for its turn.
type QueuedMessage struct {
	Sequence   int             `json:"sequence"`
	Message    string          `json:"message"`
	DeliveryID string          `json:"deliveryId"`
	Caller     *auth.Principal `json:"caller,omitempty"`
}

type session struct {
	id        string
	initiator *auth.Principal
	st        *SessionState
	active    *signals.ActiveTurn
	// outcomes of turns someone waits on, by delivery id.
	outcomes map[string]*signals.TurnOutcome
	waiters  map[string]int
}

func (s *session) emit(ctx workflow.Context, typ string, data any) {
	now := workflow.Now(ctx)
	idx := len(s.st.Events)
	s.st.Events = append(s.st.Events, protocol.NewEvent(typ, data, protocol.EventID(now, s.id, idx), now, nil))
}

func turnID(seq int) string { return fmt.Sprintf("turn_%d", seq) }

// Session is the entity workflow of one conversation.
func (r *Runtime) Session(ctx workflow.Context, in SessionInput) error {
	s := &session{id: in.SessionID, initiator: in.Initiator, st: in.State,
		outcomes: map[string]*signals.TurnOutcome{}, waiters: map[string]int{}}
	if s.st == nil {
		var cfg Config
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return r.Config.WithDefaults() }).Get(&cfg); err != nil {
			return fmt.Errorf("record config: %w", err)
		}
		s.st = &SessionState{Config: cfg, Deliveries: map[string]int{}}
		s.emit(ctx, protocol.SessionStarted, protocol.SessionStartedData{Runtime: &protocol.RuntimeIdentity{AgentID: cfg.AgentName, AgentName: cfg.AgentName, EveVersion: Version}})
	}
	if s.st.Deliveries == nil {
		s.st.Deliveries = map[string]int{}
	}
	if err := s.registerHandlers(ctx); err != nil {
		return err
	}
	for {
		if err := workflow.Await(ctx, func() bool {
			return len(s.st.Queue) > 0 || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		}); err != nil {
			return err
		}
		if len(s.st.Queue) == 0 {
			// Idle and the history is large: start afresh with the state.
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			if len(s.st.Queue) == 0 {
				return workflow.NewContinueAsNewError(ctx, signals.SessionWorkflow, SessionInput{SessionID: s.id, Initiator: s.initiator, State: s.st})
			}
		}
		msg := s.st.Queue[0]
		s.st.Queue = s.st.Queue[1:]
		s.runTurn(ctx, msg)
	}
}

func (s *session) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, signals.QueryEvents, func(q signals.EventsQuery) (signals.EventsPage, error) {
		from := q.From
		if from < 0 {
			from = 0
		}
		page := signals.EventsPage{Total: len(s.st.Events), ActiveTurn: s.active}
		if from < len(s.st.Events) {
			page.Events = s.st.Events[from:]
		}
		return page, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryState, func() (signals.SessionSummary, error) {
		return signals.SessionSummary{
			SessionID: s.id, Initiator: s.initiator, Turns: s.st.NextSeq, Queued: len(s.st.Queue),
			ActiveTurn: s.active, Messages: s.st.Messages, Usage: s.st.Usage,
		}, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateSend, s.send, workflow.UpdateHandlerOptions{
		Validator: validateSend,
	})
}

func validateSend(ctx workflow.Context, req signals.SendRequest) error {
	if strings.TrimSpace(req.Message) == "" {
		return errors.New("message is empty: send the text of the user's message")
	}
	if len(req.Message) > MaxMessageBytes {
		return fmt.Errorf("message is %d bytes; the limit is %d", len(req.Message), MaxMessageBytes)
	}
	return nil
}

func (s *session) send(ctx workflow.Context, req signals.SendRequest) (signals.SendResult, error) {
	dlv := req.DeliveryID
	if dlv == "" {
		dlv = "dlv_" + workflow.GetCurrentUpdateInfo(ctx).ID
	}
	seq, dup := s.st.Deliveries[dlv]
	if !dup {
		seq = s.st.NextSeq
		s.st.NextSeq++
		s.st.Deliveries[dlv] = seq
		s.st.Queue = append(s.st.Queue, QueuedMessage{Sequence: seq, Message: req.Message, DeliveryID: dlv, Caller: req.Caller})
	}
	res := signals.SendResult{SessionID: s.id, DeliveryID: dlv, TurnID: turnID(seq), Sequence: seq}
	if !req.Wait {
		return res, nil
	}
	if dup {
		return res, fmt.Errorf("delivery %s was already accepted; read its outcome from the event stream", dlv)
	}
	s.waiters[dlv]++
	defer func() {
		if s.waiters[dlv]--; s.waiters[dlv] == 0 {
			delete(s.waiters, dlv)
			delete(s.outcomes, dlv)
		}
	}()
	if err := workflow.Await(ctx, func() bool { return s.outcomes[dlv] != nil }); err != nil {
		return res, err
	}
	res.Outcome = s.outcomes[dlv]
	return res, nil
}

func (s *session) runTurn(ctx workflow.Context, msg QueuedMessage) {
	tid := turnID(msg.Sequence)
	wid := s.id + "/" + tid
	base := len(s.st.Events)
	s.active = &signals.ActiveTurn{WorkflowID: wid, TurnID: tid, Base: base}
	current := msg.Caller
	if current == nil {
		current = s.initiator
	}
	in := TurnInput{
		SessionID: s.id, TurnID: tid, Sequence: msg.Sequence,
		Auth:    auth.Auth{Current: current, Initiator: s.initiator},
		Message: msg.Message, History: s.st.Messages, DeliveryIDs: []string{msg.DeliveryID},
		EventBase: base, Config: s.st.Config,
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: wid})
	var out TurnOutput
	if err := workflow.ExecuteChildWorkflow(cctx, signals.TurnWorkflow, in).Get(ctx, &out); err != nil {
		// The turn workflow turns every expected failure into events; this
		// is the unexpected (terminated, timed out): say so in the stream.
		// Its own events are lost with it.
		out = TurnOutput{Outcome: signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: err.Error(), FirstEvent: base}}
		s.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: "TURN_WORKFLOW_FAILED", Message: "the turn workflow ended abnormally: " + err.Error(), Sequence: msg.Sequence, TurnID: tid})
	} else {
		s.st.Events = append(s.st.Events, out.Events...)
		s.st.Messages = append(s.st.Messages, out.Messages...)
		s.st.Usage.InputTokens += out.Usage.InputTokens
		s.st.Usage.OutputTokens += out.Usage.OutputTokens
		s.st.Usage.CacheReadTokens += out.Usage.CacheReadTokens
		s.st.Usage.CacheWriteTokens += out.Usage.CacheWriteTokens
	}
	s.active = nil
	usage := s.st.Usage
	s.emit(ctx, protocol.SessionWaiting, protocol.SessionWaitingData{ContinuationToken: s.id, Usage: &usage, Wait: "next-user-message"})
	if s.waiters[msg.DeliveryID] > 0 {
		o := out.Outcome
		o.LastEvent = len(s.st.Events) - 1
		s.outcomes[msg.DeliveryID] = &o
	}
}
