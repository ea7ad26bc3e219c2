package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// openRequest is one input request of the turn and how it was settled.
type openRequest struct {
	opened  time.Time
	req     protocol.InputRequest
	plan    activities.CallPlan
	stepIdx int
	settled bool
	res     protocol.InputResolution
	// For questions: the tool's result. For approvals: the deny reason.
	output json.RawMessage
	reason string
	schema *schema.Schema
	// withdrawn: a steering message settled it (versionMessagePrompts).
	withdrawn bool
}

// Request ids derive from the call, so a crash between emitting and
// checkpointing can never change one.
func approvalRequestID(callID string) string { return "apr_" + callID }
func questionRequestID(callID string) string { return "inp_" + callID }

func (t *turn) newApprovalRequest(p activities.CallPlan, stepIdx int, reason string) *openRequest {
	prompt := fmt.Sprintf("Approve %s?", p.Title)
	if reason != "" {
		prompt += " (" + reason + ")"
	}
	r := &openRequest{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
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
	t.addRequest(r)
	return r
}

func (t *turn) newQuestionRequest(p activities.CallPlan, stepIdx int) *openRequest {
	q := p.Request
	r := &openRequest{plan: p, stepIdx: stepIdx, req: protocol.InputRequest{
		Action:        toolCallAction(p.Call),
		AllowFreeform: q.AllowFreeform,
		Display:       q.Display,
		Kind:          protocol.KindQuestion,
		Options:       q.Options,
		Prompt:        q.Prompt,
		RequestID:     questionRequestID(p.Call.ID),
	}}
	t.addRequest(r)
	return r
}

func (t *turn) addRequest(r *openRequest) {
	r.opened = t.now
	t.requests = append(t.requests, r)
	t.byID[r.req.RequestID] = r
}

// openRequests lists the unsettled requests in the order they were made.
func (t *turn) openRequests() []protocol.InputRequest {
	var out []protocol.InputRequest
	for _, r := range t.requests {
		if !r.settled {
			out = append(out, r.req)
		}
	}
	return out
}

// park records that the turn waits for people, and tells the session.
func (t *turn) park(ctx workflow.Context) {
	setStatus(ctx, t.cfg, t.in.SessionID, StatusWaitingInput, t.waitingTools())
	t.log.emit(ctx, protocol.TurnWaiting, protocol.TurnWaitingData{On: "input", Sequence: t.in.Sequence, TurnID: t.in.TurnID, Usage: t.usagePtr()})
	t.parks++
	t.tellSession(ctx)
}

func (t *turn) tellSession(ctx workflow.Context) {
	if t.parent == nil {
		return
	}
	// Fire and forget: the session's mirror only routes typed answers.
	workflow.SignalExternalWorkflow(ctx, t.parent.ID, "", signals.SignalTurnInputs, signals.TurnInputs{TurnID: t.in.TurnID, Open: t.openRequests()})
}

func (t *turn) usagePtr() *protocol.TokenUsage {
	u := t.usage
	return &u
}

// decide checks one answer against its request without changing anything.
// It returns the resolution and, for questions, the tool's output.
func (t *turn) decide(r *openRequest, resp protocol.InputResponse) (protocol.InputResolution, json.RawMessage, string, error) {
	res := protocol.InputResolution{Kind: r.req.Kind, RequestID: r.req.RequestID}
	if resp.OptionID == "" && strings.TrimSpace(resp.Text) == "" {
		return res, nil, "", errors.New("give an optionId or text")
	}
	respCopy := resp
	res.Response = &respCopy
	if r.req.Kind == protocol.KindToolApproval {
		opt := resp.OptionID
		if opt == "" {
			m, ok := protocol.ResolveText(protocol.InputRequest{Options: append(r.req.Options, protocol.InputOption{ID: "deny", Label: "Deny"})}, resp.Text)
			if !ok {
				return res, nil, "", fmt.Errorf("text %q is neither approve nor cancel/deny", resp.Text)
			}
			opt = m.OptionID
			resp.Text = ""
		}
		switch strings.ToLower(opt) {
		case "approve":
			if resp.Text != "" {
				return res, nil, "", errors.New("text is only accepted with cancel/deny (as the reason)")
			}
			res.Outcome = protocol.OutcomeApproved
		case "cancel", "deny":
			res.Outcome = protocol.OutcomeDenied
			return res, nil, strings.TrimSpace(resp.Text), nil
		default:
			return res, nil, "", fmt.Errorf("unknown option %q: a tool approval takes approve, or cancel/deny", opt)
		}
		return res, nil, "", nil
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
				return res, nil, "", fmt.Errorf("unknown option %q (options: %s)", id, optionIDs(r.req.Options))
			}
			if slices.Contains(picked, id) {
				return res, nil, "", fmt.Errorf("option %q chosen twice", id)
			}
			picked = append(picked, id)
		}
		if len(picked) < q.MinSelections || len(picked) > q.MaxSelections {
			return res, nil, "", fmt.Errorf("%d options chosen; choose between %d and %d", len(picked), q.MinSelections, q.MaxSelections)
		}
		out["optionIds"] = picked
	case resp.OptionID != "":
		if !hasOption(r.req.Options, resp.OptionID) {
			return res, nil, "", fmt.Errorf("unknown option %q (options: %s)", resp.OptionID, optionIDs(r.req.Options))
		}
		out["optionId"] = resp.OptionID
	default:
		m, ok := protocol.ResolveText(r.req, resp.Text)
		if !ok {
			return res, nil, "", fmt.Errorf("text %q matches no option and this question takes no free text (options: %s)", resp.Text, optionIDs(r.req.Options))
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
			return res, nil, "", errors.New("this question takes no free text beside the option")
		}
		out["text"] = resp.Text
	}
	raw := mustJSON(out)
	if r.schema == nil && len(r.plan.OutputSchema) > 0 {
		s, err := schema.Compile(r.plan.Call.Name+"/output", r.plan.OutputSchema)
		if err != nil {
			return res, nil, "", fmt.Errorf("the tool's output schema does not compile: %v", err)
		}
		r.schema = s
	}
	if r.schema != nil {
		if err := r.schema.Validate(raw); err != nil {
			return res, nil, "", fmt.Errorf("the answer %s breaks the tool's output schema: %v", raw, err)
		}
	}
	res.Outcome = protocol.OutcomeAnswered
	return res, raw, "", nil
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

// checkBatch validates a whole batch: any bad answer rejects all of it.
func (t *turn) checkBatch(req signals.RespondRequest) error {
	if len(req.Responses) == 0 {
		return errors.New("no responses: send at least one {requestId, optionId?, text?}")
	}
	seen := map[string]bool{}
	for i, resp := range req.Responses {
		if err := t.checkOne(resp, seen); err != nil {
			return fmt.Errorf("response %d (requestId %q): %w", i+1, resp.RequestID, err)
		}
	}
	return nil
}

func (t *turn) checkOne(resp protocol.InputResponse, seen map[string]bool) error {
	r := t.byID[resp.RequestID]
	if r == nil {
		return fmt.Errorf("unknown request id (open requests: %s)", t.openIDs())
	}
	if seen[resp.RequestID] {
		return errors.New("answered twice in one batch")
	}
	seen[resp.RequestID] = true
	if r.settled {
		if r.res.Response != nil && *r.res.Response == resp {
			return nil // a repeat of the applied answer: accepted, changes nothing
		}
		return fmt.Errorf("already settled (%s)", r.res.Outcome)
	}
	_, out, _, err := t.decide(r, resp)
	if err != nil {
		return err
	}
	// The plan's limit (0 in plans recorded before limits: unchecked).
	if limit := r.plan.MaxOutputBytes; limit > 0 && len(out) > limit {
		return fmt.Errorf("the answer makes an output of %d bytes; tool %s accepts at most %d (tools.Tool.MaxOutputBytes): send a shorter answer",
			len(out), r.plan.Call.Name, limit)
	}
	return nil
}

func (t *turn) openIDs() string {
	ids := []string{}
	for _, r := range t.openRequests() {
		ids = append(ids, r.RequestID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// apply settles what a checked batch answers and records input.resolved.
func (t *turn) apply(ctx workflow.Context, req signals.RespondRequest) signals.RespondResult {
	var result signals.RespondResult
	for _, resp := range req.Responses {
		r := t.byID[resp.RequestID]
		if r == nil {
			continue
		}
		if r.settled {
			result.Duplicates = append(result.Duplicates, resp.RequestID)
			continue
		}
		res, out, reason, err := t.decide(r, resp)
		if err != nil {
			continue // checked before; cannot happen for updates
		}
		t.settle(r, res, out, reason)
		result.Resolutions = append(result.Resolutions, res)
	}
	t.recordResolutions(ctx, result.Resolutions)
	return result
}

func (t *turn) settle(r *openRequest, res protocol.InputResolution, out json.RawMessage, reason string) {
	r.settled = true
	r.res = res
	r.output = out
	r.reason = reason
	if res.Outcome == protocol.OutcomeApproved && r.plan.Approval == "once" && !slices.Contains(t.approved, r.plan.Call.Name) {
		t.approved = append(t.approved, r.plan.Call.Name)
	}
}

// recordResolutions emits input.resolved (grouped by step) and, if requests
// remain open, parks again so clients reading the stream stop there.
func (t *turn) recordResolutions(ctx workflow.Context, resolutions []protocol.InputResolution) {
	if len(resolutions) == 0 {
		return
	}
	for _, res := range resolutions {
		if r := t.byID[res.RequestID]; r != nil {
			countInputResolved(ctx, res.Kind, res.Outcome, workflow.Now(ctx).Sub(r.opened))
		}
	}
	step := t.byID[resolutions[0].RequestID].stepIdx
	t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolutions, StepRef: t.step(step)})
	if len(t.openRequests()) > 0 {
		t.park(ctx)
	} else {
		setStatus(ctx, t.cfg, t.in.SessionID, StatusRunning, nil)
		t.tellSession(ctx)
	}
}

// registerInputHandlers installs the respond Update and Signal and the
// session's message offers.
func (t *turn) registerInputHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateRespond,
		func(ctx workflow.Context, req signals.RespondRequest) (signals.RespondResult, error) {
			parks := t.parks
			res := t.apply(ctx, req)
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
			return t.checkBatch(req)
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
				if m.TurnPolicy != "" {
					t.takeMessage(ctx, m)
				} else {
					t.applyMessage(ctx, m)
				}
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	return nil
}

// applySignal applies what is valid and records the rest as invalid; a
// signal never fails the workflow.
func (t *turn) applySignal(ctx workflow.Context, req signals.RespondRequest) {
	var resolutions []protocol.InputResolution
	seen := map[string]bool{}
	for _, resp := range req.Responses {
		r := t.byID[resp.RequestID]
		if err := t.checkOne(resp, seen); err != nil {
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
		res, out, reason, _ := t.decide(r, resp)
		t.settle(r, res, out, reason)
		resolutions = append(resolutions, res)
	}
	if len(resolutions) > 0 && t.byID[resolutions[0].RequestID] == nil {
		// Only unknown ids: record against the current step.
		t.log.emit(ctx, protocol.InputResolved, protocol.InputResolvedData{Resolutions: resolutions, StepRef: t.step(t.stepIdx)})
		return
	}
	t.recordResolutions(ctx, resolutions)
}

// applyMessage takes a user message the session routed to an open question.
func (t *turn) applyMessage(ctx workflow.Context, m signals.TurnMessage) {
	r := t.byID[m.Response.RequestID]
	var (
		res    protocol.InputResolution
		out    json.RawMessage
		reason string
		err    = errors.New("no such request")
	)
	if r != nil && !r.settled && r.req.Kind == protocol.KindQuestion {
		res, out, reason, err = t.decide(r, m.Response)
	}
	if err != nil {
		// The question was settled meanwhile: the message starts its own turn.
		if t.parent != nil {
			workflow.SignalExternalWorkflow(ctx, t.parent.ID, "", signals.SignalRequeue, m)
		}
		return
	}
	t.log.deliveries = append(t.log.deliveries, m.DeliveryID)
	t.log.emit(ctx, protocol.MessageReceived, protocol.MessageReceivedData{Message: m.Message, Sequence: t.in.Sequence, TurnID: t.in.TurnID})
	t.settle(r, res, out, reason)
	t.recordResolutions(ctx, []protocol.InputResolution{res})
}

// waitingTools names the tools whose calls wait for people.
func (t *turn) waitingTools() []string {
	var names []string
	for _, r := range t.openRequests() {
		if !slices.Contains(names, r.Action.ToolName) {
			names = append(names, r.Action.ToolName)
		}
	}
	return names
}
