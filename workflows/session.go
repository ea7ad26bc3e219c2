package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// MaxMessageBytes bounds one user message.
const MaxMessageBytes = signals.MaxMessageBytes

// SessionInput starts (or continues) a session.
type SessionInput struct {
	SessionID string          `json:"sessionId"`
	Initiator *auth.Principal `json:"initiator,omitempty"`
	// State is set when the session continues as new.
	State *SessionState `json:"state,omitempty"`
}

// SessionState is everything a session carries across continue-as-new.
type SessionState struct {
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
	Queue        []QueuedMessage     `json:"queue,omitempty"`
	Usage        protocol.TokenUsage `json:"usage"`
	// Deliveries maps delivery ids to turn sequences, so a re-sent message
	// (a client retry) joins its first delivery instead of running twice.
	Deliveries map[string]int `json:"deliveries,omitempty"`
	// RunFirstTurn is the first turn sequence of this run.
	RunFirstTurn int `json:"runFirstTurn,omitempty"`
	// ApprovedTools are the tools approved once (approval.Once) in this session.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// SessionTools were resolved once, before the first turn.
	SessionTools    []activities.DynamicTool `json:"sessionTools,omitempty"`
	SessionResolved bool                     `json:"sessionResolved,omitempty"`
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
	// cancelTurn cancels the running turn's child workflow.
	cancelTurn workflow.CancelFunc
	// open mirrors the running turn's open input requests.
	open []protocol.InputRequest
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
	offered      []QueuedMessage
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
func (r *Runtime) Session(ctx workflow.Context, in SessionInput) error {
	s := &session{id: in.SessionID, initiator: in.Initiator, st: in.State,
		log:      eventLog{rt: r, sessionID: in.SessionID},
		outcomes: map[string]*signals.TurnOutcome{}, waiters: map[string]int{}}
	if s.st == nil {
		var cfg Config
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return r.Config.WithDefaults() }).Get(&cfg); err != nil {
			return fmt.Errorf("record config: %w", err)
		}
		s.st = &SessionState{Config: cfg, Deliveries: map[string]int{}}
		if err := workflow.UpsertMemo(ctx, map[string]any{"agent": cfg.AgentName, "model": cfg.ModelID}); err != nil {
			return fmt.Errorf("memo: %w", err)
		}
		setStatus(ctx, cfg, s.id, StatusIdle, nil)
		s.log.emit(ctx, protocol.SessionStarted, protocol.SessionStartedData{Runtime: &protocol.RuntimeIdentity{AgentID: cfg.AgentName, AgentName: cfg.AgentName, EveVersion: Version}})
	}
	if in.State != nil {
		s.log.base, s.log.events = s.st.EventBase, s.st.Events
	}
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
	for {
		if err := workflow.Await(ctx, func() bool {
			return (len(s.st.Queue) > 0 && !s.compacting) || s.shouldContinueAsNew(ctx)
		}); err != nil {
			return err
		}
		if s.overLimits(ctx) && !s.compacting && workflow.AllHandlersFinished(ctx) {
			// Start afresh before the history nears the server's limits,
			// even with messages waiting: they travel in the state.
			return workflow.NewContinueAsNewError(ctx, signals.SessionWorkflow, SessionInput{SessionID: s.id, Initiator: s.initiator, State: s.carry(ctx)})
		}
		if len(s.st.Queue) == 0 || s.compacting {
			// Idle and the history is large: start afresh with the state.
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			if len(s.st.Queue) == 0 {
				return workflow.NewContinueAsNewError(ctx, signals.SessionWorkflow, SessionInput{SessionID: s.id, Initiator: s.initiator, State: s.carry(ctx)})
			}
		}
		msg := s.st.Queue[0]
		s.st.Queue = s.st.Queue[1:]
		s.runTurn(ctx, msg)
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
			SessionID: s.id, Initiator: s.initiator, Turns: s.st.NextSeq, Queued: len(s.st.Queue),
			ActiveTurn: s.active, Conversation: s.st.Conversation, Usage: s.st.Usage,
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
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(inputsCh, func(c workflow.ReceiveChannel, _ bool) {
				var in signals.TurnInputs
				c.Receive(ctx, &in)
				if s.active != nil && s.active.TurnID == in.TurnID {
					s.open = in.Open
					if len(in.Open) > 0 {
						s.parked()
						var names []string
						for _, r := range in.Open {
							if !slices.Contains(names, r.Action.ToolName) {
								names = append(names, r.Action.ToolName)
							}
						}
						setStatus(ctx, s.st.Config, s.id, StatusWaitingInput, names)
					} else {
						setStatus(ctx, s.st.Config, s.id, StatusRunning, nil)
					}
				}
			})
			sel.Select(ctx)
		}
	})
	return nil
}

// parked tells waiters of the running turn's deliveries that it waits for input.
func (s *session) parked() {
	for dlv, seq := range s.st.Deliveries {
		if seq == s.active.Sequence && s.waiters[dlv] > 0 && s.outcomes[dlv] == nil {
			s.outcomes[dlv] = &signals.TurnOutcome{Status: signals.TurnStatusWaiting, FirstEvent: s.active.Base}
		}
	}
}

func validateControl(ctx workflow.Context, req signals.ControlRequest) error {
	switch req.Op {
	case signals.ControlCancel, signals.ControlClear, signals.ControlCompact, signals.ControlResetOp:
		return nil
	}
	return fmt.Errorf("unknown control op %q: want cancel, clear, compact or reset", req.Op)
}

func (s *session) control(ctx workflow.Context, req signals.ControlRequest) (signals.ControlResult, error) {
	switch req.Op {
	case signals.ControlCancel:
		if s.active == nil || (req.TurnID != "" && req.TurnID != s.active.TurnID) {
			return signals.ControlResult{Status: signals.ControlNoActiveTurn}, nil
		}
		s.cancelTurn()
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	case signals.ControlClear:
		s.clear(ctx)
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	case signals.ControlCompact:
		s.compact(ctx)
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	default: // reset
		if s.active != nil {
			s.cancelTurn()
		}
		s.st.Queue = nil
		s.offered = nil
		s.st.ApprovedTools = nil
		s.clear(ctx)
		return signals.ControlResult{Status: signals.ControlReset, PreviousSessionID: s.id, SessionID: s.id}, nil
	}
}

func (s *session) lastTurn() (int, string) {
	seq := s.st.NextSeq - 1
	if seq < 0 {
		seq = 0
	}
	return seq, signals.TurnID(seq)
}

// clear forgets the conversation; the event log stays.
func (s *session) clear(ctx workflow.Context) {
	s.st.Conversation = nil
	s.dropMessages = s.active != nil
	seq, tid := s.lastTurn()
	s.emitSession(ctx, protocol.ContextCleared, protocol.ContextClearedData{Sequence: seq, SessionID: s.id, TurnID: tid})
}

// compact replaces the stored conversation with a summary, now or, while
// a turn runs or a compaction does, after it.
func (s *session) compact(ctx workflow.Context) {
	if s.active != nil || s.compacting {
		s.compactAfterTurn = true
		return
	}
	s.compactStored(ctx)
}

// MaxQueuedMessages bounds the messages waiting for their turn: beyond it a
// send is refused (and answered with an error), never accepted and dropped.
const MaxQueuedMessages = 100

func (s *session) validateSend(ctx workflow.Context, req signals.SendRequest) error {
	if strings.TrimSpace(req.Message) == "" {
		return errors.New("message is empty: send the text of the user's message")
	}
	if len(req.Message) > MaxMessageBytes {
		return fmt.Errorf("message is %d bytes; the limit is %d (workflows.MaxMessageBytes): send large content as a file or a tool's input instead", len(req.Message), MaxMessageBytes)
	}
	if p := req.TurnPolicy; p != "" && p != signals.TurnPolicySteer && p != signals.TurnPolicyQueue {
		return fmt.Errorf("turnPolicy %q: expected either %q or %q", p, signals.TurnPolicyQueue, signals.TurnPolicySteer)
	}
	if _, dup := s.st.Deliveries[req.DeliveryID]; !dup && len(s.st.Queue) >= MaxQueuedMessages {
		return temporal.NewApplicationError(fmt.Sprintf("session %s has %d messages waiting for their turn (the limit, workflows.MaxQueuedMessages); send again when the running turn ends", s.id, len(s.st.Queue)), signals.ErrSessionBusy)
	}
	return nil
}

func (s *session) send(ctx workflow.Context, req signals.SendRequest) (signals.SendResult, error) {
	dlv := req.DeliveryID
	if dlv == "" {
		dlv = "dlv_" + workflow.GetCurrentUpdateInfo(ctx).ID
	}
	seq, dup := s.st.Deliveries[dlv]
	offered := false
	if !dup && s.active != nil {
		// Offered to the running turn: a waiting sender gets the outcome of
		// the turn that reads it (this one, or its own if it is re-queued).
		offered = s.offerToTurn(ctx, req, dlv)
		seq = s.active.Sequence
	}
	if !dup && !offered {
		seq = s.st.NextSeq
		s.st.NextSeq++
		s.st.Deliveries[dlv] = seq
		s.st.Queue = append(s.st.Queue, QueuedMessage{Sequence: seq, Message: req.Message, DeliveryID: dlv, Caller: req.Caller})
	}
	res := signals.SendResult{SessionID: s.id, DeliveryID: dlv, TurnID: signals.TurnID(seq), Sequence: seq}
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

// endTurn forgets the running turn and records what waited for it.
func (s *session) endTurn(ctx workflow.Context) {
	s.active = nil
	s.cancelTurn = nil
	s.open = nil
	for _, d := range s.deferred {
		s.log.emit(ctx, d.typ, d.data)
	}
	s.deferred = nil
	setStatus(ctx, s.st.Config, s.id, StatusIdle, nil)
}

func (s *session) runTurn(ctx workflow.Context, msg QueuedMessage) {
	tid := signals.TurnID(msg.Sequence)
	wid := signals.TurnWorkflowID(s.id, tid)
	base := s.log.total()
	s.active = &signals.ActiveTurn{WorkflowID: wid, TurnID: tid, Base: base, Sequence: msg.Sequence}
	s.open = nil
	s.dropMessages = false
	current := msg.Caller
	if current == nil {
		current = s.initiator
	}
	s.activeCaller = current
	if s.st.Config.hasScope("session") && !s.st.SessionResolved {
		ts, err := resolveTools(ctx, activities.ResolveInput{Scope: "session", Session: auth.Session{ID: s.id, Auth: auth.Auth{Current: current, Initiator: s.initiator}}})
		if err != nil {
			// Retried before the next turn; this one fails with the reason.
			s.log.emit(ctx, protocol.TurnStarted, protocol.TurnRef{Sequence: msg.Sequence, TurnID: tid})
			s.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: CodeResolution, Message: errorMessage(err), Sequence: msg.Sequence, TurnID: tid})
			s.requeueUntaken(nil)
			s.endTurn(ctx)
			usage := s.st.Usage
			s.log.emit(ctx, protocol.SessionWaiting, protocol.SessionWaitingData{ContinuationToken: s.id, Usage: &usage, Wait: "next-user-message"})
			if s.waiters[msg.DeliveryID] > 0 {
				s.outcomes[msg.DeliveryID] = &signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: errorMessage(err), FirstEvent: base, LastEvent: s.log.total() - 1}
			}
			return
		}
		s.st.SessionTools, s.st.SessionResolved = ts, true
	}
	in := TurnInput{
		SessionID: s.id, SessionTools: s.st.SessionTools, TurnID: tid, Sequence: msg.Sequence,
		Auth:    auth.Auth{Current: current, Initiator: s.initiator},
		Message: msg.Message, Conversation: s.st.Conversation, DeliveryIDs: []string{msg.DeliveryID},
		EventBase: base, Config: s.st.Config, ApprovedTools: s.st.ApprovedTools,
	}
	setStatus(ctx, s.st.Config, s.id, StatusRunning, nil)
	out, err := s.runChild(ctx, wid, in)
	if err != nil {
		// The turn workflow turns every expected failure into events; this
		// is the unexpected (terminated, timed out): say so in the stream,
		// after what streams may have read of it, which keeps its indexes.
		s.log.record(recoverTurnEvents(ctx, wid)...)
		out = TurnOutput{Outcome: signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: err.Error(), FirstEvent: base}}
		s.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: "TURN_WORKFLOW_FAILED", Message: "the turn workflow ended abnormally: " + err.Error(), Sequence: msg.Sequence, TurnID: tid})
	} else {
		s.log.record(out.Events...)
		if !s.dropMessages && out.Conversation != nil {
			s.st.Conversation = out.Conversation
		}
		s.st.ApprovedTools = out.ApprovedTools
		s.st.Usage.InputTokens += out.Usage.InputTokens
		s.st.Usage.OutputTokens += out.Usage.OutputTokens
		s.st.Usage.CacheReadTokens += out.Usage.CacheReadTokens
		s.st.Usage.CacheWriteTokens += out.Usage.CacheWriteTokens
	}
	s.requeueUntaken(out.Taken)
	s.endTurn(ctx)
	usage := s.st.Usage
	s.log.emit(ctx, protocol.SessionWaiting, protocol.SessionWaitingData{ContinuationToken: s.id, Usage: &usage, Wait: "next-user-message"})
	if s.waiters[msg.DeliveryID] > 0 {
		o := out.Outcome
		o.LastEvent = s.log.total() - 1
		s.outcomes[msg.DeliveryID] = &o
	}
	// Messages the turn read (answers, steering) end with it.
	for dlv, n := range s.waiters {
		if n > 0 && s.outcomes[dlv] == nil && s.st.Deliveries[dlv] == msg.Sequence {
			o := out.Outcome
			o.LastEvent = s.log.total() - 1
			s.outcomes[dlv] = &o
		}
	}
}

// runChild runs the turn as a child workflow: its start commits with this
// workflow task and its result with the turn's final one, so a session acts
// only on what a turn can no longer take back.
func (s *session) runChild(ctx workflow.Context, wid string, in TurnInput) (TurnOutput, error) {
	cctx, cancel := workflow.WithCancel(ctx)
	s.cancelTurn = cancel
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{WorkflowID: wid, WaitForCancellation: true})
	// Each turn roots its own trace, not a span of a session that lives for days.
	cctx = workflow.WithValue(cctx, tracing.SpanContextKey, nil)
	var out TurnOutput
	err := workflow.ExecuteChildWorkflow(cctx, signals.TurnWorkflow, in).Get(ctx, &out)
	return out, err
}

// recoverTurnEvents reads the events of a turn that ended without a result
// (terminated, timed out): a stream may have read them while it ran. Without
// them (no client, or the query failed) the turn.failed that follows takes
// their place, as before.
func recoverTurnEvents(ctx workflow.Context, wid string) []protocol.Event {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrTypeNoClient}},
	})
	var evs []protocol.Event
	if err := workflow.ExecuteLocalActivity(lctx, activities.TurnEventsName, wid).Get(ctx, &evs); err != nil {
		workflow.GetLogger(ctx).Warn("the events of a turn that ended abnormally could not be read; its turn.failed takes their place", "turn", wid, "error", err)
		return nil
	}
	return evs
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
	MaxRunHistoryBytes  = 4 << 20
	MaxRunHistoryEvents = 4000
	MaxRunEventBytes    = 8 << 20
)

// overLimits reports a run past eve's own bounds.
func (s *session) overLimits(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistorySize() >= MaxRunHistoryBytes ||
		info.GetCurrentHistoryLength() >= MaxRunHistoryEvents ||
		s.log.bytes >= MaxRunEventBytes
}

// compactStored replaces the stored conversation with a summary (/compact).
// Turns wait while it runs.
func (s *session) compactStored(ctx workflow.Context) {
	seq, tid := s.lastTurn()
	data := protocol.CompactionData{ModelID: s.st.Config.ModelID, Sequence: seq, SessionID: s.id, TurnID: tid}
	if s.st.Conversation != nil {
		before := s.st.Conversation.Tokens()
		data.UsageInputTokens = &before
	}
	s.log.emit(ctx, protocol.CompactionRequested, data)
	if s.st.Conversation != nil && !s.st.Conversation.Empty() {
		s.compacting = true
		out, err := runCompaction(ctx, s.st.Config.WithDefaults(), activities.CompactInput{SessionID: s.id, Conversation: *s.st.Conversation})
		s.compacting = false
		if err != nil {
			workflow.GetLogger(ctx).Warn("compaction failed; the conversation stays as it was", "session", s.id, "error", err)
			return
		}
		s.st.Conversation = &out.Conversation
		after := out.Conversation.Tokens()
		data.UsageInputTokens = &after
	}
	s.log.emit(ctx, protocol.CompactionCompleted, data)
}

// carry is the state the next run starts with: everything but this run's
// events, which stay readable through this run's queries.
func (s *session) carry(ctx workflow.Context) *SessionState {
	next := *s.st
	if len(s.log.events) > 0 {
		run := workflow.GetInfo(ctx).WorkflowExecution.RunID
		next.Runs = append(append([]signals.RunRef(nil), s.st.Runs...), signals.RunRef{RunID: run, From: s.log.base, To: s.log.total()})
	}
	next.EventBase = s.log.total()
	next.Events = nil
	next.RunFirstTurn = s.st.NextSeq
	next.Deliveries = recentDeliveries(s.st.Deliveries, s.st.NextSeq-MaxRememberedDeliveries)
	return &next
}

// MaxRememberedDeliveries is how many turns back a re-sent delivery id is
// still recognized (a client retry joins its first delivery).
const MaxRememberedDeliveries = 1000

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
