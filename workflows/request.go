package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A request put to a person: a tool approval, a question (a client tool's,
// or one a running call asks), or a session-limit prompt. Its state is one
// field that only the transitions below change, each naming the states it
// may start from (require), as the Temporal Go SDK guards its update
// protocol (internal_update.go):
//
//	open ─propose─▶ candidate ─conclude: refused, none left─▶ open
//	open | candidate ─answer, conclude: allowed─▶ settled
//	open | candidate ─expire─▶ expired
//	open | candidate ─withdraw─▶ withdrawn
//	open | candidate ─cancel─▶ cancelled
//	open | candidate ─remind, escalate, edit─▶ (unchanged)
//
// A transition returns what the turn records (effects: events, the
// resolutions of input.resolved, a notice for the reminder hook); it never
// calls back into the turn. The request owns who may respond, its edits,
// its deadline and follow-ups, and its decision record.

// reqState is where a request stands.
type reqState uint8

const (
	reqOpen      reqState = iota // asked; no response waits for a policy
	reqCandidate                 // responses wait for their policies (judge)
	reqSettled                   // a person's answer settled it
	reqExpired                   // nobody answered before its deadline
	reqWithdrawn                 // a steering message withdrew it
	reqCancelled                 // the turn, or the call that asked, stopped waiting
)

var reqStateNames = [...]string{"open", "candidate", "settled", "expired", "withdrawn", "cancelled"}

func (s reqState) String() string {
	if int(s) < len(reqStateNames) {
		return reqStateNames[s]
	}
	return fmt.Sprintf("reqState(%d)", s)
}

// closed: nobody can settle the request any more.
func (s reqState) closed() bool { return s >= reqSettled }

// live are the states a person can still change.
var live = []reqState{reqOpen, reqCandidate}

// stateError is a transition the request's state refuses; its message is
// what a person who answered a closed request reads.
type stateError struct {
	action, requestID string
	state             reqState
	msg               string
}

func (e *stateError) Error() string { return e.msg }

// request is one request of a turn and what became of it.
type request struct {
	b       *inputBoard // the turn's requests: who asks, the approval model
	state   reqState
	req     protocol.InputRequest
	plan    work.CallPlan
	stepIdx int
	opened  time.Time
	// deadline is when it expires unanswered (zero: never; changeDeadlines).
	deadline time.Time
	// asked: a running call asked it (changeAsk). onceFor: approving it
	// approves this tool for the session too (approval.AskOnce).
	asked   bool
	onceFor string
	// How it closed; decider settled it, approver approved it (the tool's
	// context carries the approver; changeResponses).
	decision
	decider, approver *auth.Principal
	// candidates counts the responses put to its policies, judging those
	// still waiting; refused are the ones refused (the decision record;
	// changeDecisions), editRefusal why an edit last was.
	candidates, judging int
	refused             []protocol.DecisionCandidate
	editRefusal         string
	// schema checks a question's answer, editSchema an edit (compiled once).
	schema, editSchema *schema.Schema
	// follow: its reminders and escalation (changeFollowUps).
	follow followState
	// order is when it was asked among the turn's requests and those its
	// children proxied (inputBoard.asked; prompts).
	order int
}

// decision is how an answer settles a request.
type decision struct {
	res protocol.InputResolution
	// output is a question's answer: the client tool's result.
	output json.RawMessage
	// reason is why a person denied an approval.
	reason string
	// edit is a person's edit of the call's input (approval.Policy.Editable).
	edited *inputEdit
}

// followState is what a request's follow-ups are due to do (reminders'
// times, escalatesAt; watch sets them) and what they did.
type followState struct {
	reminders   []time.Time
	escalatesAt time.Time
	reminded    int
	escalatedAt time.Time
	escalation  *approval.Escalation
}

// event is one event a transition asks the turn to record.
type event struct {
	typ  string
	data any
}

// notice is a call of the worker's reminder hook a transition asks for;
// key tells its attempts apart from the request's other notices.
type notice struct {
	key string
	rm  tools.Reminder
}

// effects is what a transition returns for the turn to record: events, in
// order, then input.resolved for resolved (and the decisions), then the
// notice. refused are the candidates it ended without settling (the
// respond Update's answer says so; nothing is recorded of them here).
type effects struct {
	events   []event
	resolved []protocol.InputResolution
	notice   *notice
	refused  []protocol.Refusal
}

// add appends o's effects to e's.
func (e *effects) add(o effects) {
	e.events = append(e.events, o.events...)
	e.resolved = append(e.resolved, o.resolved...)
	e.refused = append(e.refused, o.refused...)
	if o.notice != nil {
		e.notice = o.notice
	}
}

// Request ids derive from the call, so a crash between emitting and
// checkpointing can never change one. A subagent's turn puts its session's
// tag in them (turn.requestTag, changeSubagentRequestIDs): models number
// call ids per conversation, so without it sibling children ask the root
// with the same ids.
func approvalRequestID(callID, tag string) string { return "apr_" + tagged(callID, tag) }
func questionRequestID(callID, tag string) string { return "inp_" + tagged(callID, tag) }

func tagged(callID, tag string) string {
	if tag == "" {
		return callID
	}
	return tag + "_" + callID
}

// sessionTag is a session's short component of its request ids: 8 hex
// digits of a hash of its id (a subagent's child session id is itself a
// hash, signals.SubagentSessionID, so siblings' tags differ).
func sessionTag(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "s" + hex.EncodeToString(sum[:4])
}

// newApprovalRequest asks about a call; withPrompt (changeResponses) puts
// the plan's prompt, built from the input, in place of "Approve <Tool>?".
func newApprovalRequest(p work.CallPlan, stepIdx int, reason string, withPrompt bool, tag string) *request {
	prompt := fmt.Sprintf("Approve %s?", p.Title)
	if withPrompt && p.Prompt != "" {
		prompt = p.Prompt
	}
	if reason != "" {
		prompt += " (" + reason + ")"
	}
	return &request{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
		Action:  toolCallAction(p.Call),
		Display: protocol.DisplayConfirmation,
		Kind:    protocol.KindToolApproval,
		Options: []protocol.InputOption{
			{ID: "approve", Label: "Approve", Style: "primary"},
			{ID: "cancel", Label: "Cancel", Style: "danger"},
		},
		Prompt:    prompt,
		RequestID: approvalRequestID(p.Call.ID, tag),
	}}
}

// newQuestionRequest asks a client tool's question.
func newQuestionRequest(p work.CallPlan, stepIdx int, tag string) *request {
	q := p.Request
	return &request{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
		Action:        toolCallAction(p.Call),
		AllowFreeform: q.AllowFreeform,
		Display:       q.Display,
		Kind:          protocol.KindQuestion,
		Options:       q.Options,
		Prompt:        q.Prompt,
		RequestID:     questionRequestID(p.Call.ID, tag),
	}}
}

// newAskedRequest is the question a running call asks (tools.Context.Ask):
// its answer is the question's, not the tool's output.
func newAskedRequest(p work.CallPlan, stepIdx int, req protocol.InputRequest) *request {
	p.Request = &tools.InputRequest{Prompt: req.Prompt, Display: req.Display, Options: req.Options, AllowFreeform: req.AllowFreeform}
	p.OutputSchema = nil
	req.Kind = protocol.KindQuestion
	req.Action = toolCallAction(p.Call)
	req.Deadline, req.NextReminderAt, req.EscalatesAt = nil, nil, nil // the turn's to say (requested)
	return &request{plan: p, stepIdx: stepIdx, req: req, asked: true}
}

// require is the guard: it refuses action unless the request is in one of
// the states from.
func (r *request) require(action string, from ...reqState) error {
	if slices.Contains(from, r.state) {
		return nil
	}
	e := &stateError{action: action, requestID: r.req.RequestID, state: r.state}
	switch r.state {
	case reqExpired:
		e.msg = fmt.Sprintf("expired at its deadline (%s): nobody answered in time, and the turn went on without it", r.deadline.UTC().Format(time.RFC3339))
	case reqSettled, reqWithdrawn, reqCancelled:
		e.msg = fmt.Sprintf("already settled (%s)", r.res.Outcome)
	default:
		e.msg = fmt.Sprintf("request %s is %s: it cannot %s", r.req.RequestID, r.state, action)
	}
	return e
}

// refuse is a transition the request's state allows but its data does not.
func (r *request) refuse(action, why string) error {
	return &stateError{action: action, requestID: r.req.RequestID, state: r.state, msg: fmt.Sprintf("request %s cannot %s: %s", r.req.RequestID, action, why)}
}

// close ends the request with d. Approving a call of a tool whose policy
// is Once (or AskOnce's) approves the tool for the rest of the session.
func (r *request) close(s reqState, d decision) {
	r.state, r.decision = s, d
	if d.res.Outcome != protocol.OutcomeApproved {
		return
	}
	if r.plan.Approval == approval.KindOnce {
		r.b.approveOnce(r.plan.Call.Name)
	}
	if r.onceFor != "" {
		r.b.approveOnce(r.onceFor)
	}
}

func (r *request) stepRef() protocol.StepRef {
	return protocol.StepRef{Sequence: r.b.sequence, StepIndex: r.stepIdx, TurnID: r.b.turnID}
}

// approval reports whether the request is a tool approval under eve 0.3's
// approval model (changeResponses), whose settlement approval.settled
// records.
func (r *request) approval() bool {
	return r.b.responses && r.req.Kind == protocol.KindToolApproval
}

// judged reports whether a response to the request goes through its
// tool's response policy.
func (r *request) judged() bool { return r.approval() && r.plan.ResponsePolicy }

// refusedResponder says why responder may not settle the request by
// default (an approval without a response policy: the requester's alone);
// "" when it may.
func (r *request) refusedResponder(responder *auth.Principal) string {
	if !r.approval() || r.plan.ResponsePolicy || approval.MayRespond(r.b.requester, responder) {
		return ""
	}
	return approval.ReasonRequesterOnly
}

// candidateVia reports whether d goes through a candidate: a response
// policy judges the request, or d edits the call.
func (r *request) candidateVia(d decision) bool { return r.judged() || d.edited != nil }

// The transitions.

// answer settles the request with a person's decision. Under eve 0.3's
// model an approval's approval.settled precedes input.resolved.
func (r *request) answer(d decision, by *auth.Principal) (effects, error) {
	if err := r.require("answer", live...); err != nil {
		return effects{}, err
	}
	r.close(reqSettled, d)
	r.decider = by
	fx := effects{resolved: []protocol.InputResolution{d.res}}
	if !r.approval() {
		return fx, nil
	}
	outcome := protocol.OutcomeCancelled
	if d.res.Outcome == protocol.OutcomeApproved {
		outcome = protocol.OutcomeApproved
		r.approver = by
	}
	fx.events = append(fx.events, event{protocol.ApprovalSettled, protocol.ApprovalSettledData{
		Outcome: outcome, RequestID: r.req.RequestID, ResponderPrincipalID: principalID(by), StepRef: r.stepRef(),
	}})
	return fx, nil
}

// candidate is one response waiting for its tool's policies.
type candidate struct {
	id        string
	r         *request
	d         decision
	resp      protocol.InputResponse
	responder *auth.Principal
	// refused is set for a response refused without running a policy.
	refused string
}

// propose puts a response to the request's policies: it waits as a
// candidate (judge records it pending, then concludes it).
func (r *request) propose(d decision, resp protocol.InputResponse, by *auth.Principal) (*candidate, error) {
	if err := r.require("propose", live...); err != nil {
		return nil, err
	}
	r.candidates++
	r.judging++
	r.state = reqCandidate
	return &candidate{id: fmt.Sprintf("cnd_%s.%d", r.req.RequestID, r.candidates), r: r, d: d, resp: resp, responder: by}, nil
}

// pending is approval.candidate "pending": the candidate goes to its policies.
func (c *candidate) pending() effects {
	return effects{events: []event{c.event(protocol.CandidatePending, "")}}
}

func (c *candidate) event(outcome, reason string) event {
	return event{protocol.ApprovalCandidate, protocol.ApprovalCandidateData{
		CandidateID: c.id, Outcome: outcome, RequestID: c.r.req.RequestID,
		ResponderPrincipalID: principalID(c.responder), Reason: reason, StepRef: c.r.stepRef(),
	}}
}

// conclude ends a candidate with its policies' verdict (err: they did not
// decide; a candidate refused without a policy has none). Allowed, it
// settles the request (answer); otherwise it ends rejected, failed,
// timed-out or stale, is kept for the decision record, and the request
// stays as it was (open again once no other candidate waits).
func (r *request) conclude(c *candidate, v approval.Verdict, err error, now time.Time) (effects, error) {
	if e := r.require("conclude", reqCandidate, reqSettled, reqExpired, reqWithdrawn, reqCancelled); e != nil {
		return effects{}, e
	}
	if c.r != r || r.judging == 0 {
		return effects{}, r.refuse("conclude", fmt.Sprintf("candidate %s does not wait on it", c.id))
	}
	r.judging--
	outcome, reason := protocol.CandidateRejected, c.refused
	if c.refused == "" {
		switch {
		case r.state.closed():
			outcome, reason = protocol.CandidateStale, "The request was settled before this response was verified."
		case err != nil:
			outcome, reason = candidateFailure(err)
		case v.Status == approval.Allowed:
			return r.answer(c.d, c.responder)
		default:
			reason = v.Reason
			if reason == "" {
				reason = "The approval policy rejected this response."
			}
		}
	}
	if r.state.closed() && outcome == protocol.CandidateRejected {
		outcome = protocol.CandidateStale
	}
	if c.d.edited != nil {
		r.editRefusal = reason
	}
	if r.judging == 0 && r.state == reqCandidate {
		r.state = reqOpen
	}
	r.refused = append(r.refused, protocol.DecisionCandidate{
		CandidateID: c.id, Principal: principalRef(c.responder), Outcome: outcome, Reason: reason, At: stamp(now),
	})
	return effects{events: []event{c.event(outcome, reason)},
		refused: []protocol.Refusal{{RequestID: r.req.RequestID, CandidateID: c.id, Outcome: outcome, Reason: reason, Edited: c.d.edited != nil}}}, nil
}

// candidateFailure is how policies that did not decide end their candidate.
func candidateFailure(err error) (string, string) {
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) || (errors.As(err, &appErr) && appErr.Type() == work.ErrTypeResponseTimeout) {
		return protocol.CandidateTimedOut, work.ReasonResponseTimedOut
	}
	return protocol.CandidateFailed, work.ReasonResponseFailed
}

// edit admits a person's edit into the decision that carries it: the
// editor is recorded (the decision record, the model's note).
func (r *request) edit(d decision, by *auth.Principal) (decision, error) {
	if err := r.require("edit", live...); err != nil {
		return decision{}, err
	}
	if d.edited == nil {
		return d, nil
	}
	if r.req.Kind != protocol.KindToolApproval || !r.plan.Editable {
		return decision{}, r.refuse("edit", "its tool takes no edited input (approval.Policy.Editable)")
	}
	e := *d.edited
	e.by = by
	d.edited = &e
	d.res.EditedBy = principalRef(by)
	if d.res.EditedBy == nil {
		d.res.EditedBy = &protocol.PrincipalRef{ID: auth.TypeAnonymous, Type: auth.TypeAnonymous}
	}
	return d, nil
}

// expire settles an unanswered request at its deadline: outcome expired
// (approval.settled too, for an approval), then input.resolved; the call
// reads that nobody answered (expiredOutcome).
func (r *request) expire() (effects, error) {
	if err := r.require("expire", live...); err != nil {
		return effects{}, err
	}
	if r.deadline.IsZero() {
		return effects{}, r.refuse("expire", "it has no deadline")
	}
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeExpired, RequestID: r.req.RequestID}
	r.close(reqExpired, decision{res: res})
	fx := effects{resolved: []protocol.InputResolution{res}}
	if r.approval() {
		fx.events = append(fx.events, event{protocol.ApprovalSettled, protocol.ApprovalSettledData{Outcome: protocol.OutcomeExpired, RequestID: r.req.RequestID, StepRef: r.stepRef()}})
	}
	return fx, nil
}

// withdraw settles the request for a steering message: an approval as
// ignored (the call does not run), a question as cancelled.
func (r *request) withdraw() (effects, error) {
	if err := r.require("withdraw", live...); err != nil {
		return effects{}, err
	}
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeCancelled, RequestID: r.req.RequestID}
	if r.req.Kind == protocol.KindToolApproval {
		res.Outcome = protocol.OutcomeIgnored
	}
	r.close(reqWithdrawn, decision{res: res})
	return effects{resolved: []protocol.InputResolution{res}}, nil
}

// cancel settles the request of a turn (or a running call) that stopped
// waiting before anyone answered.
func (r *request) cancel() (effects, error) {
	if err := r.require("cancel", live...); err != nil {
		return effects{}, err
	}
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeCancelled, RequestID: r.req.RequestID}
	r.close(reqCancelled, decision{res: res})
	return effects{resolved: []protocol.InputResolution{res}}, nil
}

// remind records the reminder due at at (input.reminder) and asks for the
// hook's notice; a deadline that is due refuses it (the request expires
// instead).
func (r *request) remind(at, now time.Time) (effects, error) {
	if err := r.require("remind", live...); err != nil {
		return effects{}, err
	}
	if !now.Before(r.deadline) {
		return effects{}, r.refuse("remind", "its deadline is due")
	}
	r.follow.reminded++
	n := r.follow.reminded
	return effects{
		events: []event{{protocol.InputReminder, protocol.InputReminderData{RequestID: r.req.RequestID, At: at, Deadline: r.deadline, Number: n, StepRef: r.stepRef()}}},
		notice: r.notice(fmt.Sprint(n), func(rm *tools.Reminder) { rm.At, rm.Number = at, n }),
	}, nil
}

// escalate widens who may settle the request: the inbox lists it for the
// second group (openKey), and its response policy sees it as escalated.
func (r *request) escalate(e *approval.Escalation, now time.Time) (effects, error) {
	if err := r.require("escalate", live...); err != nil {
		return effects{}, err
	}
	if !r.follow.escalatedAt.IsZero() {
		return effects{}, r.refuse("escalate", "it escalated already")
	}
	r.follow.escalatedAt, r.follow.escalation = now, e
	return effects{
		events: []event{{protocol.ApprovalEscalated, protocol.ApprovalEscalatedData{RequestID: r.req.RequestID, At: now, Group: e.GroupLabel(), StepRef: r.stepRef()}}},
		notice: r.notice("escalation", func(rm *tools.Reminder) {
			rm.At, rm.Escalation, rm.EscalationAttribute, rm.EscalationValue = now, e.GroupLabel(), e.Attribute, e.Value
		}),
	}, nil
}

// notice is what the worker's hook is told of the request.
func (r *request) notice(key string, set func(*tools.Reminder)) *notice {
	b := r.b
	rm := tools.Reminder{SessionID: b.session.ID, TurnID: b.turnID, RequestID: r.req.RequestID, Kind: r.req.Kind,
		ToolName: r.req.Action.ToolName, Prompt: r.req.Prompt, Requester: b.requester, Owner: b.session.Auth.Initiator,
		OpenedAt: r.opened, Deadline: r.deadline,
		IdempotencyKey: b.session.ID + "/" + b.turnID + "/" + r.req.RequestID + "/" + key}
	set(&rm)
	return &notice{key: key, rm: rm}
}

// followUps is what a request's plan and the agent ask for: its own
// deadline (an approval's policy's, per call), reminders, escalation.
type followUps struct {
	on              bool // changeFollowUps
	requestDeadline time.Duration
	reminders       *tools.Reminders
	escalation      *approval.Escalation
}

// followUps reads what the request's plan asks for (reminders: the
// agent's when the tool sets none); on is left to the caller's version.
func (r *request) followUps(reminders *tools.Reminders) followUps {
	p := r.plan
	fu := followUps{reminders: p.Reminders, escalation: p.Escalation}
	if fu.reminders == nil {
		fu.reminders = reminders
	}
	if r.req.Kind == protocol.KindToolApproval {
		fu.requestDeadline = p.RequestDeadline // not a question the running call asks
	}
	if r.req.Kind != protocol.KindToolApproval || !r.judged() {
		fu.escalation = nil
	}
	if fu.requestDeadline == 0 && fu.reminders == nil && fu.escalation == nil {
		return followUps{}
	}
	return fu
}

// any reports whether the request asks for follow-ups at all.
func (fu followUps) any() bool {
	return fu.requestDeadline != 0 || fu.reminders != nil || fu.escalation != nil
}

// deadlineAfter is how long the request waits: the call's own deadline
// (changeFollowUps), else the tool's, else the agent's (0: none; a
// negative one turns those after it off).
func (r *request) deadlineAfter(fu followUps, agent time.Duration) time.Duration {
	if fu.on && fu.requestDeadline != 0 {
		return max(fu.requestDeadline, 0)
	}
	d := r.plan.InputDeadline
	if d == 0 {
		d = agent
	}
	return max(d, 0)
}

// reminderTimes are when the request's reminders are due.
func (r *request) reminderTimes(fu followUps) []time.Time {
	return fu.reminders.Times(r.opened, r.deadline)
}

// escalates reports whether e falls before the request's deadline.
func (r *request) escalates(e *approval.Escalation) bool {
	return r.deadline.IsZero() || r.opened.Add(e.After).Before(r.deadline)
}

// timed reports whether the request has a deadline, a reminder or an
// escalation still to come.
func (r *request) timed() bool {
	return !r.deadline.IsZero() || r.follow.reminded < len(r.follow.reminders) || (!r.follow.escalatesAt.IsZero() && r.follow.escalatedAt.IsZero())
}

// requested is the request as input.requested shows it, with its times
// (changeRequestTimes): its deadline, its next reminder and when it
// escalates, each when set.
func (r *request) requested() protocol.InputRequest {
	q := r.req
	at := func(t time.Time) *time.Time { return &t }
	if !r.deadline.IsZero() {
		q.Deadline = at(r.deadline)
	}
	if n := r.follow.reminded; n < len(r.follow.reminders) {
		q.NextReminderAt = at(r.follow.reminders[n])
	}
	if !r.follow.escalatesAt.IsZero() && r.follow.escalatedAt.IsZero() {
		q.EscalatesAt = at(r.follow.escalatesAt)
	}
	return q
}

// decisionRecord is decision.recorded for res, the resolution that closed
// the request, at now.
func (r *request) decisionRecord(res protocol.InputResolution, now time.Time) protocol.Decision {
	d := protocol.Decision{
		SessionID: r.b.session.ID,
		TurnID:    r.b.turnID,
		RequestID: r.req.RequestID,
		Kind:      r.req.Kind,
		ToolName:  r.req.Action.ToolName,
		CallID:    r.req.Action.CallID,
		Prompt:    r.req.Prompt,
		Input:     r.req.Action.Input,
		Requester: principalRef(r.b.requester),
		AskedAt:   stamp(r.opened),
		DecidedAt: stamp(now),
		Outcome:   res.Outcome,
		Note:      r.reason,
		Withdrawn: r.state == reqWithdrawn,
	}
	if !r.deadline.IsZero() {
		dl := stamp(r.deadline)
		d.Deadline = &dl
	}
	if res.Response != nil {
		d.OptionID, d.Text = res.Response.OptionID, res.Response.Text
		if d.Outcome == protocol.OutcomeDenied {
			d.Text = "" // a denial's text is its note
		}
	}
	if r.state != reqExpired && r.state != reqWithdrawn && res.Response != nil {
		d.Decider = principalRef(r.b.responder(r.decider))
	}
	if r.edited != nil {
		d.EditedInput = r.edited.input // approved with edits (changeEdits)
	}
	d.Candidates = append(d.Candidates, r.refused...)
	if at := r.follow.escalatedAt; !at.IsZero() {
		s := stamp(at)
		d.EscalatedAt = &s
	}
	if o := r.b.origin; o != nil {
		d.RootSessionID, d.Path, d.Depth = o.RootSessionID, o.Path, o.Depth()
	}
	return d
}

// escalatedRequest tells a response policy whether the request escalated.
func (r *request) escalatedRequest(req *approval.Request) {
	if at := r.follow.escalatedAt; !at.IsZero() {
		req.EscalatedAt, req.Escalation = &at, r.follow.escalation.GroupLabel()
	}
}

// inboxEntry is what the inbox publishes of the open request.
func (r *request) inboxEntry() signals.InboxEntry {
	e := signals.InboxEntry{Request: r.req, OpenedAt: r.opened, Judged: r.judged(), Editable: r.plan.Editable, InputSchema: r.plan.InputSchema}
	if !r.deadline.IsZero() {
		d := r.deadline
		e.Deadline = &d
	}
	if at := r.follow.escalatedAt; !at.IsZero() {
		x := r.follow.escalation
		e.EscalatedAt = &at
		e.Escalation = &signals.InboxEscalation{Group: x.GroupLabel(), Attribute: x.Attribute, Value: x.Value}
	}
	if b, _ := json.Marshal(e); len(b) > signals.MaxInboxEntryBytes {
		e.InputSchema = nil // the tool's schema goes first
	}
	if b, _ := json.Marshal(e); len(b) > signals.MaxInboxEntryBytes {
		e.Request.Action.Input = json.RawMessage(`{}`)
	}
	return e
}

// callOutcome is what the call that asked reads of its closed request;
// runs reports that it was approved and runs instead. answer: the call's
// result is the person's answer (a client tool).
func (r *request) callOutcome(tool string, answer bool) (out work.ToolOutcome, runs bool) {
	switch {
	case r.state == reqExpired:
		return expiredOutcome(tool, r), false
	case r.state == reqWithdrawn:
		return withdrawnOutcome(r.plan, r), false
	case answer:
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: r.output}, false
	case r.res.Outcome != protocol.OutcomeApproved:
		return denied(tool, r.reason, true), false
	}
	return work.ToolOutcome{}, true
}

// expiredOutcome is what the model reads of a call whose person never
// answered.
func expiredOutcome(tool string, r *request) work.ToolOutcome {
	what := "approval"
	if r.req.Kind == protocol.KindQuestion {
		what = "question"
	}
	msg := fmt.Sprintf("Nobody answered the %s for %s before its deadline (%s); the tool did not run. Go on without it, or ask again if it is still needed.",
		what, tool, r.deadline.Sub(r.opened))
	out, _ := json.Marshal(map[string]string{"error": msg, "code": protocol.CodeInputExpired})
	return work.ToolOutcome{Status: protocol.StatusRejected, Output: out, Error: &protocol.ActionError{Code: protocol.CodeInputExpired, Message: msg}}
}

func principalID(p *auth.Principal) string {
	if p == nil {
		return auth.TypeAnonymous
	}
	return p.ID
}

// principalRef is p in the decision record; nil for an anonymous caller.
func principalRef(p *auth.Principal) *protocol.PrincipalRef {
	if p == nil {
		return nil
	}
	return &protocol.PrincipalRef{ID: p.ID, Type: p.Type}
}

// stamp is a time of the record at the precision of an event's meta.at,
// so a decision's times match the events it sums up.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// inputBoard is a turn's requests, in the order they were made, and what
// they share: who asks, the approval model, and the tools the session
// approved once.
type inputBoard struct {
	requests []*request
	byID     map[string]*request
	approved []string // tools approved once in this session
	// session is who the turn runs for; requester asked for its calls
	// (nil: an anonymous caller, whom nobody matches).
	session   auth.Session
	requester *auth.Principal
	turnID    string
	sequence  int
	// responses: eve 0.3's approval model (changeResponses).
	responses bool
	// origin: the session is a subagent's child (turnInput.Origin).
	origin *protocol.SubagentOrigin
	// asked counts the requests asked, the turn's and those its children
	// proxied (request.order, relayed.order).
	asked int
}

func newInputBoard(in turnInput, responses bool) *inputBoard {
	b := &inputBoard{byID: map[string]*request{}, approved: append([]string(nil), in.ApprovedTools...),
		session: auth.Session{ID: in.SessionID, Auth: in.Auth}, turnID: in.TurnID, sequence: in.Sequence, responses: responses,
		origin: in.Origin}
	if c := in.Auth.Current; c != nil && c.Type != auth.TypeAnonymous {
		b.requester = c
	}
	return b
}

// add opens a request on the board.
func (b *inputBoard) add(r *request, opened time.Time) *request {
	r.b, r.opened = b, opened
	b.asked++
	r.order = b.asked
	b.requests = append(b.requests, r)
	b.byID[r.req.RequestID] = r
	return r
}

// responder is who sent an answer: a respond request without one comes
// from a trusted in-process client (no API server named a caller), and
// counts as the requester.
func (b *inputBoard) responder(p *auth.Principal) *auth.Principal {
	if p == nil {
		return b.requester
	}
	return p
}

// open lists the requests nobody settled, in the order they were made.
func (b *inputBoard) open() []protocol.InputRequest {
	var out []protocol.InputRequest
	for _, r := range b.requests {
		if !r.state.closed() {
			out = append(out, r.req)
		}
	}
	return out
}

func (b *inputBoard) openIDs() string {
	ids := []string{}
	for _, r := range b.open() {
		ids = append(ids, r.RequestID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

func (b *inputBoard) approvalOpen() bool {
	for _, r := range b.requests {
		if !r.state.closed() && r.req.Kind == protocol.KindToolApproval {
			return true
		}
	}
	return false
}

// waitingTools names the tools whose calls wait for people.
func (b *inputBoard) waitingTools() []string {
	var names []string
	for _, r := range b.open() {
		if !slices.Contains(names, r.Action.ToolName) {
			names = append(names, r.Action.ToolName)
		}
	}
	return names
}

// approvedOnce reports whether the session approved the tool once
// (approval.Once).
func (b *inputBoard) approvedOnce(tool string) bool { return slices.Contains(b.approved, tool) }

func (b *inputBoard) approveOnce(tool string) {
	if !slices.Contains(b.approved, tool) {
		b.approved = append(b.approved, tool)
	}
}

// inputs is what the session is told of the open requests: its mirror
// only routes typed answers.
func (b *inputBoard) inputs() signals.TurnInputs {
	in := signals.TurnInputs{TurnID: b.turnID, Open: b.open()}
	for _, r := range b.requests {
		if !r.state.closed() && r.judged() {
			in.Judged = append(in.Judged, r.req.RequestID)
		}
	}
	return in
}

// check validates a whole batch: any bad answer rejects all of it.
func (b *inputBoard) check(req signals.RespondRequest) error {
	if len(req.Responses) == 0 {
		return errors.New("no responses: send at least one {requestId, optionId?, text?}")
	}
	seen := map[string]bool{}
	for i, resp := range req.Responses {
		if err := b.checkOne(resp, seen); err != nil {
			return fmt.Errorf("response %d (requestId %q): %w", i+1, resp.RequestID, err)
		}
	}
	return nil
}

func (b *inputBoard) checkOne(resp protocol.InputResponse, seen map[string]bool) error {
	r := b.byID[resp.RequestID]
	if r == nil {
		return fmt.Errorf("unknown request id (open requests: %s)", b.openIDs())
	}
	if seen[resp.RequestID] {
		return errors.New("answered twice in one batch")
	}
	seen[resp.RequestID] = true
	if r.state.closed() {
		if r.state != reqExpired && r.res.Response != nil && sameResponse(*r.res.Response, resp) {
			return nil // a repeat of the applied answer: accepted, changes nothing
		}
		return r.require("answer", live...)
	}
	d, err := r.decide(resp)
	if err != nil {
		return err
	}
	// The plan's limit (0 in plans recorded before limits: unchecked).
	if limit := r.plan.MaxOutputBytes; limit > 0 && len(d.output) > limit {
		return fmt.Errorf("the answer makes an output of %d bytes; tool %s accepts at most %d (tools.Tool.MaxOutputBytes): send a shorter answer",
			len(d.output), r.plan.Call.Name, limit)
	}
	return nil
}

// checkResponders rejects a batch (the respond Update's validator) when it
// answers an approval its responder may not settle by default.
func (b *inputBoard) checkResponders(req signals.RespondRequest) error {
	responder := b.responder(req.Responder)
	for i, resp := range req.Responses {
		r := b.byID[resp.RequestID]
		if r == nil || r.state.closed() {
			continue
		}
		if why := r.refusedResponder(responder); why != "" {
			return fmt.Errorf("response %d (requestId %q): %s Tool %s sets no response policy; give its approval policy one (approval.Policy.WithResponse) to let others decide",
				i+1, resp.RequestID, why, r.plan.Call.Name)
		}
	}
	return nil
}

// taken is what a respond batch did on the board: what it settled (and
// the invalid answers of a signal, which settle nothing), the candidates
// its policies judge next, the repeats of settled answers.
type taken struct {
	effects
	judged     []*candidate
	duplicates []string
	invalid    []invalidAnswer
}

// invalidAnswer is an answer in a signal that its check refused.
type invalidAnswer struct {
	requestID string
	err       error
}

// take applies a respond batch. The Update's batch was checked whole by
// its validator (check, checkResponders); a signal's is checked here, an
// invalid answer recorded as such, and a response its sender may not give
// becomes a refused candidate (there is nobody to return an error to).
// admit readies an edit for its candidate (admitEdit).
func (b *inputBoard) take(req signals.RespondRequest, signal bool, admit func(*request, decision, *auth.Principal) decision) taken {
	var out taken
	responder := b.responder(req.Responder)
	seen := map[string]bool{}
	for _, resp := range req.Responses {
		r := b.byID[resp.RequestID]
		if signal {
			if err := b.checkOne(resp, seen); err != nil {
				kind := protocol.KindQuestion
				if r != nil {
					kind = r.req.Kind
				}
				rc := resp
				out.resolved = append(out.resolved, protocol.InputResolution{Kind: kind, Outcome: protocol.OutcomeInvalid, RequestID: resp.RequestID, Response: &rc})
				out.invalid = append(out.invalid, invalidAnswer{resp.RequestID, err})
				continue
			}
		} else if r == nil {
			continue
		}
		if r.state.closed() {
			if !signal {
				out.duplicates = append(out.duplicates, resp.RequestID)
			}
			continue
		}
		d, err := r.decide(resp)
		if err != nil {
			continue // checked before; cannot happen for updates
		}
		if signal {
			d = admit(r, d, responder)
			if why := r.refusedResponder(responder); why != "" {
				c, _ := r.propose(d, resp, responder)
				c.refused = why
				out.judged = append(out.judged, c)
				continue
			}
		}
		if r.candidateVia(d) {
			if !signal {
				d = admit(r, d, responder)
			}
			c, _ := r.propose(d, resp, responder)
			out.judged = append(out.judged, c)
			continue
		}
		fx, _ := r.answer(d, responder)
		out.add(fx)
	}
	return out
}

// withdraw settles every open request for a steering message.
func (b *inputBoard) withdraw() effects {
	var fx effects
	for _, r := range b.requests {
		if w, err := r.withdraw(); err == nil {
			fx.add(w)
		}
	}
	return fx
}

// cancelAsked cancels what a running call asked and nobody answered before
// it ended (it stopped waiting: cancelled, timed out).
func (b *inputBoard) cancelAsked(callID string) effects {
	var fx effects
	for _, r := range b.requests {
		if r.asked && !r.state.closed() && r.plan.Call.ID == callID {
			if c, err := r.cancel(); err == nil {
				fx.add(c)
			}
		}
	}
	return fx
}

// refusedEdit says why the policies refused the edits of a batch that
// settled none of them ("" when an edit settled its request, or none was
// refused): the respond Update's RespondResult.EditRefused.
func (b *inputBoard) refusedEdit(req []protocol.InputResponse) string {
	var why []string
	for _, resp := range req {
		r := b.byID[resp.RequestID]
		if r == nil || !hasEdit(resp) || r.editRefusal == "" {
			continue
		}
		if r.state.closed() && r.edited != nil && sameJSON(r.edited.input, resp.Input) {
			return "" // an edit settled its request: the batch did something
		}
		why = append(why, fmt.Sprintf("request %s: %s", resp.RequestID, r.editRefusal))
		r.editRefusal = ""
	}
	return strings.Join(why, "; ")
}

// openKey identifies the set of open requests and their escalations.
func (b *inputBoard) openKey() string {
	var ids []string
	for _, r := range b.requests {
		if !r.state.closed() {
			id := r.req.RequestID
			if !r.follow.escalatedAt.IsZero() {
				id += "\x01escalated" // republished when it escalates
			}
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, "\x00")
}
