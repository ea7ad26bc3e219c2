package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// The turn runner: a session runs each turn as a child workflow and keeps
// what it hands back.

// parked tells waiters of the running turn's deliveries that it waits for input.
func (s *session) parked() {
	for dlv, seq := range s.st.Deliveries {
		if seq == s.active.Sequence && s.waiters[dlv] > 0 && s.outcomes[dlv] == nil {
			s.outcomes[dlv] = &signals.TurnOutcome{Status: signals.TurnStatusWaiting, FirstEvent: s.active.Base}
		}
	}
}

// waitedOn reports whether someone waits for the outcome of turn seq (a
// delivery it reads has a waiter).
func (s *session) waitedOn(seq int) bool {
	for dlv, n := range s.waiters {
		if at, ok := s.st.Deliveries[dlv]; ok && n > 0 && at == seq {
			return true
		}
	}
	return false
}

// endTurn forgets the running turn and records what waited for it.
func (s *session) endTurn(ctx workflow.Context) {
	s.active = nil
	s.cancelTurn = nil
	s.open, s.judged = nil, nil
	for _, d := range s.deferred {
		s.log.emit(ctx, d.typ, d.data)
	}
	s.deferred = nil
	if !s.vis {
		setStatus(ctx, s.st.Config, s.id, statusIdle, nil)
	}
}

// runTurn runs msg's turn and answers its outcome.
func (s *session) runTurn(ctx workflow.Context, msg queuedMessage) signals.TurnOutcome {
	tid := signals.TurnID(msg.Sequence)
	wid := signals.TurnWorkflowID(s.id, tid)
	base := s.log.total()
	s.active = &signals.ActiveTurn{WorkflowID: wid, TurnID: tid, Base: base, Sequence: msg.Sequence}
	s.open, s.judged = nil, nil
	s.dropMessages = false
	current := msg.Caller
	if current == nil {
		current = s.initiator
	}
	s.activeCaller = current
	if s.st.Config.hasScope("session") && !s.st.SessionResolved {
		ts, err := resolveTools(ctx, work.ResolveInput{Scope: "session", Session: auth.Session{ID: s.id, Auth: auth.Auth{Current: current, Initiator: s.initiator}}})
		if err != nil {
			// Retried before the next turn; this one fails with the reason.
			s.log.emit(ctx, protocol.TurnStarted, protocol.TurnRef{Sequence: msg.Sequence, TurnID: tid})
			s.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: codeResolution, Message: errorMessage(err), Sequence: msg.Sequence, TurnID: tid})
			if s.ordered {
				s.settleOffers(nil)
			} else {
				s.requeueUntaken(nil)
			}
			s.endTurn(ctx)
			usage := s.st.Usage
			s.log.emit(ctx, protocol.SessionWaiting, protocol.SessionWaitingData{ContinuationToken: s.id, Usage: &usage, Wait: "next-user-message"})
			o := signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: errorMessage(err), FirstEvent: base, LastEvent: s.log.total() - 1}
			if s.waiters[msg.DeliveryID] > 0 {
				s.outcomes[msg.DeliveryID] = &o
			}
			return o
		}
		s.st.SessionTools, s.st.SessionResolved = ts, true
	}
	in := turnInput{
		SessionID: s.id, SessionTools: s.st.SessionTools, TurnID: tid, Sequence: msg.Sequence,
		Auth:    auth.Auth{Current: current, Initiator: s.initiator},
		Message: msg.Message, Conversation: s.st.Conversation, DeliveryIDs: []string{msg.DeliveryID},
		EventBase: base, Config: s.st.Config, ApprovedTools: s.st.ApprovedTools,
		Stubs: s.st.Stubs, Tasks: s.st.Tasks, TasksNote: s.st.TasksNote,
		PrevTurn: s.st.LastTurn, CalledBy: msg.calledBy(), Origin: s.st.Origin, OutputSchema: msg.OutputSchema,
		// The child's input is recorded in its start event, which a replay
		// of this session does not compare: no marker needed here.
		Versions: inputVersions,
		Decides:  s.decides, Report: s.decides && s.waitedOn(msg.Sequence),
	}
	limits := s.st.Config.Limits != (SessionLimits{}) && s.changeOn(ctx, changeLimits)
	if limits {
		in.Budget = budgetOf(s.st)
	}
	before := s.st.Usage
	if !s.vis {
		setStatus(ctx, s.st.Config, s.id, statusRunning, nil)
	}
	out, err := s.runChild(ctx, wid, in)
	s.st.LastTurn = wid
	read := out.Taken
	if err != nil {
		// The turn workflow turns every expected failure into events; this
		// is the unexpected (terminated, timed out): say so in the stream,
		// after what streams may have read of it, which keeps its indexes.
		evs := recoverTurnEvents(ctx, wid)
		read = deliveriesIn(evs)
		s.log.record(evs...)
		out = turnOutput{Outcome: signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: err.Error(), FirstEvent: base}}
		s.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: "TURN_WORKFLOW_FAILED", Message: "the turn workflow ended abnormally: " + err.Error(), Sequence: msg.Sequence, TurnID: tid})
	} else {
		s.log.record(out.Events...)
		if !s.dropMessages && out.Conversation != nil {
			s.st.Conversation = out.Conversation
		}
		s.st.ApprovedTools = out.ApprovedTools
		if out.Tasks != nil || out.TasksNote != "" {
			s.st.Tasks, s.st.TasksNote = out.Tasks, out.TasksNote
		}
		if s.st.Stubs != nil && out.StubPositions != nil {
			s.st.Stubs = &stubState{Rules: s.st.Stubs.Rules, Positions: out.StubPositions}
		}
		s.st.Usage.InputTokens += out.Usage.InputTokens
		s.st.Usage.OutputTokens += out.Usage.OutputTokens
		s.st.Usage.CacheReadTokens += out.Usage.CacheReadTokens
		s.st.Usage.CacheWriteTokens += out.Usage.CacheWriteTokens
		s.noteTurnUsage(msg, out.Usage) // subagent_usage.go
		if limits && out.GrantedAt != nil {
			// A person granted a fresh window during the turn.
			s.st.BudgetBase = before
			s.st.BudgetBase.InputTokens += out.GrantedAt.InputTokens
			s.st.BudgetBase.OutputTokens += out.GrantedAt.OutputTokens
		}
	}
	if s.ordered {
		s.settleOffers(read)
	} else {
		s.requeueUntaken(out.Taken)
	}
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
	return out.Outcome
}

// runChild runs the turn as a child workflow: its start commits with this
// workflow task and its result with the turn's final one, so a session acts
// only on what a turn can no longer take back.
func (s *session) runChild(ctx workflow.Context, wid string, in turnInput) (turnOutput, error) {
	cctx, cancel := workflow.WithCancel(ctx)
	s.cancelTurn = cancel
	opts := workflow.ChildWorkflowOptions{WorkflowID: wid, WaitForCancellation: true}
	if s.vis && (s.st.Config.SearchAttributes || s.quiet) {
		// The turn starts marked running, in its start command: no upsert.
		// A quiet session's turn writes its status from then on, whatever
		// the worker's SearchAttributes (changeStatusFromTurns).
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(searchStatus.ValueSet(statusRunning), searchSession.ValueSet(s.id))
	}
	cctx = workflow.WithChildOptions(cctx, opts)
	var out turnOutput
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
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{work.ErrTypeNoClient}},
	})
	var evs []protocol.Event
	if err := workflow.ExecuteLocalActivity(lctx, work.TurnEventsName, wid).Get(ctx, &evs); err != nil {
		workflow.GetLogger(ctx).Warn("the events of a turn that ended abnormally could not be read; its turn.failed takes their place", "turn", wid, "error", err)
		return nil
	}
	return evs
}
