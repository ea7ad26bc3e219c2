package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// The turn's side of its requests to people (request.go): it opens them
// (gate, ask, holdForLimits), parks, awaits them (await), and records what
// their transitions return (record). The handlers below take people's
// answers to the board; judge puts the answers a policy decides to it;
// watch runs a request's deadline, reminder and escalation timers.
//
// Who may settle an approval, as in eve 0.80.1 (docs/tools/human-in-the-loop.md,
// "Authorizing approval responses"): without a response policy only the
// requester (the caller of the turn) may approve or cancel a call, and
// the answer settles directly, approval.settled then input.resolved. With
// one, the response is first recorded as approval.candidate "pending", the
// policy runs in a local activity, and the candidate ends rejected,
// failed, timed-out or stale (the request stays open, turn.waiting
// {on:"input"} again), or the request settles.

// registerInputHandlers installs the respond Update and Signal, the
// session's message offers, the text deltas of streamed steps, and what a
// running call asks through (SignalAsk, QueryAsked).
func (t *turn) registerInputHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateRespond,
		func(ctx workflow.Context, req signals.RespondRequest) (signals.RespondResult, error) {
			parks := t.parks
			var routed []protocol.InputResolution
			var retired []string
			if own, down, children, rt := t.splitRelayed(req.Responses); len(down) > 0 || len(rt) > 0 {
				// Answers to what a child asked go down (proxy.go).
				routed, retired = t.routeDown(ctx, req, down, children), rt
				req.Responses = own
			}
			tk := t.board.take(req, false, admitEdit(ctx))
			res := signals.RespondResult{Resolutions: tk.resolved, Duplicates: tk.duplicates}
			if routed != nil || retired != nil {
				res.Resolutions, res.Duplicates = append(routed, tk.resolved...), append(retired, tk.duplicates...)
			}
			t.record(ctx, tk.effects)
			settled, refused := t.judge(ctx, tk.judged)
			// What the policies refused is only the Update's answer: no
			// command, no event, so no version marker.
			res.Resolutions, res.Refused = append(res.Resolutions, settled...), refused
			res.EditRefused = t.board.refusedEdit(req.Responses)
			if req.Wait {
				if err := workflow.Await(ctx, func() bool { return t.finished || t.parks > parks }); err != nil {
					return res, err
				}
				o := t.outcome()
				res.Outcome = &o
			}
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req signals.RespondRequest) error {
			if own, down, _, retired := t.splitRelayed(req.Responses); len(down) > 0 || len(retired) > 0 {
				// What a child asked is the child's to check (proxy.go).
				if err := t.relayedCheck(req.Responses); err != nil {
					return err
				}
				if req.Responses = own; len(own) == 0 {
					return nil
				}
			}
			if err := t.board.check(req); err != nil {
				return editFailure(err)
			}
			return t.board.checkResponders(req)
		}}); err != nil {
		return err
	}
	respondCh := workflow.GetSignalChannel(ctx, signals.SignalRespond)
	messageCh := workflow.GetSignalChannel(ctx, signals.SignalTurnMessage)
	deltaCh := workflow.GetSignalChannel(ctx, signals.SignalTextDelta)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(respondCh, func(c workflow.ReceiveChannel, _ bool) {
				var req signals.RespondRequest
				c.Receive(ctx, &req)
				t.respondSignal(ctx, req)
			})
			sel.AddReceive(deltaCh, func(c workflow.ReceiveChannel, _ bool) {
				var d signals.TextDelta
				c.Receive(ctx, &d)
				if d.StepIndex == t.stepIdx && d.StepIndex > t.stepDone && d.Delta != "" {
					t.log.emit(ctx, protocol.MessageAppended, protocol.MessageAppendedData{MessageDelta: d.Delta, StepRef: t.step(d.StepIndex)})
					t.streamed += d.Delta
				}
			})
			sel.AddReceive(messageCh, func(c workflow.ReceiveChannel, _ bool) {
				var m signals.TurnMessage
				c.Receive(ctx, &m)
				t.takeMessage(ctx, m)
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	if err := workflow.SetQueryHandler(ctx, signals.QueryAsked, func(requestID string) (signals.AskState, error) {
		r := t.board.byID[requestID]
		if r == nil || !r.asked {
			return signals.AskState{}, nil
		}
		return signals.AskState{Known: true, Settled: r.state.closed(), Resolution: r.res}, nil
	}); err != nil {
		return err
	}
	askCh := workflow.GetSignalChannel(ctx, signals.SignalAsk)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(askCh, func(c workflow.ReceiveChannel, _ bool) {
				var a signals.AskRequest
				c.Receive(ctx, &a)
				t.ask(ctx, a)
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	return nil
}

// respondSignal applies what is valid and records the rest as invalid; a
// signal never fails the workflow. Policies run in a coroutine of their
// own, so the turn's other signals keep arriving.
func (t *turn) respondSignal(ctx workflow.Context, req signals.RespondRequest) {
	if own, down, children, _ := t.splitRelayed(req.Responses); len(down) > 0 {
		// Answers to what a child asked go down (proxy.go).
		t.routeDown(ctx, req, down, children)
		if req.Responses = own; len(own) == 0 {
			return
		}
	}
	tk := t.board.take(req, true, admitEdit(ctx))
	for _, bad := range tk.invalid {
		workflow.GetLogger(ctx).Warn("invalid input response signal", "requestId", bad.requestID, "error", bad.err.Error())
	}
	if len(tk.judged) > 0 {
		workflow.Go(ctx, func(ctx workflow.Context) { t.judge(ctx, tk.judged) })
	}
	if len(tk.resolved) > 0 && t.board.byID[tk.resolved[0].RequestID] == nil {
		// Only unknown ids: record against the current step.
		for _, e := range tk.events {
			t.log.emit(ctx, e.typ, e.data)
		}
		t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: tk.resolved, StepRef: t.step(t.stepIdx)})
		return
	}
	t.record(ctx, tk.effects)
}

// admitEdit readies an edited decision for its candidate (request.edited).
// A history recorded before edits existed (the version says so) took the
// response as a plain approval; so does its replay.
func admitEdit(ctx workflow.Context) func(*request, decision, *auth.Principal) decision {
	return func(r *request, d decision, by *auth.Principal) decision {
		if d.edited == nil {
			return d
		}
		if workflow.GetVersion(ctx, changeEdits, workflow.DefaultVersion, 1) < 1 {
			d.edited, d.res.OriginalInput = nil, nil
			return d
		}
		if e, err := r.edit(d, by); err == nil {
			d = e
		}
		return d
	}
}

// judge puts candidates to their policies: each is recorded as pending
// first, then the policies run concurrently, then each candidate settles
// its request or ends without settling it. It returns the resolutions it
// recorded and the candidates refused.
func (t *turn) judge(ctx workflow.Context, cs []*candidate) (settled []protocol.InputResolution, refused []protocol.Refusal) {
	if len(cs) == 0 {
		return nil, nil
	}
	futures := make([]workflow.Future, len(cs))
	for i, c := range cs {
		t.record(ctx, c.pending())
		if c.refused == "" {
			futures[i] = evaluateCandidate(ctx, c, t.dynamicFor)
		}
	}
	for i, c := range cs {
		var v approval.Verdict
		var err error
		if f := futures[i]; f != nil {
			err = f.Get(ctx, &v)
		}
		fx, cerr := c.r.conclude(c, v, err, workflow.Now(ctx))
		if cerr != nil {
			workflow.GetLogger(ctx).Error("a candidate could not be concluded", "candidate", c.id, "error", cerr.Error())
			continue
		}
		t.record(ctx, fx)
		settled, refused = append(settled, fx.resolved...), append(refused, fx.refused...)
	}
	if len(refused) > 0 && len(t.board.open()) > 0 && ctx.Err() == nil {
		// The request stays answerable: the turn says so again.
		t.reportInput(ctx)
	}
	return settled, refused
}

// evaluateCandidate judges a candidate: an edit is put to the approval
// policy again (custom and Auto decide on the input), then to the response
// policy (if any; else the default rule, checked before); a plain response
// to its response policy only.
func evaluateCandidate(ctx workflow.Context, c *candidate, dynamicFor func(string) []work.DynamicTool) workflow.Future {
	if c.d.edited == nil {
		return evaluateResponse(ctx, c, dynamicFor)
	}
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		p := c.r.plan
		if needsPolicy(p) && reviewed(ctx, p) {
			var st approval.Status
			err := evaluatePolicy(ctx, work.ApprovalInput{Context: approval.Context{
				Session: c.r.b.session, ToolName: p.Call.Name, ToolInput: c.d.edited.input, CallID: p.Call.ID,
				ApprovedTools: append([]string{}, c.r.b.approved...),
			}, Dynamic: dynamicFor(p.Call.Name)}).Get(ctx, &st)
			switch {
			case err != nil || !st.Valid() || (st.Type == approval.UserApproval && st.Reason == approval.ReasonPolicyFailed):
				// It could not judge the edit: nothing settles.
				set.Set(nil, temporal.NewNonRetryableApplicationError("the approval policy failed on the edited input", work.ErrTypeResponsePolicy, err))
				return
			case st.Type == approval.Denied:
				reason := "The approval policy denies the edited call."
				if st.Reason != "" {
					reason = "The approval policy denies the edited call: " + st.Reason
				}
				set.Set(approval.Reject(reason), nil)
				return
			}
		}
		if !c.r.judged() {
			set.Set(approval.Allow(), nil)
			return
		}
		var v approval.Verdict
		err := evaluateResponse(ctx, c, dynamicFor).Get(ctx, &v)
		set.Set(v, err)
	})
	return f
}

// evaluateResponse runs a tool's response policy in a local activity, once:
// a policy that fails asks the person to try again rather than retry in
// their name.
func evaluateResponse(ctx workflow.Context, c *candidate, dynamicFor func(string) []work.DynamicTool) workflow.Future {
	decision := approval.DecisionApprove
	if c.d.res.Outcome != protocol.OutcomeApproved {
		decision = approval.DecisionCancel
	}
	r, p := c.r, c.r.plan
	in := work.ResponseInput{Context: approval.ResponseContext{
		Request: approval.Request{RequestID: r.req.RequestID, CallID: p.Call.ID, ToolName: p.Call.Name,
			ToolInput: p.Call.Input, Principal: r.b.requester},
		Response: approval.Response{Decision: decision, Note: c.d.reason, Principal: c.responder},
		Session:  r.b.session,
		TurnID:   r.b.turnID,
	}, Dynamic: dynamicFor(p.Call.Name)}
	if e := c.d.edited; e != nil {
		// The input that would run, and the model's.
		in.Context.Request.ToolInput, in.Context.Request.OriginalInput = e.input, e.original
	}
	r.escalatedRequest(&in.Context.Request)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: work.ResponsePolicyTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteLocalActivity(lctx, work.EvaluateResponseName, in)
}

// record records what transitions returned: their events; then, for what
// they settled, input.resolved and the decisions, and the turn parks again
// or runs (reportInput); then the reminder hook's notice.
func (t *turn) record(ctx workflow.Context, fx effects) {
	for _, e := range fx.events {
		t.log.emit(ctx, e.typ, e.data)
	}
	if len(fx.resolved) > 0 {
		for _, res := range fx.resolved {
			if r := t.board.byID[res.RequestID]; r != nil {
				countInputResolved(ctx, res.Kind, res.Outcome, workflow.Now(ctx).Sub(r.opened))
			}
		}
		t.recordResolved(ctx, fx.resolved)
		t.reportInput(ctx)
	}
	if fx.notice != nil {
		notify(ctx, t.cfg, *fx.notice)
	}
}

// recordResolved records input.resolved (against the step of the first
// request) and decision.recorded for each request it closed. Events are
// workflow state, so a retried task records them again in the same
// places, with the same ids.
func (t *turn) recordResolved(ctx workflow.Context, resolutions []protocol.InputResolution) {
	step := t.board.byID[resolutions[0].RequestID].stepIdx
	t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolutions, StepRef: t.step(step)})
	if !t.changeOn(ctx, changeDecisions) {
		return
	}
	for _, res := range resolutions {
		r := t.board.byID[res.RequestID]
		if r == nil || !r.state.closed() || res.Outcome == protocol.OutcomeInvalid {
			continue // an invalid answer settles nothing: the request waits on
		}
		t.log.emit(ctx, protocol.DecisionRecorded, r.decisionRecord(res, workflow.Now(ctx)))
	}
}

// park asks people in one input.requested, and the turn waits for them.
// The requests carry their times (deadline, next reminder, escalation;
// changeRequestTimes), whose version marker is recorded only when one of
// them has any, so older histories replay unchanged.
func (t *turn) park(ctx workflow.Context, stepIdx int, asked []*request) {
	t.parkFor(ctx, stepIdx, asked, "")
}

// parkFor is park for the requests a task's work (taskID) asked.
func (t *turn) parkFor(ctx workflow.Context, stepIdx int, asked []*request, taskID string) {
	requests := make([]protocol.InputRequest, len(asked))
	timed := false
	for i, r := range asked {
		countInputsOpened(ctx, r.req.Kind, 1)
		requests[i], timed = r.req, timed || r.timed()
	}
	if timed && t.changeOn(ctx, changeRequestTimes) {
		for i, r := range asked {
			requests[i] = r.requested()
		}
	}
	t.log.emit(ctx, protocol.InputRequested, protocol.InputRequestedData{Requests: requests, StepRef: t.step(stepIdx), TaskID: taskID})
	t.reportInput(ctx)
}

// reportInput says what the turn does now that its requests changed: it
// waits for people (status, turn.waiting) while one is open, else it runs;
// and it tells the session which requests are open. The signal is a
// SignalExternalWorkflow command, fire and forget: it commits with this
// workflow task, so a task that fails or is retried never tells the
// session something its next attempt contradicts (docs/architecture.md,
// "Exactly once").
//
// When the last open request closes, a quiet turn tells the session
// nothing (changeQuietResume): the signal and the session's workflow task
// it woke made 100 answered approvals take ~1.5× the raw SDK's time
// instead of ~1.2× (docs/performance.md). The
// session's mirror keeps the closed requests until the turn's end or its
// next park: a message it offers as their answer is one the turn then
// leaves (decideMessage), to be read after it, as it was without the
// mirror; and its status says waiting-input, which the sessions listing
// reads against the turn's inbox memo (sessions.List). So a turn is quiet
// only where that memo exists (the inbox on), where its status memo says
// it runs on (changeStatusFromTurns), or no listing reads a status (no
// search attributes).
func (t *turn) reportInput(ctx workflow.Context) {
	if len(t.board.open()) > 0 {
		t.setStatus(ctx, statusWaitingInput, t.board.waitingTools())
		t.turnWaiting(ctx, "input")
		t.parks++
		if !t.quietDecided {
			t.quietDecided = true
			t.quiet = (t.inbox || t.statusMemo || !t.cfg.SearchAttributes) && t.changeOn(ctx, changeQuietResume)
		}
	} else {
		t.setStatus(ctx, statusRunning, nil)
		if t.quiet && len(t.inputs().Open) == 0 {
			return // nothing open, a proxied request's neither
		}
	}
	t.tellInputs(ctx) // typed.go
}

// tell signals the session by a SignalExternalWorkflow command, fire and
// forget: the command commits with this workflow task, so a task that
// fails or is retried never tells the session something its next attempt
// contradicts (docs/architecture.md, "Exactly once").
func (t *turn) tell(ctx workflow.Context, signal string, payload any) {
	if t.parent != nil {
		workflow.SignalExternalWorkflow(ctx, t.parent.ID, "", signal, payload)
	}
}

// watch starts r's timers: its deadline's, then its reminders' and its
// escalation's (so a request due for both expires first). The timers are
// Temporal's: they fire on the server whether or not a worker runs, and
// the turn records the transition in the workflow task that follows. The
// follow-ups' version marker is recorded only for a request that has any,
// so older histories replay unchanged.
func (t *turn) watch(ctx workflow.Context, r *request) {
	closed := func() bool { return r.state.closed() }
	fu := r.followUps(t.cfg.InputReminders)
	fu.on = fu.any() && t.changeOn(ctx, changeFollowUps)
	if d := r.deadlineAfter(fu, t.cfg.InputDeadline); d > 0 && t.changeOn(ctx, changeDeadlines) {
		r.deadline = r.opened.Add(d)
		workflow.Go(ctx, func(ctx workflow.Context) {
			answered, err := workflow.AwaitWithTimeout(ctx, d, closed)
			if answered || err != nil || closed() {
				return
			}
			if fx, err := r.expire(); err == nil {
				t.record(ctx, fx)
			}
		})
	}
	if !fu.on {
		return
	}
	if times := r.reminderTimes(fu); len(times) > 0 {
		r.follow.reminders = times
		// After a worker was down past several, one reminder for all.
		workflow.Go(ctx, func(ctx workflow.Context) {
			for i := 0; i < len(times); i++ {
				if wait := times[i].Sub(workflow.Now(ctx)); wait > 0 {
					answered, err := workflow.AwaitWithTimeout(ctx, wait, closed)
					if answered || err != nil {
						return
					}
				}
				now := workflow.Now(ctx)
				for i+1 < len(times) && !times[i+1].After(now) {
					i++
				}
				fx, err := r.remind(times[i], now)
				if err != nil {
					return // settled, or its deadline is due: it expires instead
				}
				t.record(ctx, fx)
			}
		})
	}
	if e := fu.escalation; e != nil && r.escalates(e) {
		r.follow.escalatesAt = r.opened.Add(e.After)
		workflow.Go(ctx, func(ctx workflow.Context) {
			answered, err := workflow.AwaitWithTimeout(ctx, e.After, closed)
			if answered || err != nil || closed() {
				return
			}
			if fx, err := r.escalate(e, workflow.Now(ctx)); err == nil {
				t.record(ctx, fx)
			}
		})
	}
}

// notify runs the worker's reminder hook in an activity, if the session
// has one: a retried workflow task never schedules it twice, and a failed
// hook is retried (RemindAttempts) without touching the turn.
func notify(ctx workflow.Context, cfg Config, n notice) {
	if !cfg.ReminderHook {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "remind_" + n.rm.RequestID + "_" + n.key,
		StartToCloseTimeout: work.RemindTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: work.RemindAttempts},
	})
	if err := workflow.ExecuteActivity(actx, work.RemindName, n.rm).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("reminder hook failed", "requestId", n.rm.RequestID, "notice", n.key, "error", err.Error())
	}
}
