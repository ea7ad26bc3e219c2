package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func TestMain(m *testing.M) {
	if workerMain() || mcpMain() {
		return
	}
	devtest.Main(m)
}

// A two-turn session in which the scripted model calls an authored tool;
// the events come in protocol order with stable ids.
func TestTwoTurnSessionWithTool(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)

	id, err := env.Sessions.Create(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r1 := env.SendAndWait(ctx, id, "what's the weather in Paris")
	if r1.Outcome == nil || r1.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("turn 1 outcome = %+v", r1.Outcome)
	}
	if !strings.Contains(r1.Outcome.Reply, "in Paris") || !strings.Contains(r1.Outcome.Reply, "°C") {
		t.Fatalf("turn 1 reply = %q, want the weather in Paris", r1.Outcome.Reply)
	}
	r2 := env.SendAndWait(ctx, id, "what's the weather in Rome?")
	if !strings.Contains(r2.Outcome.Reply, "in Rome") {
		t.Fatalf("turn 2 reply = %q", r2.Outcome.Reply)
	}
	if r2.TurnID != "turn_1" || r1.TurnID != "turn_0" {
		t.Fatalf("turn ids = %s, %s", r1.TurnID, r2.TurnID)
	}

	evs := env.Events(ctx, id)
	turn := "turn.started message.received step.started actions.requested action.result step.completed step.started message.appended message.completed step.completed turn.completed session.waiting"
	if got, want := evetest.Join(evs), "session.started "+turn+" "+turn; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	seen := map[string]bool{}
	for i, e := range evs {
		if !strings.HasPrefix(e.Meta.ID, "evt_") || seen[e.Meta.ID] {
			t.Fatalf("event %d id %q: want a unique evt_ id", i, e.Meta.ID)
		}
		seen[e.Meta.ID] = true
		if _, err := time.Parse(time.RFC3339Nano, e.Meta.At); err != nil {
			t.Fatalf("event %d at %q: %v", i, e.Meta.At, err)
		}
	}
	// Turn events carry the delivery id; session events don't.
	if len(evs[1].Meta.DeliveryIDs) != 1 || evs[1].Meta.DeliveryIDs[0] != r1.DeliveryID {
		t.Fatalf("turn.started deliveryIds = %v, want [%s]", evs[1].Meta.DeliveryIDs, r1.DeliveryID)
	}
	var ar protocol.ActionResultData
	if err := evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar); err != nil {
		t.Fatal(err)
	}
	if ar.Status != protocol.StatusCompleted || ar.Result.ToolName != "get_weather" || !strings.Contains(string(ar.Result.Output), `"city":"Paris"`) {
		t.Fatalf("action.result = %+v output %s", ar, ar.Result.Output)
	}
	// Reading again (a stream replay) yields the same ids in the same order.
	again := env.Events(ctx, id)
	for i := range evs {
		if again[i].Meta.ID != evs[i].Meta.ID {
			t.Fatalf("replay changed id %d: %s vs %s", i, again[i].Meta.ID, evs[i].Meta.ID)
		}
	}
	tail, err := env.Sessions.Events(ctx, id, len(evs)-2)
	if err != nil || len(tail) != 2 || tail[1].Type != protocol.SessionWaiting {
		t.Fatalf("events from %d = %v, %v", len(evs)-2, evetest.Types(tail), err)
	}
}

// countingTool counts executions, so a test can prove a tool did not run.
func countingTool(name string, n *atomic.Int32, out any) *tools.Tool {
	return &tools.Tool{
		Name:         name,
		Description:  "Test tool that counts its runs.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
		Execute: func(ctx *tools.Context, input json.RawMessage) (any, error) {
			n.Add(1)
			return out, nil
		},
	}
}

func TestInvalidInputGoesBackToModelAndToolDoesNotRun(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: count, inputJSON: '{"n": "zero"}'}]
      - reply: "model saw: {{result.count.error}}"
`, countingTool("count", &runs, map[string]bool{"ok": true})))
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "go", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 0 {
		t.Fatalf("tool ran %d times on invalid input", runs.Load())
	}
	if !strings.Contains(res.Outcome.Reply, "invalid input for tool count") || !strings.Contains(res.Outcome.Reply, "/n") {
		t.Fatalf("reply = %q: the model should see the schema error naming /n", res.Outcome.Reply)
	}
	evs := env.Events(ctx, res.SessionID)
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if ar.Status != protocol.StatusFailed || ar.Error == nil || ar.Error.Code != protocol.CodeToolInputInvalid || !ar.Result.IsError {
		t.Fatalf("action.result = %+v", ar)
	}
}

func TestOutputBreakingSchemaIsToolError(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: count, input: {n: 1}}]
      - reply: "model saw: {{result.count.code}}"
`, countingTool("count", &runs, map[string]string{"ok": "not a bool"})))
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "go", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != "model saw: "+protocol.CodeToolOutputInvalid {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times; an output violation must not be retried", runs.Load())
	}
}

func TestToolErrorRetriedThenReported(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	flaky := &tools.Tool{
		Name: "flaky", Description: "Fails twice, then works.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Retry:       &tools.RetryPolicy{InitialInterval: 10 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 3},
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			n := runs.Add(1)
			if ctx.Attempt < 3 {
				return nil, fmt.Errorf("transient failure %d", n)
			}
			return map[string]any{"attempt": ctx.Attempt, "key": ctx.IdempotencyKey}, nil
		},
	}
	broken := &tools.Tool{
		Name: "broken", Description: "Always fails, and says it is not worth retrying.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			return nil, tools.NonRetryable(fmt.Errorf("quota exhausted"))
		},
	}
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: flaky}, {tool: broken}]
      - reply: "{{results.0.attempt}} {{results.0.key}} | {{results.1.error}}"
`, flaky, broken))
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "ses_retry_"+fmt.Sprint(time.Now().UnixNano()), nil, signals.SendRequest{Message: "go", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("3 %s/%s/call_1_0 | tool broken failed: quota exhausted", res.SessionID, res.TurnID)
	if res.Outcome.Reply != want {
		t.Fatalf("reply = %q, want %q", res.Outcome.Reply, want)
	}
	if runs.Load() != 3 {
		t.Fatalf("flaky ran %d times, want 3", runs.Load())
	}
}

func TestMaxStepsEndsTurnWithClearFailure(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	a := evetest.Agent(t, `
rules:
  - match: loop
    steps:
      - calls: [{tool: count, input: {n: 1}}]
`, countingTool("count", &runs, map[string]bool{"ok": true}))
	a.MaxSteps = 3
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "loop", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != signals.TurnStatusFailed || !strings.Contains(res.Outcome.Error, "3 model steps") {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
	evs := env.Events(ctx, res.SessionID)
	failed := evetest.Of(evs, protocol.TurnFailed)
	if len(failed) != 1 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var d protocol.TurnFailedData
	failed[0].Decode(&d)
	if d.Code != "MAX_STEPS_EXCEEDED" || runs.Load() != 3 || evs[len(evs)-1].Type != protocol.SessionWaiting {
		t.Fatalf("turn.failed = %+v, runs %d, last %s", d, runs.Load(), evs[len(evs)-1].Type)
	}
	// The session still takes the next message.
	res2 := env.SendAndWait(ctx, res.SessionID, "hello")
	if res2.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("next turn = %+v", res2.Outcome)
	}
}

func TestConcurrentToolCallsKeepOrder(t *testing.T) {
	env := evetest.New(t)
	a, _ := demo.Agent()
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "compare Paris and Oslo", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Outcome.Reply, "Paris: ") || !strings.Contains(res.Outcome.Reply, ". Oslo: ") {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	evs := env.Events(ctx, res.SessionID)
	var req protocol.ActionsRequestedData
	evetest.Of(evs, protocol.ActionsRequested)[0].Decode(&req)
	if len(req.Actions) != 2 || len(evetest.Of(evs, protocol.ActionResult)) != 2 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
}

func TestUnknownToolAndEmptyMessage(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, `
rules:
  - match: go
    steps:
      - calls: [{tool: nope}]
      - reply: "{{result.nope.code}}"
`))
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "go", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Reply != protocol.CodeToolNotFound {
		t.Fatalf("reply = %q", res.Outcome.Reply)
	}
	before := len(env.Events(ctx, res.SessionID))
	_, err = env.Sessions.Send(ctx, res.SessionID, signals.SendRequest{Message: "  "})
	if err == nil || !strings.Contains(err.Error(), "message is empty") {
		t.Fatalf("empty message: err = %v", err)
	}
	if after := len(env.Events(ctx, res.SessionID)); after != before {
		t.Fatalf("a rejected message must record nothing; %d events became %d", before, after)
	}
}
