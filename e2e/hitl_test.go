package e2e

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

var alice = &auth.Principal{ID: "alice", Type: "user", Attributes: map[string]string{"tenantId": "t1"}}

func demoEnv(t *testing.T) *evetest.Env {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	return env
}

// startParked sends a message that parks and returns the session and the
// input.requested data.
func startParked(t *testing.T, env *evetest.Env, msg string) (string, protocol.InputRequestedData) {
	t.Helper()
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: msg, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("outcome = %+v, want waiting", res.Outcome)
	}
	evs := env.Events(ctx, res.SessionID)
	reqs := evetest.Of(evs, protocol.InputRequested)
	if len(reqs) != 1 || evs[len(evs)-1].Type != protocol.TurnWaiting {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var d protocol.InputRequestedData
	reqs[0].Decode(&d)
	return res.SessionID, d
}

func respond(t *testing.T, env *evetest.Env, id string, rs ...protocol.InputResponse) signals.RespondResult {
	t.Helper()
	res, err := env.Sessions.Respond(env.Ctx(30*time.Second), id, signals.RespondRequest{Responses: rs, Wait: true})
	if err != nil {
		t.Fatalf("respond %+v: %v", rs, err)
	}
	return res
}

func TestApprovalApproved(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "refund ch_42 for 25")
	r := d.Requests[0]
	if r.Kind != protocol.KindToolApproval || r.Display != protocol.DisplayConfirmation || r.Prompt != "Refund $25.00 for charge ch_42?" ||
		len(r.Options) != 2 || r.Options[0].ID != "approve" || r.Options[1].ID != "cancel" ||
		r.Action.ToolName != "refund_charge" || r.Action.Kind != "tool-call" || r.RequestID != "apr_"+r.Action.CallID {
		t.Fatalf("request = %+v", r)
	}
	// Only alice, who asked, may settle it (refund_charge sets no response
	// policy); she approves, and the tool runs as her.
	approve := signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: "approve"}}, Wait: true}
	approve.Responder = &auth.Principal{ID: "manager"}
	if _, err := env.Sessions.Respond(env.Ctx(30*time.Second), id, approve); err == nil {
		t.Fatal("another person settled the requester's approval")
	}
	approve.Responder = alice
	res, err := env.Sessions.Respond(env.Ctx(30*time.Second), id, approve)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != "Refund of ch_42: 25" {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
	// The turn has ended; the session records session.waiting right after.
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	tail := evetest.Types(evs[len(evs)-12:])
	want := "approval.settled input.resolved decision.recorded action.result step.completed step.started message.appended message.completed step.completed turn.completed session.waiting"
	if got := strings.Join(tail[1:], " "); got != want {
		t.Fatalf("events after approval: %s\nwant %s", got, want)
	}
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if ar.Status != protocol.StatusCompleted || !strings.Contains(string(ar.Result.Output), `"requestedBy":"alice"`) {
		t.Fatalf("action.result = %+v %s", ar, ar.Result.Output)
	}
	var ir protocol.InputResolvedData
	evetest.Of(evs, protocol.InputResolved)[0].Decode(&ir)
	if ir.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("input.resolved = %+v", ir)
	}
}

func TestApprovalDeniedReasonReachesModel(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "refund ch_7 50")
	res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "cancel", Text: "refunds need a ticket"})
	if !strings.Contains(res.Outcome.Reply, "denied by the user: refunds need a ticket") {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	evs := env.Events(env.Ctx(10*time.Second), id)
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if ar.Status != protocol.StatusRejected || ar.Error.Code != protocol.CodeToolDenied || !ar.Result.IsError {
		t.Fatalf("action.result = %+v", ar)
	}
	// The result the model read has eve's shape (what an eval written
	// against eve checks).
	want := protocol.DeniedResult{Approval: &protocol.DeniedApproval{RequestID: d.Requests[0].RequestID, Status: "denied"},
		Code: protocol.CodeToolDenied, Message: ar.Error.Message, Tool: protocol.DeniedTool{Result: "not_run"}}
	if diff := cmp.Diff(want, deniedOutput(t, ar.Result.Output)); diff != "" {
		t.Fatalf("denied result (-want +got):\n%s", diff)
	}
	if !strings.Contains(ar.Error.Message, "denied by the user: refunds need a ticket") {
		t.Fatalf("message %q", ar.Error.Message)
	}
	var ir protocol.InputResolvedData
	evetest.Of(evs, protocol.InputResolved)[0].Decode(&ir)
	if ir.Resolutions[0].Outcome != protocol.OutcomeDenied {
		t.Fatalf("resolution = %+v", ir.Resolutions[0])
	}
}

func TestTenantPolicy(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	// Across tenants: denied automatically, nobody asked, reason to the model.
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "credit t2 10", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != signals.TurnStatusCompleted || !strings.Contains(res.Outcome.Reply, "denied by policy: Caller cannot access this tenant.") {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
	evs := env.Events(ctx, res.SessionID)
	if n := len(evetest.Of(evs, protocol.InputRequested)); n != 0 {
		t.Fatalf("%d input requests for an automatic denial", n)
	}
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	want := protocol.DeniedResult{Code: protocol.CodeToolDenied, Message: ar.Error.Message, Tool: protocol.DeniedTool{Result: "not_run"}}
	if diff := cmp.Diff(want, deniedOutput(t, ar.Result.Output)); diff != "" {
		t.Fatalf("a policy's denial (-want +got):\n%s", diff)
	}
	// Own tenant, small amount: runs unasked.
	r2 := env.SendAndWait(ctx, res.SessionID, "credit t1 10")
	if r2.Outcome.Reply != "Credit for t1: 10" {
		t.Fatalf("reply = %q", r2.Outcome.Reply)
	}
	// Own tenant, above 1000: asks.
	r3 := env.SendAndWait(ctx, res.SessionID, "credit t1 5000")
	if r3.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("outcome = %+v, want waiting", r3.Outcome)
	}
}

func TestPolicyErrorFailsClosed(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	tool := countingTool("count", &runs, map[string]bool{"ok": true})
	tool.Approval = approval.Custom(func(approval.Context) approval.Status { panic("database down") })
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: count, input: {n: 1}}]
      - reply: done
`, tool))
	id, d := startParked(t, env, "go")
	if runs.Load() != 0 || !strings.Contains(d.Requests[0].Prompt, "the approval policy failed") {
		t.Fatalf("runs %d, request %+v", runs.Load(), d.Requests[0])
	}
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	if runs.Load() != 1 {
		t.Fatalf("runs = %d after approval", runs.Load())
	}
}

func TestOnceApproval(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	tool := countingTool("count", &runs, map[string]bool{"ok": true})
	tool.Approval = approval.Once()
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: one
    steps:
      - calls: [{tool: count, input: {n: 1}}]
      - reply: "{{result.count.ok}}{{result.count.code}}"
  - match: two
    steps:
      - calls: [{tool: count, input: {n: 1}}, {tool: count, input: {n: 2}}]
      - reply: "{{results.0.ok}}{{results.0.code}} {{results.1.ok}}{{results.1.code}}"
`, tool))
	ctx := env.Ctx(60 * time.Second)
	// A denial is not remembered: the next call asks again.
	id, d := startParked(t, env, "one")
	res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "deny"})
	if res.Outcome.Reply != protocol.CodeToolDenied {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	// Two concurrent pending calls each ask; approving one leaves the other pending.
	r := env.SendAndWait(ctx, id, "two")
	if r.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("outcome = %+v", r.Outcome)
	}
	evs := env.Events(ctx, id)
	var req protocol.InputRequestedData
	reqs := evetest.Of(evs, protocol.InputRequested)
	reqs[len(reqs)-1].Decode(&req)
	if len(req.Requests) != 2 {
		t.Fatalf("requests = %+v", req.Requests)
	}
	res = respond(t, env, id, protocol.InputResponse{RequestID: req.Requests[0].RequestID, OptionID: "approve"})
	if res.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("after approving one of two: %+v", res.Outcome)
	}
	res = respond(t, env, id, protocol.InputResponse{RequestID: req.Requests[1].RequestID, OptionID: "approve"})
	if res.Outcome.Reply != "true true" {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	// Approved once: a later call runs unasked.
	before := runs.Load()
	r = env.SendAndWait(ctx, id, "one")
	if r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != "true" || runs.Load() != before+1 {
		t.Fatalf("after once-approval: %+v runs %d", r.Outcome, runs.Load())
	}
}

func TestClientToolParksAndSameTurnContinues(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "help me choose a plan")
	r := d.Requests[0]
	if r.Kind != protocol.KindQuestion || r.Display != protocol.DisplaySelect || r.Prompt != "Choose a plan" || len(r.Options) != 2 ||
		r.Action.ToolName != "choose_plan" || !strings.Contains(string(r.Action.Input), "acct_1") {
		t.Fatalf("request = %+v", r)
	}
	res := respond(t, env, id, protocol.InputResponse{RequestID: r.RequestID, OptionID: "pro"})
	if res.Outcome.Reply != "You picked pro." {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	evs := env.Events(env.Ctx(10*time.Second), id)
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Fatalf("%d turns; the answer must continue the same turn", n)
	}
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if ar.Status != protocol.StatusCompleted || string(ar.Result.Output) != `{"optionId":"pro"}` {
		t.Fatalf("action.result = %+v %s", ar, ar.Result.Output)
	}
}

func TestAskQuestionFreeTextAndMultiSelect(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "ask me something")
	r := d.Requests[0]
	if r.Action.ToolName != "ask_question" || !r.AllowFreeform || r.Options[0].ID != "red" {
		t.Fatalf("request = %+v", r)
	}
	res := respond(t, env, id, protocol.InputResponse{RequestID: r.RequestID, Text: "green, actually"})
	if res.Outcome.Reply != "You said green, actually." {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}

	id2, d2 := startParked(t, env, "add-ons please")
	req := d2.Requests[0].RequestID
	for _, bad := range []protocol.InputResponse{
		{RequestID: req, OptionID: "backup,sso,audit"}, // too many
		{RequestID: req, OptionID: "backup,nope"},      // unknown
	} {
		if _, err := env.Sessions.Respond(env.Ctx(10*time.Second), id2, signals.RespondRequest{Responses: []protocol.InputResponse{bad}}); err == nil {
			t.Fatalf("answer %+v accepted", bad)
		}
	}
	res = respond(t, env, id2, protocol.InputResponse{RequestID: req, OptionID: "backup,sso"})
	if res.Outcome.Reply != `Enabling ["backup","sso"].` {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
}

func TestInvalidAnswersRejectedAndDuplicateIsNoop(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "choose a plan")
	req := d.Requests[0].RequestID
	ctx := env.Ctx(30 * time.Second)
	before := len(env.Events(ctx, id))
	cases := []struct {
		resp protocol.InputResponse
		want string
	}{
		{protocol.InputResponse{RequestID: "inp_nope", OptionID: "pro"}, "unknown request id"},
		{protocol.InputResponse{RequestID: req, OptionID: "gold"}, `unknown option "gold" (options: basic, pro)`},
		{protocol.InputResponse{RequestID: req, Text: "whatever"}, "takes no free text"},
		{protocol.InputResponse{RequestID: req}, "give an optionId or text"},
	}
	for _, c := range cases {
		_, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{c.resp}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("answer %+v: err = %v, want %q", c.resp, err, c.want)
		}
	}
	if after := len(env.Events(ctx, id)); after != before {
		t.Fatalf("rejected answers recorded events: %d → %d", before, after)
	}
	// Still answerable; the text rule maps a label too.
	if res := respond(t, env, id, protocol.InputResponse{RequestID: req, Text: "Basic"}); res.Outcome.Reply != "You picked basic." {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
}

func TestDuplicateAnswerIsNoop(t *testing.T) {
	env := evetest.New(t)
	// Two questions: answer one twice while the other keeps the turn open.
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: ask_question, input: {question: "a?"}}, {tool: ask_question, input: {question: "b?"}}]
      - reply: "{{results.0.text}} {{results.1.text}}"
`))
	id, d := startParked(t, env, "go")
	ctx := env.Ctx(30 * time.Second)
	first := protocol.InputResponse{RequestID: d.Requests[0].RequestID, Text: "one"}
	if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{first}}); err != nil {
		t.Fatal(err)
	}
	n := len(env.Events(ctx, id))
	res, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{first}})
	if err != nil || len(res.Resolutions) != 0 || len(res.Duplicates) != 1 {
		t.Fatalf("repeat: %+v, %v", res, err)
	}
	if m := len(env.Events(ctx, id)); m != n {
		t.Fatalf("a duplicate recorded events: %d → %d", n, m)
	}
	if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: first.RequestID, Text: "other"}}}); err == nil || !strings.Contains(err.Error(), "already settled") {
		t.Fatalf("a different answer to a settled request: %v", err)
	}
	out := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[1].RequestID, Text: "two"})
	if out.Outcome.Reply != "one two" {
		t.Fatalf("reply = %q", out.Outcome.Reply)
	}
}

func TestInvalidSignalRecordedNeverFails(t *testing.T) {
	env := demoEnv(t)
	id, d := startParked(t, env, "choose a plan")
	ctx := env.Ctx(30 * time.Second)
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bad := signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: d.Requests[0].RequestID, OptionID: "gold"}}}
	if err := env.Client.SignalWorkflow(ctx, sum.ActiveTurn.WorkflowID, "", signals.SignalRespond, bad); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id, func(evs []protocol.Event) bool {
		for _, e := range evetest.Of(evs, protocol.InputResolved) {
			var d protocol.InputResolvedData
			e.Decode(&d)
			if d.Resolutions[0].Outcome == protocol.OutcomeInvalid {
				return true
			}
		}
		return false
	})
	good := signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: d.Requests[0].RequestID, OptionID: "basic"}}}
	if err := env.Client.SignalWorkflow(ctx, sum.ActiveTurn.WorkflowID, "", signals.SignalRespond, good); err != nil {
		t.Fatal(err)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	if !strings.Contains(evetest.Join(evs), "turn.completed session.waiting") {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
}

func TestMessageWhileParked(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	// A message that matches an option answers the open question.
	id, _ := startParked(t, env, "choose a plan")
	sent, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "Pro", DeliveryID: "dlv_answer"})
	if err != nil {
		t.Fatal(err)
	}
	if sent.TurnID != "turn_0" {
		t.Fatalf("the answer started %s", sent.TurnID)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	if n := len(evetest.Of(evs, protocol.TurnStarted)); n != 1 {
		t.Fatalf("%d turns: %s", n, evetest.Join(evs))
	}
	last := evetest.Of(evs, protocol.MessageCompleted)
	var mc protocol.MessageCompletedData
	last[len(last)-1].Decode(&mc)
	if mc.Message != "You picked pro." || !containsStr(last[len(last)-1].Meta.DeliveryIDs, "dlv_answer") {
		t.Fatalf("reply %q deliveries %v", mc.Message, last[len(last)-1].Meta.DeliveryIDs)
	}

	// A message from someone else while an approval waits never answers it:
	// it waits for the turn (the person the turn serves answers by message,
	// see steer_test.go).
	id2, d2 := startParked(t, env, "refund ch_1 5")
	queued, err := env.Sessions.Send(ctx, id2, signals.SendRequest{Message: "cancel", Caller: &auth.Principal{ID: "mallory", Type: "user"}})
	if err != nil {
		t.Fatal(err)
	}
	// The session routes a message in the send Update itself: its answer
	// says the message waits for a turn of its own.
	if queued.TurnID != "turn_1" {
		t.Fatalf("another person's message went to %s", queued.TurnID)
	}
	evs = env.Events(ctx, id2)
	if evs[len(evs)-1].Type != protocol.TurnWaiting || len(evetest.Of(evs, protocol.InputResolved)) != 0 {
		t.Fatalf("another person's message changed the turn: %s", evetest.Join(evs))
	}
	// The approval is still open (respond fails otherwise), and it is the
	// only resolution the turn ever records.
	respond(t, env, id2, protocol.InputResponse{RequestID: d2.Requests[0].RequestID, OptionID: "approve"})
	evs = waitFor(t, env, id2, func(evs []protocol.Event) bool {
		return len(evetest.Of(evs, protocol.SessionWaiting)) == 2
	})
	if ir := evetest.Of(evs, protocol.InputResolved); len(ir) != 1 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var ir protocol.InputResolvedData
	evetest.Of(evs, protocol.InputResolved)[0].Decode(&ir)
	if len(ir.Resolutions) != 1 || ir.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("resolutions %+v", ir.Resolutions)
	}
	// Then the queued message ran as its own turn, after the first ended.
	if got := strings.Count(evetest.Join(evs), "turn.started"); got != 2 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	mr := evetest.Of(evs, protocol.MessageReceived)
	var m protocol.MessageReceivedData
	mr[len(mr)-1].Decode(&m)
	if len(mr) != 2 || m.Message != "cancel" || m.TurnID != "turn_1" {
		t.Fatalf("message.received %d, last %+v", len(mr), m)
	}
}

func TestCancelParkedTurn(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(30 * time.Second)
	id, d := startParked(t, env, "refund ch_9 9")
	res, err := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCancel})
	if err != nil || res.Status != signals.ControlAccepted {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	tail := evetest.Join(evs[len(evs)-5:])
	if tail != "input.resolved decision.recorded action.result turn.cancelled session.waiting" {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var ir protocol.InputResolvedData
	evetest.Of(evs, protocol.InputResolved)[0].Decode(&ir)
	if ir.Resolutions[0].Outcome != protocol.OutcomeCancelled || ir.Resolutions[0].RequestID != d.Requests[0].RequestID {
		t.Fatalf("resolution = %+v", ir.Resolutions)
	}
	if res, _ := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCancel}); res.Status != signals.ControlNoActiveTurn {
		t.Fatalf("second cancel: %+v", res)
	}
	if r := env.SendAndWait(ctx, id, "what's the weather in Oslo"); r.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("next turn after cancel: %+v", r.Outcome)
	}
}

func waitFor(t *testing.T, env *evetest.Env, id string, ok func([]protocol.Event) bool) []protocol.Event {
	t.Helper()
	return waitWithin(t, env, id, 20*time.Second, ok)
}

// terminatedTurnBound bounds the wait for a session whose turn an operator
// terminated: its workflow task reads the turn's events by a query, in a
// local activity, which a loaded machine answered in more than 10 s.
const terminatedTurnBound = time.Minute

// waitWithin is waitFor with its own bound (a worker's restart, say:
// sticky queues and heartbeats time out first).
func waitWithin(t *testing.T, env *evetest.Env, id string, bound time.Duration, ok func([]protocol.Event) bool) []protocol.Event {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		// A read may wait for the session's workflow task (one holding a
		// local activity answers queries when it ends): it gets the time
		// left, so only the bound decides the wait.
		evs := env.Events(env.Ctx(max(10*time.Second, time.Until(deadline))), id)
		if len(evs) > 0 && ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s; events of %s: %s", bound, id, evetest.Join(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

var _ = json.Valid
var _ tools.Tool

// Park → stop the worker and restart the dev server (SQLite file) → answer
// → the same turn completes with nothing lost.
func TestParkedApprovalSurvivesRestarts(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	env := evetest.NewOn(t, srv)
	a, _ := demo.Agent()
	stop := env.StartWorker(a)
	id, d := startParked(t, env, "refund ch_77 12")
	before := env.Events(env.Ctx(10*time.Second), id)
	stop()
	if err := srv.Restart(env.Ctx(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	a2, _ := demo.Agent()
	env.StartWorker(a2)
	res := respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	if res.Outcome.Reply != "Refund of ch_77: 12" {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	after := env.Events(env.Ctx(10*time.Second), id)
	for i := range before {
		if after[i].Meta.ID != before[i].Meta.ID || after[i].Type != before[i].Type {
			t.Fatalf("event %d changed across restarts: %+v vs %+v", i, before[i].Meta, after[i].Meta)
		}
	}
}

// deniedOutput decodes a denied call's result strictly: eve's fields and
// no others.
func deniedOutput(t *testing.T, raw json.RawMessage) protocol.DeniedResult {
	t.Helper()
	var got protocol.DeniedResult
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("denied result %s: %v", raw, err)
	}
	return got
}
