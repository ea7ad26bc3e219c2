package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// inputBoard is what a turn asked people and what they decided: its input
// requests in the order they were made, and the tools the session approved
// once. The respond handlers settle requests on it; the calls waiting for
// people watch it (turn.await).
type inputBoard struct {
	requests []*openRequest
	byID     map[string]*openRequest
	approved []string // tools approved once in this session
}

func newInputBoard(approved []string) inputBoard {
	return inputBoard{byID: map[string]*openRequest{}, approved: append([]string(nil), approved...)}
}

// openRequest is one input request of the turn and how it was settled.
type openRequest struct {
	opened  time.Time
	req     protocol.InputRequest
	plan    work.CallPlan
	stepIdx int
	settled bool
	decision
	schema *schema.Schema
	// withdrawn: a steering message settled it.
	withdrawn bool
	// approver approved it (changeResponses); candidates counts the
	// responses its response policy judged.
	approver   *auth.Principal
	candidates int
	// deadline is when the request expires unanswered (zero: never);
	// expired: it did (changeDeadlines).
	deadline time.Time
	expired  bool
	// decider settled it; refused are the responses its response policy
	// refused first (changeDecisions: the decision record).
	decider *auth.Principal
	refused []protocol.DecisionCandidate
	// asked: a running call asked it (changeAsk).
	asked bool
	// onceFor: approving it approves this tool for the session too
	// (approval.AskOnce).
	onceFor string
	// editSchema checks edits (compiled once); editRefusal is why the
	// policies last refused an edit of it (edits.go).
	editSchema  *schema.Schema
	editRefusal string
	// follow: its reminders and escalation (followups.go).
	follow followState
}

// decision is how an answer settles a request.
type decision struct {
	res protocol.InputResolution
	// output is a question's answer: the client tool's result.
	output json.RawMessage
	// reason is why a person denied an approval.
	reason string
	// edit is a person's edit of the call's input (approval.Policy.Editable).
	edit *inputEdit
}

// Request ids derive from the call, so a crash between emitting and
// checkpointing can never change one.
func approvalRequestID(callID string) string { return "apr_" + callID }
func questionRequestID(callID string) string { return "inp_" + callID }

// newApprovalRequest asks about a call; withPrompt (changeResponses) puts
// the plan's prompt, built from the input, in place of "Approve <Tool>?".
func newApprovalRequest(p work.CallPlan, stepIdx int, reason string, withPrompt bool) *openRequest {
	prompt := fmt.Sprintf("Approve %s?", p.Title)
	if withPrompt && p.Prompt != "" {
		prompt = p.Prompt
	}
	if reason != "" {
		prompt += " (" + reason + ")"
	}
	return &openRequest{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
		Action:  toolCallAction(p.Call),
		Display: protocol.DisplayConfirmation,
		Kind:    protocol.KindToolApproval,
		Options: []protocol.InputOption{
			{ID: "approve", Label: "Approve", Style: "primary"},
			{ID: "cancel", Label: "Cancel", Style: "danger"},
		},
		Prompt:    prompt,
		RequestID: approvalRequestID(p.Call.ID),
	}}
}

func newQuestionRequest(p work.CallPlan, stepIdx int) *openRequest {
	q := p.Request
	return &openRequest{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
		Action:        toolCallAction(p.Call),
		AllowFreeform: q.AllowFreeform,
		Display:       q.Display,
		Kind:          protocol.KindQuestion,
		Options:       q.Options,
		Prompt:        q.Prompt,
		RequestID:     questionRequestID(p.Call.ID),
	}}
}

// add puts a request on the board.
func (b *inputBoard) add(r *openRequest, opened time.Time) *openRequest {
	r.opened = opened
	b.requests = append(b.requests, r)
	b.byID[r.req.RequestID] = r
	return r
}

// open lists the unsettled requests in the order they were made.
func (b *inputBoard) open() []protocol.InputRequest {
	var out []protocol.InputRequest
	for _, r := range b.requests {
		if !r.settled {
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
		if !r.settled && r.req.Kind == protocol.KindToolApproval {
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

// settle records a request's decision. Approving a call of a tool whose
// policy is Once approves the tool for the rest of the session.
func (b *inputBoard) settle(r *openRequest, d decision) {
	r.settled = true
	r.decision = d
	if d.res.Outcome != protocol.OutcomeApproved {
		return
	}
	if r.plan.Approval == approval.KindOnce {
		b.approveOnce(r.plan.Call.Name)
	}
	if r.onceFor != "" {
		b.approveOnce(r.onceFor)
	}
}

func (b *inputBoard) approveOnce(tool string) {
	if !slices.Contains(b.approved, tool) {
		b.approved = append(b.approved, tool)
	}
}

// cancel settles an unanswered request of a cancelled turn; false when it
// was settled already.
func (b *inputBoard) cancel(r *openRequest) (protocol.InputResolution, bool) {
	if r.settled {
		return protocol.InputResolution{}, false
	}
	res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeCancelled, RequestID: r.req.RequestID}
	r.settled, r.res = true, res
	return res, true
}

// withdraw settles every open request for a steering message: approvals
// as ignored (the call does not run), questions as cancelled.
func (b *inputBoard) withdraw() []protocol.InputResolution {
	var resolutions []protocol.InputResolution
	for _, r := range b.requests {
		if r.settled {
			continue
		}
		res := protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeCancelled, RequestID: r.req.RequestID}
		if r.req.Kind == protocol.KindToolApproval {
			res.Outcome = protocol.OutcomeIgnored
		}
		b.settle(r, decision{res: res})
		r.withdrawn = true
		resolutions = append(resolutions, res)
	}
	return resolutions
}

// waitForInput records that the turn waits for people (status,
// turn.waiting) and tells the session which requests are open.
func (t *turn) waitForInput(ctx workflow.Context) {
	setStatus(ctx, t.cfg, t.in.SessionID, statusWaitingInput, t.board.waitingTools())
	t.turnWaiting(ctx, "input")
	t.parks++
	t.tellSession(ctx)
}

func (t *turn) tellSession(ctx workflow.Context) {
	// The session's mirror only routes typed answers.
	in := signals.TurnInputs{TurnID: t.in.TurnID, Open: t.board.open()}
	for _, r := range t.board.requests {
		if !r.settled && t.judged(r) {
			in.Judged = append(in.Judged, r.req.RequestID)
		}
	}
	t.tell(ctx, signals.SignalTurnInputs, in)
}

// tell signals the session by a SignalExternalWorkflow command, fire and
// forget: the command commits with this workflow task, so a task that
// fails or is retried never tells the session something its next attempt
// contradicts (docs/architecture.md, "Exactly once"; the acknowledgement
// costs the turn a workflow task).
func (t *turn) tell(ctx workflow.Context, signal string, payload any) {
	if t.parent != nil {
		workflow.SignalExternalWorkflow(ctx, t.parent.ID, "", signal, payload)
	}
}

// decide checks one answer against its request without changing anything
// (but compiling the tool's output schema, once).
func (r *openRequest) decide(resp protocol.InputResponse) (decision, error) {
	res := protocol.InputResolution{Kind: r.req.Kind, RequestID: r.req.RequestID}
	if resp.OptionID == "" && strings.TrimSpace(resp.Text) == "" {
		return decision{}, errors.New("give an optionId or text")
	}
	if err := r.checkEditable(resp); err != nil {
		return decision{}, err
	}
	if r.req.Kind == protocol.KindSessionLimit {
		return r.decideLimit(resp)
	}
	respCopy := resp
	res.Response = &respCopy
	if r.req.Kind == protocol.KindToolApproval {
		opt := resp.OptionID
		if opt == "" {
			m, ok := protocol.ResolveText(protocol.InputRequest{Options: append(r.req.Options, protocol.InputOption{ID: "deny", Label: "Deny"})}, resp.Text)
			if !ok {
				return decision{}, fmt.Errorf("text %q is neither approve nor cancel/deny", resp.Text)
			}
			opt = m.OptionID
			resp.Text = ""
		}
		switch strings.ToLower(opt) {
		case "approve":
			if resp.Text != "" {
				return decision{}, errors.New("text is only accepted with cancel/deny (as the reason)")
			}
			res.Outcome = protocol.OutcomeApproved
		case "cancel", "deny":
			res.Outcome = protocol.OutcomeDenied
			return decision{res: res, reason: strings.TrimSpace(resp.Text)}, nil
		default:
			return decision{}, fmt.Errorf("unknown option %q: a tool approval takes approve, or cancel/deny", opt)
		}
		return r.withEdit(decision{res: res}, resp)
	}
	q := r.plan.Request
	out := map[string]any{}
	switch {
	case resp.OptionID != "" && q.Multi():
		ids := strings.Split(resp.OptionID, ",")
		var picked []string
		for _, id := range ids {
			id = strings.TrimSpace(id)
			if !hasOption(r.req.Options, id) {
				return decision{}, fmt.Errorf("unknown option %q (options: %s)", id, optionIDs(r.req.Options))
			}
			if slices.Contains(picked, id) {
				return decision{}, fmt.Errorf("option %q chosen twice", id)
			}
			picked = append(picked, id)
		}
		if len(picked) < q.MinSelections || len(picked) > q.MaxSelections {
			return decision{}, fmt.Errorf("%d options chosen; choose between %d and %d", len(picked), q.MinSelections, q.MaxSelections)
		}
		out["optionIds"] = picked
	case resp.OptionID != "":
		if !hasOption(r.req.Options, resp.OptionID) {
			return decision{}, fmt.Errorf("unknown option %q (options: %s)", resp.OptionID, optionIDs(r.req.Options))
		}
		out["optionId"] = resp.OptionID
	default:
		m, ok := protocol.ResolveText(r.req, resp.Text)
		if !ok {
			return decision{}, fmt.Errorf("text %q matches no option and this question takes no free text (options: %s)", resp.Text, optionIDs(r.req.Options))
		}
		if m.OptionID != "" {
			if q.Multi() {
				out["optionIds"] = []string{m.OptionID}
			} else {
				out["optionId"] = m.OptionID
			}
		} else {
			out["text"] = resp.Text
		}
	}
	if resp.OptionID != "" && resp.Text != "" {
		if !r.req.AllowFreeform {
			return decision{}, errors.New("this question takes no free text beside the option")
		}
		out["text"] = resp.Text
	}
	raw := mustJSON(out)
	if r.schema == nil && len(r.plan.OutputSchema) > 0 {
		s, err := schema.Compile(r.plan.Call.Name+"/output", r.plan.OutputSchema)
		if err != nil {
			return decision{}, fmt.Errorf("the tool's output schema does not compile: %v", err)
		}
		r.schema = s
	}
	if r.schema != nil {
		if err := r.schema.Validate(raw); err != nil {
			return decision{}, fmt.Errorf("the answer %s breaks the tool's output schema: %v", raw, err)
		}
	}
	res.Outcome = protocol.OutcomeAnswered
	return decision{res: res, output: raw}, nil
}

func hasOption(opts []protocol.InputOption, id string) bool {
	for _, o := range opts {
		if o.ID == id {
			return true
		}
	}
	return false
}

func optionIDs(opts []protocol.InputOption) string {
	if len(opts) == 0 {
		return "none; answer with text"
	}
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.ID
	}
	return strings.Join(ids, ", ")
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
	if r.settled {
		if r.expired {
			return fmt.Errorf("expired at its deadline (%s): nobody answered in time, and the turn went on without it", r.deadline.UTC().Format(time.RFC3339))
		}
		if r.res.Response != nil && sameResponse(*r.res.Response, resp) {
			return nil // a repeat of the applied answer: accepted, changes nothing
		}
		return fmt.Errorf("already settled (%s)", r.res.Outcome)
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

// apply settles what a checked batch answers and records input.resolved.
// Answers to approvals with a response policy are judged first (judge);
// what their policies allow joins the result.
func (t *turn) apply(ctx workflow.Context, req signals.RespondRequest) signals.RespondResult {
	var result signals.RespondResult
	var judged []*candidate
	responder := t.responder(req.Responder)
	for _, resp := range req.Responses {
		r := t.board.byID[resp.RequestID]
		if r == nil {
			continue
		}
		if r.settled {
			result.Duplicates = append(result.Duplicates, resp.RequestID)
			continue
		}
		d, err := r.decide(resp)
		if err != nil {
			continue // checked before; cannot happen for updates
		}
		if t.candidateVia(r, d) {
			judged = append(judged, t.newCandidate(r, t.admitEdit(ctx, d, responder), resp, responder))
			continue
		}
		t.settleBy(ctx, r, d, responder)
		result.Resolutions = append(result.Resolutions, d.res)
	}
	t.recordResolutions(ctx, result.Resolutions)
	result.Resolutions = append(result.Resolutions, t.judge(ctx, judged)...)
	return result
}

// recordResolutions emits input.resolved (grouped by step) and, if requests
// remain open, parks again so clients reading the stream stop there.
func (t *turn) recordResolutions(ctx workflow.Context, resolutions []protocol.InputResolution) {
	if len(resolutions) == 0 {
		return
	}
	for _, res := range resolutions {
		if r := t.board.byID[res.RequestID]; r != nil {
			countInputResolved(ctx, res.Kind, res.Outcome, workflow.Now(ctx).Sub(r.opened))
		}
	}
	step := t.board.byID[resolutions[0].RequestID].stepIdx
	t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolutions, StepRef: t.step(step)})
	t.recordDecisions(ctx, resolutions)
	if len(t.board.open()) > 0 {
		t.waitForInput(ctx)
	} else {
		setStatus(ctx, t.cfg, t.in.SessionID, statusRunning, nil)
		t.tellSession(ctx)
	}
}

// registerInputHandlers installs the respond Update and Signal and the
// session's message offers. They settle requests on the board; the calls
// waiting for them (turn.await) resume.
func (t *turn) registerInputHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateRespond,
		func(ctx workflow.Context, req signals.RespondRequest) (signals.RespondResult, error) {
			parks := t.parks
			res := t.apply(ctx, req)
			res.EditRefused = t.refusedEdit(req.Responses)
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
			if err := t.board.check(req); err != nil {
				return editFailure(err)
			}
			return t.checkResponders(req)
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
				t.applySignal(ctx, req)
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
	return t.registerAsks(ctx)
}

// applySignal applies what is valid and records the rest as invalid; a
// signal never fails the workflow. A response its sender may not give, or
// one a response policy judges, becomes an approval.candidate instead
// (there is nobody to return an error to); policies run in a coroutine of
// their own, so the turn's other signals keep arriving.
func (t *turn) applySignal(ctx workflow.Context, req signals.RespondRequest) {
	var resolutions []protocol.InputResolution
	var judged []*candidate
	responder := t.responder(req.Responder)
	seen := map[string]bool{}
	for _, resp := range req.Responses {
		r := t.board.byID[resp.RequestID]
		if err := t.board.checkOne(resp, seen); err != nil {
			kind := protocol.KindQuestion
			if r != nil {
				kind = r.req.Kind
			}
			rc := resp
			resolutions = append(resolutions, protocol.InputResolution{Kind: kind, Outcome: protocol.OutcomeInvalid, RequestID: resp.RequestID, Response: &rc})
			workflow.GetLogger(ctx).Warn("invalid input response signal", "requestId", resp.RequestID, "error", err.Error())
			continue
		}
		if r.settled {
			continue
		}
		d, _ := r.decide(resp)
		d = t.admitEdit(ctx, d, responder)
		if why := t.refusedResponder(r, responder); why != "" {
			c := t.newCandidate(r, d, resp, responder)
			c.refused = why
			judged = append(judged, c)
			continue
		}
		if t.candidateVia(r, d) {
			judged = append(judged, t.newCandidate(r, d, resp, responder))
			continue
		}
		t.settleBy(ctx, r, d, responder)
		resolutions = append(resolutions, d.res)
	}
	if len(judged) > 0 {
		workflow.Go(ctx, func(ctx workflow.Context) { t.judge(ctx, judged) })
	}
	if len(resolutions) > 0 && t.board.byID[resolutions[0].RequestID] == nil {
		// Only unknown ids: record against the current step.
		t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolutions, StepRef: t.step(t.stepIdx)})
		return
	}
	t.recordResolutions(ctx, resolutions)
}
