package workflows_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// An approval parks the turn; approving runs the call and the model
// answers in a second step.
func TestTurnApprove(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	var reqs []protocol.InputRequest
	var resp *update[signals.RespondResult]
	h.at(time.Minute, func() {
		reqs = h.parkedOn(wid, "input")
		if len(h.executed()) != 0 {
			t.Errorf("the call ran before it was approved: %v", h.executed())
		}
		if len(reqs) == 1 {
			resp = h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
		}
	})
	out := h.runTurn(turnInput("refund ch_1 5"))

	wantTypes(t, out.Events,
		protocol.TurnStarted, protocol.MessageReceived,
		protocol.StepStarted, protocol.ActionsRequested, protocol.InputRequested, protocol.TurnWaiting,
		protocol.ApprovalSettled, protocol.InputResolved, protocol.DecisionRecorded, protocol.ActionResult, protocol.StepCompleted,
		protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
		protocol.TurnCompleted)
	if len(reqs) != 1 {
		t.Fatalf("requests %+v", reqs)
	}
	r := reqs[0]
	if r.Kind != protocol.KindToolApproval || r.Display != protocol.DisplayConfirmation || r.Prompt != "Approve Refund?" ||
		r.Action.ToolName != "refund" || r.Action.Kind != "tool-call" || !strings.HasPrefix(r.RequestID, "apr_") ||
		len(r.Options) != 2 || r.Options[0].ID != "approve" || r.Options[1].ID != "cancel" {
		t.Fatalf("approval request %+v", r)
	}
	var waiting protocol.TurnWaitingData
	decode(t, of(out.Events, protocol.TurnWaiting)[0], &waiting)
	if waiting.On != "input" || waiting.TurnID != "turn_0" || waiting.Usage == nil {
		t.Fatalf("turn.waiting %+v", waiting)
	}
	if !resp.accepted || !resp.completed || resp.err != nil || len(resp.result.Resolutions) != 1 ||
		resp.result.Resolutions[0].Outcome != protocol.OutcomeApproved || resp.result.Resolutions[0].RequestID != r.RequestID {
		t.Fatalf("respond %+v", resp)
	}
	rs := resolutions(t, out.Events)
	if len(rs) != 1 || rs[0].Outcome != protocol.OutcomeApproved || rs[0].Response == nil || rs[0].Response.OptionID != "approve" {
		t.Fatalf("input.resolved %+v", rs)
	}
	ar := results(t, out.Events)
	if len(ar) != 1 || ar[0].Status != protocol.StatusCompleted || ar[0].Result.CallID != r.Action.CallID ||
		ar[0].Result.IsError || string(ar[0].Result.Output) != `{"refunded":5}` || ar[0].StepIndex != 0 {
		t.Fatalf("action.result %+v", ar)
	}
	if got := h.executed(); !slices.Equal(got, []string{`refund:{"chargeId":"ch_1","amount":5}`}) {
		t.Fatalf("executed %v", got)
	}
	want := signals.TurnOutcome{Status: signals.TurnStatusCompleted, Reply: "refund ch_1: 5", FirstEvent: 0, LastEvent: len(out.Events) - 1}
	if diff := cmp.Diff(want, out.Outcome); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s", diff)
	}
	for i, e := range out.Events {
		if !slices.Equal(e.Meta.DeliveryIDs, []string{"dlv_0"}) || e.Meta.ID == "" {
			t.Fatalf("event %d %s meta %+v", i, e.Type, e.Meta)
		}
	}
	if out.Conversation == nil || out.Usage.InputTokens == 0 {
		t.Fatalf("conversation %v, usage %+v", out.Conversation, out.Usage)
	}
}

// A person's denial settles the call as rejected with the reason; the
// tool never runs. A batch with one bad answer is refused whole, leaving
// no trace.
func TestTurnDeny(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	var bad, unknown, deny *update[signals.RespondResult]
	var before, after int
	h.at(time.Minute, func() {
		reqs := h.parkedOn(wid, "input")
		if len(reqs) != 1 {
			return
		}
		id := reqs[0].RequestID
		before = len(h.turnEvents(wid))
		bad = h.respond(wid, protocol.InputResponse{RequestID: id, OptionID: "maybe"})
		unknown = h.respond(wid,
			protocol.InputResponse{RequestID: id, OptionID: "approve"},
			protocol.InputResponse{RequestID: "apr_nope", OptionID: "approve"})
	})
	h.at(2*time.Minute, func() {
		after = len(h.turnEvents(wid))
		reqs := h.parkedOn(wid, "input")
		if len(reqs) == 1 {
			deny = h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "deny", Text: "too much"})
		}
	})
	out := h.runTurn(turnInput("refund ch_1 5"))

	for name, u := range map[string]*update[signals.RespondResult]{"bad option": bad, "unknown id": unknown} {
		if !u.rejected || u.accepted {
			t.Fatalf("%s: %+v", name, u)
		}
	}
	if !strings.Contains(bad.rejection.Error(), `unknown option "maybe"`) || !strings.Contains(unknown.rejection.Error(), "unknown request id") {
		t.Fatalf("rejections: %v / %v", bad.rejection, unknown.rejection)
	}
	if after != before {
		t.Fatalf("rejected batches recorded %d events", after-before)
	}
	if !deny.completed || deny.err != nil {
		t.Fatalf("deny %+v", deny)
	}
	rs := resolutions(t, out.Events)
	if len(rs) != 1 || rs[0].Outcome != protocol.OutcomeDenied {
		t.Fatalf("input.resolved %+v", rs)
	}
	ar := results(t, out.Events)
	if len(ar) != 1 || ar[0].Status != protocol.StatusRejected || !ar[0].Result.IsError || ar[0].Error == nil ||
		ar[0].Error.Code != protocol.CodeToolDenied || !strings.Contains(ar[0].Error.Message, "denied by the user: too much") {
		t.Fatalf("action.result %+v (%+v)", ar, ar[0].Error)
	}
	if got := h.executed(); len(got) != 0 {
		t.Fatalf("a denied call ran: %v", got)
	}
	// What the model read, eve's shape (eve-denied-result).
	want := protocol.DeniedResult{Approval: &protocol.DeniedApproval{RequestID: rs[0].RequestID, Status: "denied"},
		Code: protocol.CodeToolDenied, Message: ar[0].Error.Message, Tool: protocol.DeniedTool{Result: "not_run"}}
	if diff := cmp.Diff(want, deniedOutput(t, ar[0].Result.Output)); diff != "" {
		t.Fatalf("denied result (-want +got):\n%s", diff)
	}
	if out.Outcome.Status != signals.TurnStatusCompleted || out.Outcome.Reply != "refund ch_1: "+protocol.CodeToolDenied {
		t.Fatalf("outcome %+v", out.Outcome)
	}
}

// A custom policy decides without asking anyone: its denial reaches the
// model with the reason, its skip runs the call.
func TestTurnPolicy(t *testing.T) {
	h := newHarness(t, nil)
	out := h.runTurn(turnInput("credit globex"))
	wantTypes(t, out.Events,
		protocol.TurnStarted, protocol.MessageReceived,
		protocol.StepStarted, protocol.ActionsRequested, protocol.ActionResult, protocol.StepCompleted,
		protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
		protocol.TurnCompleted)
	ar := results(t, out.Events)
	if ar[0].Status != protocol.StatusRejected || ar[0].Error.Code != protocol.CodeToolDenied ||
		!strings.Contains(ar[0].Error.Message, "denied by policy: not your tenant") {
		t.Fatalf("action.result %+v (%+v)", ar[0], ar[0].Error)
	}
	// A policy asked nobody: no approval in the result.
	want := protocol.DeniedResult{Code: protocol.CodeToolDenied, Message: ar[0].Error.Message, Tool: protocol.DeniedTool{Result: "not_run"}}
	if diff := cmp.Diff(want, deniedOutput(t, ar[0].Result.Output)); diff != "" {
		t.Fatalf("denied result (-want +got):\n%s", diff)
	}
	if len(h.executed()) != 0 {
		t.Fatalf("a denied call ran: %v", h.executed())
	}

	h = newHarness(t, nil)
	out = h.runTurn(turnInput("credit acme"))
	if ar := results(t, out.Events); ar[0].Status != protocol.StatusCompleted || len(of(out.Events, protocol.InputRequested)) != 0 {
		t.Fatalf("allowed call: %+v: %s", ar[0], join(out.Events))
	}
	if out.Outcome.Reply != "credit: 5" || len(h.executed()) != 1 {
		t.Fatalf("outcome %+v, executed %v", out.Outcome, h.executed())
	}
}

// An approval.Once tool asks the first time only: the turn's next call of
// it runs without asking, and the turn hands the approval on.
func TestTurnOnce(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	h.at(time.Minute, func() {
		if reqs := h.parkedOn(wid, "input"); len(reqs) == 1 {
			h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, Text: "approve"})
		}
	})
	out := h.runTurn(turnInput("look up k twice"))
	if n := len(of(out.Events, protocol.InputRequested)); n != 1 {
		t.Fatalf("%d input requests: %s", n, join(out.Events))
	}
	if got := h.executed(); !slices.Equal(got, []string{`lookup:{"key":"k"}`, `lookup:{"key":"k2"}`}) {
		t.Fatalf("executed %v", got)
	}
	if !slices.Equal(out.ApprovedTools, []string{"lookup"}) || out.Outcome.Reply != "found v-k2" {
		t.Fatalf("approved %v, outcome %+v", out.ApprovedTools, out.Outcome)
	}

	// A turn started with the session's approvals does not ask.
	h = newHarness(t, nil)
	in := turnInput("look up j")
	in.ApprovedTools = []string{"lookup"}
	out = h.runTurn(in)
	if len(of(out.Events, protocol.InputRequested)) != 0 || out.Outcome.Reply != "found v-j" {
		t.Fatalf("asked again: %s (%+v)", join(out.Events), out.Outcome)
	}
	// ...but an approval.Always tool still does.
	h = newHarness(t, nil)
	in = turnInput("refund ch_2 2")
	in.ApprovedTools = []string{"refund"}
	h.at(time.Minute, func() {
		if reqs := h.parkedOn(turnWorkflowID(0), "input"); len(reqs) == 1 {
			h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
		}
	})
	out = h.runTurn(in)
	if len(of(out.Events, protocol.InputRequested)) != 1 {
		t.Fatalf("an Always tool ran unasked: %s", join(out.Events))
	}
}

// A client tool's call is a question; the person's answer is its result.
// A bad answer by Update is refused; by Signal it is recorded as invalid
// and the question stays open.
func TestTurnQuestion(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	var reqs []protocol.InputRequest
	var bad, good *update[signals.RespondResult]
	h.at(time.Minute, func() {
		reqs = h.parkedOn(wid, "input")
		if len(reqs) != 1 {
			return
		}
		bad = h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "gold"})
		h.SignalWorkflow(signals.SignalRespond, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: reqs[0].RequestID, Text: "gold"}}})
	})
	h.at(2*time.Minute, func() {
		if reqs := h.parkedOn(wid, "input"); len(reqs) == 1 {
			good = h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, Text: "Pro"})
		}
	})
	out := h.runTurn(turnInput("choose a plan"))

	wantTypes(t, out.Events,
		protocol.TurnStarted, protocol.MessageReceived,
		protocol.StepStarted, protocol.ActionsRequested, protocol.InputRequested, protocol.TurnWaiting,
		protocol.InputResolved, protocol.TurnWaiting, // the invalid signal
		protocol.InputResolved, protocol.DecisionRecorded, protocol.ActionResult, protocol.StepCompleted,
		protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
		protocol.TurnCompleted)
	r := reqs[0]
	if r.Kind != protocol.KindQuestion || r.Prompt != "Choose a plan" || !strings.HasPrefix(r.RequestID, "inp_") ||
		len(r.Options) != 2 || r.Action.ToolName != "choose_plan" {
		t.Fatalf("question %+v", r)
	}
	if !bad.rejected || !strings.Contains(bad.rejection.Error(), `unknown option "gold"`) {
		t.Fatalf("bad answer %+v", bad)
	}
	rs := resolutions(t, out.Events)
	if len(rs) != 2 || rs[0].Outcome != protocol.OutcomeInvalid || rs[1].Outcome != protocol.OutcomeAnswered ||
		rs[1].Response == nil || rs[1].Response.Text != "Pro" {
		t.Fatalf("input.resolved %+v", rs)
	}
	if !good.completed || good.err != nil {
		t.Fatalf("answer %+v", good)
	}
	ar := results(t, out.Events)
	if ar[0].Status != protocol.StatusCompleted || string(ar[0].Result.Output) != `{"optionId":"pro"}` {
		t.Fatalf("action.result %+v", ar[0])
	}
	if out.Outcome.Reply != "picked pro" {
		t.Fatalf("outcome %+v", out.Outcome)
	}
}

// A delegated call waits for its job: the turn says it waits on tasks, a
// settle is checked against the output schema, and the job's completion
// is the call's result.
func TestTurnDelegatedSettle(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	start := h.Now()
	var (
		pending, settling signals.ActionState
		invalid, good     *update[signals.SettleDecision]
	)
	h.at(time.Minute, func() {
		h.parkedOn(wid, "tasks")
		job := h.nextJob()
		pending = h.actionState(wid, job.ID)
		invalid = sendUpdate[signals.SettleDecision](h, wid, signals.UpdateSettleAction, signals.SettleAction{ActionID: job.ID, Output: json.RawMessage(`{"rows":"many"}`)})
		good = sendUpdate[signals.SettleDecision](h, wid, signals.UpdateSettleAction, signals.SettleAction{ActionID: job.ID, Output: json.RawMessage(`{"rows":3}`)})
		h.at(time.Minute, func() { // after the settle was recorded
			settling = h.actionState(wid, job.ID)
			h.completeJob(job, `{"rows":3}`)
		})
	})
	out := h.runTurn(turnInput("report"))

	wantTypes(t, out.Events,
		protocol.TurnStarted, protocol.MessageReceived,
		protocol.StepStarted, protocol.ActionsRequested, protocol.TaskStarted, protocol.TurnWaiting,
		protocol.TaskSettled, protocol.ActionResult, protocol.StepCompleted,
		protocol.StepStarted, protocol.MessageAppended, protocol.MessageCompleted, protocol.StepCompleted,
		protocol.TurnCompleted)
	var waiting protocol.TurnWaitingData
	decode(t, of(out.Events, protocol.TurnWaiting)[0], &waiting)
	if waiting.On != "tasks" {
		t.Fatalf("turn.waiting %+v", waiting)
	}
	if pending.State != signals.ActionPending || pending.Tool != "run_report" || !pending.Deadline.Equal(start.Add(reportDeadline)) {
		t.Fatalf("pending action %+v (started %s)", pending, start)
	}
	if !invalid.rejected || errType(invalid.rejection) != signals.ErrActionInvalid {
		t.Fatalf("invalid settle %+v", invalid)
	}
	if !good.completed || good.err != nil || good.result.Decision != signals.DecisionComplete {
		t.Fatalf("settle %+v", good)
	}
	if settling.State != signals.ActionSettling || settling.Hash == "" {
		t.Fatalf("settled action %+v", settling)
	}
	ar := results(t, out.Events)
	if ar[0].Status != protocol.StatusCompleted || string(ar[0].Result.Output) != `{"rows":3}` {
		t.Fatalf("action.result %+v", ar[0])
	}
	if out.Outcome.Reply != "report 3" {
		t.Fatalf("outcome %+v", out.Outcome)
	}
}

// A delegated call whose job misses its deadline fails with
// DEADLINE_EXCEEDED while the turn still waits on a person; a completion
// after that is refused as gone.
func TestTurnDelegatedDeadline(t *testing.T) {
	h := newHarness(t, nil)
	wid := turnWorkflowID(0)
	var (
		expired signals.ActionState
		late    *update[signals.SettleDecision]
		mid     []protocol.Event
	)
	h.at(reportDeadline+time.Minute, func() {
		reqs := h.parkedOn(wid, "input")
		mid = h.turnEvents(wid)
		job := h.nextJob()
		expired = h.actionState(wid, job.ID)
		late = sendUpdate[signals.SettleDecision](h, wid, signals.UpdateSettleAction, signals.SettleAction{ActionID: job.ID, Output: json.RawMessage(`{"rows":1}`)})
		if len(reqs) == 1 {
			h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
		}
	})
	out := h.runTurn(turnInput("report and refund"))

	// The deadline passed while the turn was parked on the approval.
	if got := join(mid); !strings.HasSuffix(got, "actions.requested input.requested turn.waiting task.started task.settled action.result") {
		t.Fatalf("events at the deadline: %s", got)
	}
	if expired.State != signals.ActionExpired {
		t.Fatalf("action %+v", expired)
	}
	if !late.rejected || errType(late.rejection) != signals.ErrActionGone {
		t.Fatalf("late settle %+v", late)
	}
	ar := results(t, out.Events)
	if len(ar) != 2 || ar[0].Result.ToolName != "run_report" || ar[0].Status != protocol.StatusFailed ||
		ar[0].Error.Code != protocol.CodeDeadlineExceeded || ar[1].Status != protocol.StatusCompleted {
		t.Fatalf("action.results %+v", ar)
	}
	if out.Outcome.Reply != "report "+protocol.CodeDeadlineExceeded+", refund 7" {
		t.Fatalf("outcome %+v", out.Outcome)
	}
}

// Cancelling a parked turn settles its open request as cancelled, fails
// its calls as cancelled and ends the turn with turn.cancelled.
func TestTurnCancel(t *testing.T) {
	for _, c := range []struct{ message, on, tool string }{
		{"refund ch_1 5", "input", "refund"},
		{"report", "tasks", "run_report"},
	} {
		t.Run(c.on, func(t *testing.T) {
			h := newHarness(t, nil)
			wid := turnWorkflowID(0)
			h.at(time.Minute, func() {
				h.parkedOn(wid, c.on)
				h.CancelWorkflow()
			})
			out := h.runTurn(turnInput(c.message))
			var action signals.ActionState
			if c.on == "tasks" {
				action = h.actionState(wid, h.nextJob().ID)
			}

			evs := out.Events
			if evs[len(evs)-1].Type != protocol.TurnCancelled || len(of(evs, protocol.TurnCompleted)) != 0 {
				t.Fatalf("events %s", join(evs))
			}
			ar := results(t, evs)
			if len(ar) != 1 || ar[0].Result.ToolName != c.tool || ar[0].Error == nil || ar[0].Error.Code != protocol.CodeToolCancelled {
				t.Fatalf("action.result %+v", ar)
			}
			if c.on == "input" {
				rs := resolutions(t, evs)
				if len(rs) != 1 || rs[0].Outcome != protocol.OutcomeCancelled {
					t.Fatalf("input.resolved %+v", rs)
				}
				if len(h.executed()) != 0 {
					t.Fatalf("ran %v", h.executed())
				}
			} else if action.State != signals.ActionCancelled {
				t.Fatalf("action %+v", action)
			}
			if out.Outcome.Status != signals.TurnStatusCancelled || out.Outcome.LastEvent != len(evs)-1 {
				t.Fatalf("outcome %+v", out.Outcome)
			}
		})
	}
}

// A model that keeps calling tools is stopped after MaxSteps steps.
func TestTurnMaxSteps(t *testing.T) {
	h := newHarness(t, func(a *agent.Agent) { a.MaxSteps = 3 })
	in := turnInput("loop")
	in.Config.MaxSteps = 3
	out := h.runTurn(in)
	step := []string{protocol.StepStarted, protocol.ActionsRequested, protocol.ActionResult, protocol.StepCompleted}
	want := []string{protocol.TurnStarted, protocol.MessageReceived}
	for range 3 {
		want = append(want, step...)
	}
	wantTypes(t, out.Events, append(want, protocol.TurnFailed)...)
	var failed protocol.TurnFailedData
	decode(t, out.Events[len(out.Events)-1], &failed)
	if failed.Code != workflows.CodeMaxSteps || !strings.Contains(failed.Message, "3 model steps") || failed.TurnID != "turn_0" {
		t.Fatalf("turn.failed %+v", failed)
	}
	if out.Outcome.Status != signals.TurnStatusFailed || out.Outcome.Error != failed.Message {
		t.Fatalf("outcome %+v", out.Outcome)
	}
	if n := len(h.executed()); n != 3 {
		t.Fatalf("%d calls ran", n)
	}
}

// deniedOutput decodes a denied call's result strictly: eve's fields and
// no others.
func deniedOutput(t *testing.T, raw json.RawMessage) protocol.DeniedResult {
	t.Helper()
	var got protocol.DeniedResult
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("denied result %s: %v", raw, err)
	}
	return got
}
