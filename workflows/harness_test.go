package workflows_test

// The Turn and Session tests drive the registered workflows the way a
// worker runs them (agent.Register: the real activities, a scripted model,
// real tools) in Temporal's test environment, through the names in package
// signals only. They assert what clients see: the events, their order and
// payloads, and the turn's outcome.
//
// The environment skips time whenever no activity runs, so each step of a
// test is a delayed callback: it fires only once the workflow is blocked
// (parked on a person, a job or the next message), which makes it a
// barrier, never a sleep.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/workflows"
)

// rules drive the scripted model: each rule is one path through a turn.
const rules = `
name: wftest
default: "Hello."
rules:
  - match: '^refund both'
    steps:
      - calls:
          - {tool: refund, input: {chargeId: ch_a, amount: 1}}
          - {tool: refund, input: {chargeId: ch_b, amount: 2}}
      - reply: "refunds: {{results.0.refunded}}{{results.0.code}} / {{results.1.refunded}}{{results.1.code}}"
  - match: '^refund (?P<charge>ch_\w+) (?P<amount>[0-9]+)'
    steps:
      - calls: [{tool: refund, inputJSON: '{"chargeId": "{{charge}}", "amount": {{amount}}}'}]
      - reply: "refund {{charge}}: {{result.refund.refunded}}{{result.refund.code}}"
  - match: '^look up (?P<key>\w+) twice'
    steps:
      - calls: [{tool: lookup, input: {key: "{{key}}"}}]
      - calls: [{tool: lookup, input: {key: "{{key}}2"}}]
      - reply: "found {{result.lookup.value}}{{result.lookup.code}}"
  - match: '^look up (?P<key>\w+)'
    steps:
      - calls: [{tool: lookup, input: {key: "{{key}}"}}]
      - reply: "found {{result.lookup.value}}{{result.lookup.code}}"
  - match: '^credit (?P<tenant>\w+)'
    steps:
      - calls: [{tool: credit, input: {tenant: "{{tenant}}"}}]
      - reply: "credit: {{result.credit.credited}}{{result.credit.code}}"
  - match: '^choose a plan'
    steps:
      - calls: [{tool: choose_plan, input: {}}]
      - reply: "picked {{result.choose_plan.optionId}}{{result.choose_plan.text}}"
  - match: '^report and refund'
    steps:
      - calls:
          - {tool: run_report, input: {name: q3}}
          - {tool: refund, input: {chargeId: ch_r, amount: 7}}
      - reply: "report {{results.0.rows}}{{results.0.code}}, refund {{results.1.refunded}}{{results.1.code}}"
  - match: '^report'
    steps:
      - calls: [{tool: run_report, input: {name: q3}}]
      - reply: "report {{result.run_report.rows}}{{result.run_report.code}}"
  - match: '^loop'
    steps:
      - calls: [{tool: ping, input: {}}]
  - match: 'weather in (?P<city>\w+)'
    reply: "sunny in {{city}}"
`

var alice = &auth.Principal{ID: "alice", Type: "user"}

// reportDeadline is run_report's deadline.
const reportDeadline = 10 * time.Minute

// harness is one test's environment: the registered agent and what its
// tools saw.
type harness struct {
	*testsuite.TestWorkflowEnvironment
	t *testing.T

	mu  sync.Mutex
	ran []string // executed tool calls, "tool:input"
	// jobs receives the action of every delegated call as its job starts.
	jobs chan tools.Action
	// turns are the outputs of the session's finished turns, in order.
	turns []workflows.TurnOutput
	// store holds the agent's conversations.
	store payloadstore.Store
}

// newHarness registers an agent (the scripted rules above and the tools
// below) on a fresh test environment. edit adjusts the agent first.
func newHarness(t *testing.T, edit func(a *agent.Agent)) *harness {
	t.Helper()
	return newHarnessOn(t, newMemStore(), edit)
}

// newHarnessOn is newHarness on a given conversation store (a session's
// next run reads the conversation its first run stored).
func newHarnessOn(t *testing.T, store payloadstore.Store, edit func(a *agent.Agent)) *harness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	h := &harness{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment(), t: t, jobs: make(chan tools.Action, 8)}
	m, err := scripted.Parse([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := reg.Register(h.tools()...); err != nil {
		t.Fatal(err)
	}
	actions := &agent.Actions{Secret: []byte("a test secret of 16+ bytes"), PublicURL: "http://eve.test"}
	a := &agent.Agent{Name: "wftest", Model: m, Tools: reg, LocalModel: true}
	if edit != nil {
		edit(a)
	}
	h.store = store
	if err := agent.Register(h, a, agent.Host{Store: store, Actions: actions}); err != nil {
		t.Fatal(err)
	}
	h.SetOnChildWorkflowCompletedListener(func(_ *workflow.Info, result converter.EncodedValue, err error) {
		if err != nil {
			t.Errorf("turn workflow failed: %v", err)
			return
		}
		var out workflows.TurnOutput
		if err := result.Get(&out); err != nil {
			t.Errorf("decode turn output: %v", err)
			return
		}
		h.turns = append(h.turns, out)
	})
	return h
}

func (h *harness) tools() []*tools.Tool {
	record := func(name string, in json.RawMessage) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.ran = append(h.ran, name+":"+string(in))
	}
	refund := &tools.Tool{Name: "refund", Description: "Refund a charge; a person approves every call.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"chargeId":{"type":"string"},"amount":{"type":"number"}},"required":["chargeId","amount"]}`),
		Approval:    approval.Always(),
		Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
			record("refund", in)
			var v struct{ Amount float64 }
			_ = json.Unmarshal(in, &v)
			return map[string]any{"refunded": v.Amount}, nil
		}}
	lookup := &tools.Tool{Name: "lookup", Description: "Look a key up; approved once per session.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
		Approval:    approval.Once(),
		Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
			record("lookup", in)
			var v struct{ Key string }
			_ = json.Unmarshal(in, &v)
			return map[string]any{"value": "v-" + v.Key}, nil
		}}
	credit := &tools.Tool{Name: "credit", Description: "Credit a tenant; the policy denies other tenants.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tenant":{"type":"string"}},"required":["tenant"]}`),
		Approval: approval.Custom(func(c approval.Context) approval.Status {
			var v struct{ Tenant string }
			if err := c.Input(&v); err != nil || v.Tenant != "acme" {
				return approval.Deny("not your tenant")
			}
			return approval.Skip()
		}),
		Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
			record("credit", in)
			return map[string]any{"credited": 5}, nil
		}}
	ping := &tools.Tool{Name: "ping", Description: "Does nothing.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
			record("ping", in)
			return map[string]any{"pong": true}, nil
		}}
	choose := tools.DefineClient("choose_plan", "Ask the user to choose a plan.",
		json.RawMessage(`{"type":"object","properties":{}}`),
		tools.Client{Request: tools.InputRequest{Prompt: "Choose a plan", Options: []protocol.InputOption{
			{ID: "basic", Label: "Basic"}, {ID: "pro", Label: "Pro"},
		}}})
	report := tools.DefineDelegated("run_report", "Run a report in an external job.",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		json.RawMessage(`{"type":"object","properties":{"rows":{"type":"integer"}},"required":["rows"]}`),
		tools.Delegated{Deadline: reportDeadline, Delegate: func(ctx *tools.Context, in json.RawMessage, a tools.Action) (tools.Pending, error) {
			record("run_report", in)
			h.jobs <- a
			return a.Pending(), nil
		}})
	return []*tools.Tool{refund, lookup, credit, ping, choose, report}
}

// executed lists the tool calls that ran, "tool:input".
func (h *harness) executed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ran...)
}

// turnInput starts turn 0 of session s1 for alice.
func turnInput(message string) workflows.TurnInput {
	return workflows.TurnInput{
		SessionID: "s1", TurnID: "turn_0", Message: message, DeliveryIDs: []string{"dlv_0"},
		Auth:   auth.Auth{Current: alice, Initiator: alice},
		Config: workflows.Config{AgentName: "wftest", ModelID: "scripted:wftest", LocalModel: true},
	}
}

// turnWorkflowID is the id the session gives turn seq of session s1; turn
// tests start their turn under it too.
func turnWorkflowID(seq int) string { return fmt.Sprintf("s1/turn_%d", seq) }

// runTurn runs the turn workflow to its end and returns its output.
func (h *harness) runTurn(in workflows.TurnInput) workflows.TurnOutput {
	h.t.Helper()
	h.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: turnWorkflowID(in.Sequence)})
	h.ExecuteWorkflow(signals.TurnWorkflow, in)
	if !h.IsWorkflowCompleted() {
		h.t.Fatal("the turn did not complete")
	}
	if err := h.GetWorkflowError(); err != nil {
		h.t.Fatalf("turn workflow error: %v", err)
	}
	var out workflows.TurnOutput
	if err := h.GetWorkflowResult(&out); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// runSession runs the session workflow s1 until it ends (continue-as-new
// or cancellation) and returns how it ended.
func (h *harness) runSession(in workflows.SessionInput) error {
	h.t.Helper()
	h.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: in.SessionID})
	h.ExecuteWorkflow(signals.SessionWorkflow, in)
	if !h.IsWorkflowCompleted() {
		h.t.Fatal("the session did not end")
	}
	return h.GetWorkflowError()
}

// at runs step when the workflow has been blocked up to d of workflow time:
// the environment skips time only while no activity runs, so step sees the
// workflow parked (or idle), never halfway through a step.
func (h *harness) at(d time.Duration, step func()) { h.RegisterDelayedCallback(step, d) }

// turnEvents reads a running turn's events through its query.
func (h *harness) turnEvents(wid string) []protocol.Event {
	h.t.Helper()
	v, err := h.QueryWorkflowByID(wid, signals.QueryTurnEvents, 0)
	if err != nil {
		h.t.Errorf("query %s events: %v", wid, err)
		return nil
	}
	var evs []protocol.Event
	if err := v.Get(&evs); err != nil {
		h.t.Error(err)
	}
	return evs
}

// sessionEvents reads the events the session holds from index from.
func (h *harness) sessionEvents(from int) signals.EventsPage {
	h.t.Helper()
	var page signals.EventsPage
	v, err := h.QueryWorkflow(signals.QueryEvents, signals.EventsQuery{From: from})
	if err != nil {
		h.t.Errorf("query events: %v", err)
		return page
	}
	if err := v.Get(&page); err != nil {
		h.t.Error(err)
	}
	return page
}

// parkedOn checks that a running turn waits (on "input" or "tasks") in its
// current step and returns the step's requests still open.
func (h *harness) parkedOn(wid, on string) []protocol.InputRequest {
	h.t.Helper()
	evs := h.turnEvents(wid)
	step := 0
	for i, e := range evs {
		if e.Type == protocol.StepStarted {
			step = i
		}
	}
	waiting := false
	var open []protocol.InputRequest
	for _, e := range evs[step:] {
		switch e.Type {
		case protocol.TurnWaiting:
			var w protocol.TurnWaitingData
			decode(h.t, e, &w)
			waiting = waiting || w.On == on
		case protocol.InputRequested:
			var d protocol.InputRequestedData
			decode(h.t, e, &d)
			open = append(open, d.Requests...)
		case protocol.InputResolved:
			var d protocol.InputResolvedData
			decode(h.t, e, &d)
			for _, r := range d.Resolutions {
				if r.Outcome != protocol.OutcomeInvalid {
					open = slices.DeleteFunc(open, func(q protocol.InputRequest) bool { return q.RequestID == r.RequestID })
				}
			}
		case protocol.StepCompleted, protocol.TurnCompleted, protocol.TurnFailed, protocol.TurnCancelled:
			waiting = false
		}
	}
	if !waiting {
		h.t.Errorf("%s does not wait on %s: %s", wid, on, join(evs))
	}
	return open
}

// updates numbers the Updates sent, unique across harnesses (a session
// derives delivery ids from them, and they must not repeat across runs).
var updates atomic.Int64

// update is the outcome of one Update, filled in by its callbacks.
type update[T any] struct {
	accepted, rejected, completed bool
	rejection                     error
	result                        T
	err                           error
}

// sendUpdate sends an Update to the workflow wid ("" for the one under
// test) and records what becomes of it.
func sendUpdate[T any](h *harness, wid, name string, arg any) *update[T] {
	u := &update[T]{}
	cb := &testsuite.TestUpdateCallback{
		OnAccept: func() { u.accepted = true },
		OnReject: func(err error) { u.rejected, u.rejection = true, err },
		OnComplete: func(v any, err error) {
			u.completed, u.err = true, err
			if err == nil && v != nil {
				u.result = v.(T)
			}
		},
	}
	id := fmt.Sprintf("upd_%d", updates.Add(1))
	if wid == "" {
		h.UpdateWorkflow(name, id, cb, arg)
	} else if err := h.UpdateWorkflowByID(wid, name, id, cb, arg); err != nil {
		h.t.Errorf("update %s of %s: %v", name, wid, err)
	}
	return u
}

// respond answers requests of turn wid with the respond Update.
func (h *harness) respond(wid string, resps ...protocol.InputResponse) *update[signals.RespondResult] {
	return sendUpdate[signals.RespondResult](h, wid, signals.UpdateRespond, signals.RespondRequest{Responses: resps, Responder: alice})
}

// send delivers a user message to the session under test.
func (h *harness) send(req signals.SendRequest) *update[signals.SendResult] {
	return sendUpdate[signals.SendResult](h, "", signals.UpdateSend, req)
}

// completeJob completes a delegated call's activity as the API server does
// after a settle: with an eve ActionResult.
func (h *harness) completeJob(a tools.Action, output string) {
	h.t.Helper()
	res := signals.ActionResult{Kind: signals.ResultKind, Status: protocol.StatusCompleted, Output: json.RawMessage(output)}
	if err := h.CompleteActivity(a.TaskToken, res, nil); err != nil {
		h.t.Errorf("complete activity: %v", err)
	}
}

// nextJob returns the action of the delegated call whose job started last.
func (h *harness) nextJob() tools.Action {
	h.t.Helper()
	select {
	case a := <-h.jobs:
		return a
	default:
		h.t.Error("no delegated job started")
		return tools.Action{}
	}
}

// errType is the application error type of err ("" if none).
func errType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// Event helpers.

func types(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func join(evs []protocol.Event) string { return strings.Join(types(evs), " ") }

func of(evs []protocol.Event, typ string) []protocol.Event {
	var out []protocol.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func decode(t *testing.T, e protocol.Event, v any) {
	t.Helper()
	if err := e.Decode(v); err != nil {
		t.Errorf("decode %s: %v", e.Type, err)
	}
}

// wantTypes checks the exact sequence of event types.
func wantTypes(t *testing.T, evs []protocol.Event, want ...string) {
	t.Helper()
	if got := join(evs); got != strings.Join(want, " ") {
		t.Fatalf("events\n got: %s\nwant: %s", got, strings.Join(want, " "))
	}
}

// results decodes every action.result.
func results(t *testing.T, evs []protocol.Event) []protocol.ActionResultData {
	t.Helper()
	var out []protocol.ActionResultData
	for _, e := range of(evs, protocol.ActionResult) {
		var d protocol.ActionResultData
		decode(t, e, &d)
		out = append(out, d)
	}
	return out
}

// resolutions decodes every input.resolved.
func resolutions(t *testing.T, evs []protocol.Event) []protocol.InputResolution {
	t.Helper()
	var out []protocol.InputResolution
	for _, e := range of(evs, protocol.InputResolved) {
		var d protocol.InputResolvedData
		decode(t, e, &d)
		out = append(out, d.Resolutions...)
	}
	return out
}

// reply is the text of the last message.completed.
func reply(t *testing.T, evs []protocol.Event) string {
	t.Helper()
	mc := of(evs, protocol.MessageCompleted)
	if len(mc) == 0 {
		t.Fatalf("no message.completed: %s", join(evs))
	}
	var d protocol.MessageCompletedData
	decode(t, mc[len(mc)-1], &d)
	return d.Message
}

// memStore is a payload store in memory.
type memStore struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func newMemStore() *memStore { return &memStore{objs: map[string][]byte{}} }

func (s *memStore) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[key] = append([]byte(nil), data...)
	return nil
}

func (s *memStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, payloadstore.ErrNotFound)
	}
	return b, nil
}

func (s *memStore) Location() string { return "mem:" }

// actionState reads one delegated action through the turn's query.
func (h *harness) actionState(wid, actionID string) signals.ActionState {
	h.t.Helper()
	var st signals.ActionState
	v, err := h.QueryWorkflowByID(wid, signals.QueryAction, actionID)
	if err != nil {
		h.t.Errorf("query action %s: %v", actionID, err)
		return st
	}
	if err := v.Get(&st); err != nil {
		h.t.Error(err)
	}
	return st
}
