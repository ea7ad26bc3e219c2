package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// maxMessageBytes bounds one user message.
const maxMessageBytes = signals.MaxMessageBytes

// sessionInput starts (or continues) a session.
type sessionInput struct {
	SessionID string          `json:"sessionId"`
	Initiator *auth.Principal `json:"initiator,omitempty"`
	// State is set when the session continues as new.
	State *sessionState `json:"state,omitempty"`
	// Stubs are eve's tool stubs, fixed when the session is created (the
	// API server checked them and the caller's grant).
	Stubs []protocol.ToolStub `json:"stubs,omitempty"`
	// First is the first message, accepted with the start
	// (changeFirstMessage; signals.SessionInput.First).
	First *signals.SendRequest `json:"first,omitempty"`
	// Origin places a subagent's child session under its root session
	// (changeSubagentOrigin): set by the parent turn that starts it.
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
	// Versions: the run takes the changes of inputGenerations up to it as
	// on, without markers (changeInputVersions; signals.SessionInput).
	Versions int `json:"versions,omitempty"`
}

// sessionState is everything a session carries across continue-as-new.
type sessionState struct {
	Config Config `json:"config"`
	// Events and EventBase start a run's event log (eventLog): EventBase is
	// the global index of its first event. A run keeps its events in its
	// log; continue-as-new carries none: earlier runs keep theirs, Runs
	// says which run holds which range, and their queries still answer.
	Events    []protocol.Event `json:"events"`
	EventBase int              `json:"eventBase,omitempty"`
	Runs      []signals.RunRef `json:"runs,omitempty"`
	// Conversation is the stored conversation (by reference).
	Conversation *conversation.Ref   `json:"conversation,omitempty"`
	NextSeq      int                 `json:"nextSeq"`
	Queue        []queuedMessage     `json:"queue,omitempty"`
	Usage        protocol.TokenUsage `json:"usage"`
	// Deliveries maps delivery ids to turn sequences, so a re-sent message
	// (a client retry) joins its first delivery instead of running twice.
	Deliveries map[string]int `json:"deliveries,omitempty"`
	// RunFirstTurn is the first turn sequence of this run.
	RunFirstTurn int `json:"runFirstTurn,omitempty"`
	// ExpiresAt ends the session (Config.SessionLifetime); zero: never.
	ExpiresAt time.Time `json:"expiresAt,omitempty"`
	// BudgetBase is the session's usage when its current limit window
	// began (Config.Limits; a person's Continue starts a new one).
	BudgetBase protocol.TokenUsage `json:"budgetBase,omitempty"`
	// ApprovedTools are the tools approved once (approval.Once) in this session.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// SessionTools were resolved once, before the first turn.
	SessionTools    []work.DynamicTool `json:"sessionTools,omitempty"`
	SessionResolved bool               `json:"sessionResolved,omitempty"`
	// Stubs are the session's tool stubs and their positions (nil: none).
	Stubs *stubState `json:"stubs,omitempty"`
	// Tasks are the idle resumable tasks the session keeps between turns,
	// TasksNote the [Tasks] note the model read last (workflows/tasks.go).
	Tasks     []heldTask `json:"tasks,omitempty"`
	TasksNote string     `json:"tasksNote,omitempty"`
	// LastTurn is the workflow id of the last turn that ran: the next
	// turn's trace links to it (trace.go). Not a command: replays ignore it.
	LastTurn string `json:"lastTurn,omitempty"`
	// Origin is the session's place under its root session (nil: a root
	// session); each turn reads it (turnInput.Origin).
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
	// Unreported is the usage of a subagent's session its parent has not
	// been told of yet (subagent_usage.go); nil in a session no parent
	// called.
	Unreported *protocol.TokenUsage `json:"unreported,omitempty"`
}

// queuedMessage is a message waiting for its turn.
type queuedMessage struct {
	Sequence   int             `json:"sequence"`
	Message    string          `json:"message"`
	DeliveryID string          `json:"deliveryId"`
	Caller     *auth.Principal `json:"caller,omitempty"`
	// ReplyTo is set on a parent turn's message to its subagent's session
	// (subagent.go): the turn's outcome answers it.
	ReplyTo *signals.AgentReplyTo `json:"replyTo,omitempty"`
	// OutputSchema: the message asks its turn for a structured result
	// (output.go); such a message always runs as a turn of its own.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// RelayTo: a tool's code sent it (signals.SendRequest.RelayTo); its
	// turn relays people-in-the-loop events there and replies nothing.
	RelayTo *signals.AgentReplyTo `json:"relayTo,omitempty"`
}

// calledBy is the parent turn's call the message's turn relays to: the
// call it answers, or the code that sent it.
func (m queuedMessage) calledBy() *signals.AgentReplyTo {
	if m.ReplyTo != nil {
		return m.ReplyTo
	}
	if m.RelayTo != nil && m.RelayTo.WorkflowID != "" && m.RelayTo.CallID != "" {
		return m.RelayTo
	}
	return nil
}

type session struct {
	id        string
	initiator *auth.Principal
	st        *sessionState
	// versions is this run's input Versions (changeOn).
	versions int
	active   *signals.ActiveTurn
	// cancelTurn cancels the running turn's child workflow.
	cancelTurn workflow.CancelFunc
	// open mirrors the running turn's open input requests.
	open []protocol.InputRequest
	// judged are the open approvals a response policy decides.
	judged []string
	// dropMessages: the conversation was cleared while a turn ran, so its
	// messages are not kept.
	dropMessages bool
	// log holds this run's events.
	log eventLog
	// deferred are session events raised while a turn runs: they are
	// recorded after the turn's events, so the indexes a stream has
	// already read never shift.
	deferred []deferredEvent
	// outcomes of turns someone waits on, by delivery id.
	outcomes map[string]*signals.TurnOutcome
	waiters  map[string]int
	// compacting: a /compact runs; turns wait for it. compactAfterTurn: a
	// /compact arrived while a turn ran.
	compacting       bool
	compactAfterTurn bool
	// activeCaller is the person the running turn serves; offered are the
	// messages handed to it (see offerToTurn).
	activeCaller *auth.Principal
	offered      []queuedMessage
	// pastDeadline: the session's lifetime is over (ExpiresAt); ended: it
	// recorded session.completed and takes no more messages.
	pastDeadline, ended bool
	// ordered: messages are read in the order they were accepted
	// (changeOrder; session_order.go). pending are the messages accepted
	// while the running turn runs and not decided yet; acked those it took.
	ordered bool
	// vis: the session's search attributes are written by writeVisibility
	// from its state (changeSearchWrites), not at each transition.
	vis bool
	// quiet: the session writes no status of its own; its running turn's
	// attributes are its status (changeStatusFromTurns).
	quiet bool
	// decides: the running turn decides every message that arrives while
	// it runs, and the session keeps no mirror of its prompts (open,
	// judged): only a turn someone waits on tells it of a park
	// (changeTurnDecides).
	decides bool
	pending []*pendingMessage
	acked   []queuedMessage
	// joins are the parent's messages offered to the running turn
	// (subagent_join.go), until the turn that reads each is known.
	joins []*pendingMessage
}

// expired reports a session past its lifetime with nothing left to do: no
// turn runs (turns run in the session's loop, so one that was active has
// settled) and no message waits, so none is lost.
func (s *session) expired() bool {
	return s.pastDeadline && len(s.st.Queue) == 0 && !s.compacting && s.active == nil
}

// complete ends a session whose lifetime is over: session.completed with its
// usage; sends after it are refused (validateSend), and the workflow
// completes once its handlers have.
func (s *session) complete(ctx workflow.Context) error {
	s.ended = true
	usage := s.st.Usage
	s.log.emit(ctx, protocol.SessionCompleted, protocol.SessionCompletedData{Usage: &usage})
	if !s.vis {
		setStatus(ctx, s.st.Config, s.id, statusIdle, nil)
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

type deferredEvent struct {
	typ  string
	data any
}

// emitSession records a session-level event now, or after the running turn.
func (s *session) emitSession(ctx workflow.Context, typ string, data any) {
	if s.active != nil {
		s.deferred = append(s.deferred, deferredEvent{typ, data})
		return
	}
	s.log.emit(ctx, typ, data)
}

// Session is the entity workflow of one conversation.
func (r *runtime) Session(ctx workflow.Context, in sessionInput) error {
	s := &session{id: in.SessionID, initiator: in.Initiator, st: in.State, versions: in.Versions,
		log:      eventLog{rt: r, sessionID: in.SessionID},
		outcomes: map[string]*signals.TurnOutcome{}, waiters: map[string]int{}}
	// Decided once per run: a run started before the change keeps the old
	// order until it continues as new.
	s.ordered = s.changeOn(ctx, changeOrder)
	if s.st == nil {
		var cfg Config
		if err := workflow.SideEffect(ctx, func(workflow.Context) any {
			c := r.Config.withDefaults()
			c.Traced = tracing.FromWorkflow(ctx) != nil
			return c
		}).Get(&cfg); err != nil {
			return fmt.Errorf("record config: %w", err)
		}
		s.st = &sessionState{Config: cfg, Deliveries: map[string]int{}}
		if len(in.Stubs) > 0 {
			s.st.Stubs = &stubState{Rules: in.Stubs}
		}
		s.st.Origin = in.Origin
		if cfg.SessionLifetime > 0 && s.changeOn(ctx, changeLifetime) {
			s.st.ExpiresAt = workflow.Now(ctx).Add(cfg.SessionLifetime)
		}
		if err := workflow.UpsertMemo(ctx, map[string]any{"agent": cfg.AgentName, "model": cfg.ModelID}); err != nil {
			return fmt.Errorf("memo: %w", err)
		}
		s.vis = s.writesVisibility(ctx, cfg)
		if !s.vis {
			setStatus(ctx, cfg, s.id, statusIdle, nil)
		}
		s.log.emit(ctx, protocol.SessionStarted, protocol.SessionStartedData{Runtime: &protocol.RuntimeIdentity{AgentID: cfg.AgentName, AgentName: cfg.AgentName, EveVersion: signals.Version}})
		if in.First != nil && s.changeOn(ctx, changeFirstMessage) {
			// Before any Update is handled: the first message is turn 0.
			s.acceptFirst(*in.First)
		}
	}
	if in.State != nil {
		s.log.base, s.log.events = s.st.EventBase, s.st.Events
		s.vis = s.writesVisibility(ctx, s.st.Config)
	}
	s.quiet = s.vis && fromInput(s.versions, changeStatusFromTurns)
	s.decides = s.ordered && fromInput(s.versions, changeTurnDecides)
	if s.st.Deliveries == nil {
		s.st.Deliveries = map[string]int{}
	}
	// Counted again: a new run's session.started counts twice, as it
	// always has (the count decides when to continue as new).
	for _, e := range s.log.events {
		s.log.bytes += len(e.Data)
	}
	if err := s.registerHandlers(ctx); err != nil {
		return err
	}
	if s.vis && !s.quiet {
		writeVisibility(ctx, s.visState, false, true, s.versions)
	}
	if !s.st.ExpiresAt.IsZero() {
		// One timer per run, not one per wait: the deadline only marks the
		// session; the loop ends it once idle.
		workflow.Go(ctx, func(ctx workflow.Context) {
			if workflow.NewTimer(ctx, max(s.st.ExpiresAt.Sub(workflow.Now(ctx)), time.Millisecond)).Get(ctx, nil) == nil {
				s.pastDeadline = true
			}
		})
	}
	for {
		if err := workflow.Await(ctx, func() bool {
			return (len(s.st.Queue) > 0 && !s.compacting) || s.shouldContinueAsNew(ctx) || s.expired()
		}); err != nil {
			return err
		}
		if s.expired() {
			return s.complete(ctx)
		}
		if s.overLimits(ctx) && !s.compacting && workflow.AllHandlersFinished(ctx) {
			// Start afresh before the history nears the server's limits,
			// even with messages waiting: they travel in the state.
			return workflow.NewContinueAsNewError(ctx, signals.SessionWorkflow, sessionInput{SessionID: s.id, Initiator: s.initiator, State: s.carry(ctx), Versions: inputVersions})
		}
		if len(s.st.Queue) == 0 || s.compacting {
			// Idle and the history is large: start afresh with the state.
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			if len(s.st.Queue) == 0 {
				return workflow.NewContinueAsNewError(ctx, signals.SessionWorkflow, sessionInput{SessionID: s.id, Initiator: s.initiator, State: s.carry(ctx), Versions: inputVersions})
			}
		}
		msg := s.st.Queue[0]
		s.st.Queue = s.st.Queue[1:]
		o := s.runTurn(ctx, msg)
		if msg.ReplyTo != nil {
			s.replyToParent(ctx, msg.ReplyTo, o)
		}
		s.replyJoined(ctx, msg.Sequence, o) // subagent_join.go
		if s.compactAfterTurn {
			s.compactAfterTurn = false
			s.compactStored(ctx)
		}
	}
}

func (s *session) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, signals.QueryEvents, func(q signals.EventsQuery) (signals.EventsPage, error) {
		from := q.From
		if from < 0 {
			from = 0
		}
		page := signals.EventsPage{Total: s.log.total(), ActiveTurn: s.active}
		if from < s.log.base {
			// Older events live in earlier runs.
			for _, r := range s.st.Runs {
				if r.To > from {
					page.Runs = append(page.Runs, r)
				}
			}
			from = s.log.base
		}
		if i := from - s.log.base; i < len(s.log.events) {
			page.Events = signals.PageEvents(s.log.events[i:])
		}
		page.From = from
		return page, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryState, func() (signals.SessionSummary, error) {
		return signals.SessionSummary{
			SessionID: s.id, Initiator: s.initiator, Turns: s.st.NextSeq, Queued: s.waiting(),
			ActiveTurn: s.active, Conversation: s.st.Conversation, Usage: s.st.Usage, Tasks: heldTaskInfos(s.st.Tasks),
		}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateSend, s.send, workflow.UpdateHandlerOptions{
		Validator: s.validateSend,
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateControl, s.control, workflow.UpdateHandlerOptions{
		Validator: validateControl,
	}); err != nil {
		return err
	}
	inputsCh := workflow.GetSignalChannel(ctx, signals.SignalTurnInputs)
	takenCh := workflow.GetSignalChannel(ctx, signals.SignalTurnTaken)
	agentCh := workflow.GetSignalChannel(ctx, signals.SignalAgentMessage)
	stopCh := workflow.GetSignalChannel(ctx, signals.SignalAgentCancel)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(takenCh, func(c workflow.ReceiveChannel, _ bool) {
				var a signals.TurnTaken
				c.Receive(ctx, &a)
				s.turnAnswered(ctx, a)
			})
			sel.AddReceive(agentCh, func(c workflow.ReceiveChannel, _ bool) {
				var m signals.AgentMessage
				c.Receive(ctx, &m)
				s.agentMessage(ctx, m)
			})
			sel.AddReceive(stopCh, func(c workflow.ReceiveChannel, _ bool) {
				var m signals.AgentCancel
				c.Receive(ctx, &m)
				s.agentCancel(ctx, m) // subagent_cancel.go
			})
			sel.AddReceive(inputsCh, func(c workflow.ReceiveChannel, _ bool) {
				var in signals.TurnInputs
				c.Receive(ctx, &in)
				if s.active != nil && s.active.TurnID == in.TurnID {
					s.open, s.judged = in.Open, in.Judged
					if len(in.Open) > 0 {
						s.parked()
					}
					if s.vis {
						return
					}
					if len(in.Open) > 0 {
						setStatus(ctx, s.st.Config, s.id, statusWaitingInput, openTools(in.Open))
					} else {
						setStatus(ctx, s.st.Config, s.id, statusRunning, nil)
					}
				}
			})
			sel.Select(ctx)
		}
	})
	return nil
}

func (s *session) shouldContinueAsNew(ctx workflow.Context) bool {
	if n := s.st.Config.ContinueAsNewAfterTurns; n > 0 && s.st.NextSeq-s.st.RunFirstTurn >= n {
		return true
	}
	if s.overLimits(ctx) {
		return true
	}
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// eve's own bounds of one session run, well below the server's warnings
// (10 MB or 10,240 events of history) whatever it suggests: a run never
// nears Temporal's limits, and its events (held by the run, answered by
// queries) stay small in a worker's memory.
const (
	maxRunHistoryBytes  = 4 << 20
	maxRunHistoryEvents = 4000
	maxRunEventBytes    = 8 << 20
)

// overLimits reports a run past eve's own bounds.
func (s *session) overLimits(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistorySize() >= maxRunHistoryBytes ||
		info.GetCurrentHistoryLength() >= maxRunHistoryEvents ||
		s.log.bytes >= maxRunEventBytes
}

// carry is the state the next run starts with: everything but this run's
// events, which stay readable through this run's queries.
func (s *session) carry(ctx workflow.Context) *sessionState {
	next := *s.st
	if len(s.log.events) > 0 {
		run := workflow.GetInfo(ctx).WorkflowExecution.RunID
		next.Runs = append(append([]signals.RunRef(nil), s.st.Runs...), signals.RunRef{RunID: run, From: s.log.base, To: s.log.total()})
	}
	next.EventBase = s.log.total()
	next.Events = nil
	next.RunFirstTurn = s.st.NextSeq
	next.Deliveries = recentDeliveries(s.st.Deliveries, s.st.NextSeq-maxRememberedDeliveries)
	return &next
}

// maxRememberedDeliveries is how many turns back a re-sent delivery id is
// still recognized (a client retry joins its first delivery).
const maxRememberedDeliveries = 1000

// recentDeliveries keeps the deliveries of turns from seq on.
func recentDeliveries(all map[string]int, from int) map[string]int {
	out := make(map[string]int, len(all))
	for id, seq := range all {
		if seq >= from {
			out[id] = seq
		}
	}
	return out
}

// changeOn reports whether change id is on for this run (changes.go).
func (s *session) changeOn(ctx workflow.Context, id string) bool {
	return changeOn(ctx, s.versions, id)
}

// writesVisibility reports whether the session writes its search
// attributes through writeVisibility (changeSearchWrites): when the worker
// has them, or when its starter set them (then they exist on the namespace,
// and the session keeps what its starter wrote true). A quiet session
// (changeStatusFromTurns) has them too, but writes none: it starts its
// turns with them, and their status is its.
func (s *session) writesVisibility(ctx workflow.Context, cfg Config) bool {
	// A starter of Versions 3 sets the session's id alone (no status:
	// changeStatusFromTurns); one before it set both.
	if start := visStart(ctx); !cfg.SearchAttributes && start.status == "" && start.session == "" {
		return false
	}
	return s.changeOn(ctx, changeSearchWrites)
}

// openTools names the tools of open requests, each once, in order.
func openTools(open []protocol.InputRequest) []string {
	var names []string
	for _, r := range open {
		if !slices.Contains(names, r.Action.ToolName) {
			names = append(names, r.Action.ToolName)
		}
	}
	return names
}

// visState is what the session's search attributes say (changeSearchWrites):
// running from the moment a message waits for its turn (so a session
// created with its first message, which its creator already marked
// running, writes nothing until that turn ends), waiting-input with the
// tools of the running turn's open requests, else idle.
func (s *session) visState() visState {
	v := visState{status: statusIdle, session: s.id}
	switch {
	case s.active != nil && len(s.open) > 0:
		v.status, v.tools = statusWaitingInput, openTools(s.open)
	case s.active != nil, len(s.st.Queue) > 0 && !s.compacting && !s.ended:
		v.status = statusRunning
	}
	return v
}
