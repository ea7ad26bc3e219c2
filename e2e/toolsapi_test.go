package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

// tapiEnv is a worker serving the tools test agent, the tools API over
// HTTP, and a Go client of it.
type tapiEnv struct {
	*evetest.Env
	agent *agent.Agent
	svc   *toolsapi.Service
	url   string
	c     *toolsclient.Client
	count atomic.Int64 // side effects of "counter"
	jobs  chan tools.Action
}

// tapiTools: counter counts its side effects; slow sleeps (heartbeating)
// for its input's ms; fail always fails; report is delegated.
func (e *tapiEnv) tools() []*tools.Tool {
	counter := tools.Func("counter", "Add one to a counter and return the new value, with the input's label.",
		func(ctx *tools.Context, in struct {
			Label string `json:"label"`
		}) (map[string]any, error) {
			cur := ctx.Session.Auth.Current
			return map[string]any{"n": e.count.Add(1), "label": in.Label, "user": cur.ID, "type": cur.Type, "key": ctx.IdempotencyKey}, nil
		})
	counter.InputSchema = json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","minLength":1}},"required":["label"],"additionalProperties":false}`)
	counter.OutputSchema = nil
	slow := tools.Func("slow", "Wait for the given number of milliseconds.",
		func(ctx *tools.Context, in struct {
			Ms int `json:"ms"`
		}) (map[string]int, error) {
			deadline := time.Now().Add(time.Duration(in.Ms) * time.Millisecond)
			for time.Now().Before(deadline) {
				ctx.Heartbeat()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
			return map[string]int{"waited": in.Ms}, nil
		})
	slow.OutputSchema = nil
	slow.HeartbeatTimeout = 2 * time.Second
	fail := tools.Func("fail", "Always fails.", func(ctx *tools.Context, in struct{}) (struct{}, error) {
		return struct{}{}, tools.NonRetryable(errors.New("the printer is on fire"))
	})
	fail.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	report := tools.DefineDelegated("report", "Run a durable external report job.",
		json.RawMessage(`{"type":"object","properties":{"spec":{"type":"string"}},"required":["spec"]}`),
		json.RawMessage(`{"type":"object","properties":{"status":{"enum":["succeeded","failed"]},"detail":{"type":"string"}},"required":["status","detail"]}`),
		tools.Delegated{Deadline: time.Hour, Delegate: func(ctx *tools.Context, input json.RawMessage, a tools.Action) (tools.Pending, error) {
			e.jobs <- a
			return a.Pending(), nil
		}})
	return []*tools.Tool{counter, slow, fail, report}
}

// startExecutionWorker runs a worker for a that also serves executions
// (agent.Register registers them), sending heartbeats as evetest's workers
// do (evetest.HeartbeatThrottle).
func startExecutionWorker(t testing.TB, env *evetest.Env, a *agent.Agent) {
	t.Helper()
	startExecutionWorkerHost(t, env, a, agent.Host{})
}

// startExecutionWorkerHost is startExecutionWorker with what the worker
// wires in (an empty Store is the server's payload store).
func startExecutionWorkerHost(t testing.TB, env *evetest.Env, a *agent.Agent, h agent.Host) {
	t.Helper()
	if h.Store == nil {
		h.Store = env.Server.PayloadStore()
	}
	w := worker.New(env.Client, env.TaskQueue, worker.Options{MaxHeartbeatThrottleInterval: evetest.HeartbeatThrottle})
	if err := agent.Register(w, a, h); err != nil { // executions too, with h.Notifier
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

func newTapiEnv(t *testing.T, mut func(*toolsapi.Options)) *tapiEnv {
	t.Helper()
	env := evetest.New(t)
	e := &tapiEnv{Env: env, jobs: make(chan tools.Action, 10)}
	a := evetest.Agent(t, `rules: []`, e.tools()...)
	a.Name = "ops"
	cfg, _, _ := env.Actions()
	startExecutionWorkerHost(t, env, a, agent.Host{Actions: cfg})
	opts := toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 20 * time.Second}
	if mut != nil {
		mut(&opts)
	}
	svc, err := toolsapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	e.agent, e.svc, e.url = a, svc, hs.URL
	e.c = toolsclient.New(hs.URL, "", toolsclient.WithUserID("user_42"))
	return e
}

func TestToolsAPIIdempotentExecute(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(60 * time.Second)
	opts := toolsclient.ExecuteToolOptions{Input: map[string]string{"label": "a"}, IdempotencyKey: "draft:42"}
	first, err := e.c.Tools.Execute(ctx, "ops.counter", opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != catalog.StatusSucceeded || !strings.HasPrefix(first.ID, toolsapi.ExecutionIDPrefix) {
		t.Fatalf("first = %+v", first)
	}
	var out map[string]any
	_ = json.Unmarshal(first.Output, &out)
	if out["n"] != 1.0 || out["user"] != "user_42" || out["key"] != first.ID+"/"+signals.ExecutionCallID {
		t.Fatalf("output = %v", out)
	}
	// The same key, again and concurrently: the same execution, no new side effect.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := e.c.Tools.Execute(ctx, "ops.counter", opts)
			ids[i], errs[i] = r.ID, err
			if err == nil && string(r.Output) != string(first.Output) {
				errs[i] = fmt.Errorf("output %s, want %s", r.Output, first.Output)
			}
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != first.ID {
			t.Fatalf("repeat %d: id %s err %v (want %s)", i, ids[i], errs[i], first.ID)
		}
	}
	if n := e.count.Load(); n != 1 {
		t.Fatalf("side effects = %d, want 1", n)
	}
	// Concurrent first calls of a new key join one execution too.
	opts.IdempotencyKey = "draft:43"
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := e.c.Tools.Execute(ctx, "ops.counter", opts)
			ids[i], errs[i] = r.ID, err
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] || ids[0] == first.ID {
			t.Fatalf("concurrent new key %d: %s %v", i, ids[i], errs[i])
		}
	}
	if n := e.count.Load(); n != 2 {
		t.Fatalf("side effects = %d, want 2", n)
	}
	// Another user with the same key is another execution.
	other, err := e.c.Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{UserID: "user_7", Input: map[string]string{"label": "a"}, IdempotencyKey: "draft:42"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("other user: %+v %v", other, err)
	}
	// The same key with other input is refused.
	_, err = e.c.Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{Input: map[string]string{"label": "b"}, IdempotencyKey: "draft:42"})
	var ae *toolsclient.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "idempotency_conflict" || ae.ExecutionID != first.ID {
		t.Fatalf("conflict: %v", err)
	}
	// Without a key, every call is a fresh execution.
	a, err1 := e.c.Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{Input: map[string]string{"label": "a"}})
	b, err2 := e.svc.Execute(ctx, "ops.counter", catalog.ExecuteToolOptions{Input: json.RawMessage(`{"label":"a"}`)})
	if err1 != nil || err2 != nil || a.ID == b.ID || a.ID == first.ID {
		t.Fatalf("no key: %s %s %v %v", a.ID, b.ID, err1, err2)
	}
	if n := e.count.Load(); n != 5 {
		t.Fatalf("side effects = %d, want 5", n)
	}
	// Fetch by id.
	got, err := e.c.Executions.Get(ctx, first.ID)
	if err != nil || got.Status != catalog.StatusSucceeded || string(got.Output) != string(first.Output) || got.Tool != "ops.counter" {
		t.Fatalf("get = %+v %v", got, err)
	}
	if _, err := e.c.Executions.Get(ctx, toolsapi.ExecutionID(e.TaskQueue, "x", "y", "z")); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("unknown execution: %v", err)
	}
}

func TestToolsAPIValidationAndRefusals(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(30 * time.Second)
	var ae *toolsclient.APIError
	_, err := e.c.Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{Input: map[string]any{"label": "", "extra": 1}})
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != catalog.CodeInvalidInput || len(ae.Violations) != 2 || ae.Tool != "ops.counter" {
		t.Fatalf("invalid input: %v %+v", err, ae)
	}
	_, err = e.c.Tools.Execute(ctx, "ops.ask_question", toolsclient.ExecuteToolOptions{Input: map[string]any{"question": "why?"}})
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != signals.CodeNotExecutable || !strings.Contains(ae.Message, "client tool") {
		t.Fatalf("client tool: %v", err)
	}
	_, err = e.c.Tools.Execute(ctx, "ops.nope", toolsclient.ExecuteToolOptions{})
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("unknown tool: %v", err)
	}
	if e.count.Load() != 0 {
		t.Fatal("a refused call ran")
	}
	// A failing tool is a failed execution, and Run's error.
	res, err := e.c.Tools.Execute(ctx, "ops.fail", toolsclient.ExecuteToolOptions{})
	if err != nil || res.Status != catalog.StatusFailed || res.Error == nil || !strings.Contains(res.Error.Message, "printer is on fire") || res.Error.Code != catalog.CodeExecutionFailed {
		t.Fatalf("fail: %+v %v", res, err)
	}
	_, err = e.c.Tools.Run(ctx, "ops.fail", nil, toolsclient.RunToolOptions{})
	var fe *toolsclient.ExecutionFailedError
	if !errors.As(err, &fe) || fe.Result.Status != catalog.StatusFailed {
		t.Fatalf("run fail: %v", err)
	}
}

func TestToolsAPIRunTimeoutAndCancel(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(60 * time.Second)
	out, err := e.c.Tools.Run(ctx, "ops.slow", map[string]int{"ms": 10}, toolsclient.RunToolOptions{Timeout: 20 * time.Second})
	if err != nil || string(out) != `{"waited":10}` {
		t.Fatalf("run = %s %v", out, err)
	}
	// The run's 300 ms timeout ends it long before the 3 s tool does, even
	// on a loaded machine; the execution's status, not yet terminal, shows
	// that the run answered at its timeout, not at the execution's end.
	_, err = e.c.Tools.Run(ctx, "ops.slow", map[string]int{"ms": 3000}, toolsclient.RunToolOptions{Timeout: 300 * time.Millisecond})
	var rt *toolsclient.RunTimeoutError
	if !errors.As(err, &rt) || rt.ExecutionID == "" || rt.Status.Terminal() || !strings.Contains(rt.Message, "goes on") || !strings.Contains(rt.Message, rt.ExecutionID) {
		t.Fatalf("run timeout: %v", err)
	}
	// The execution goes on and finishes.
	res, err := e.c.Executions.Wait(ctx, rt.ExecutionID, 100*time.Millisecond)
	if err != nil || res.Status != catalog.StatusSucceeded || string(res.Output) != `{"waited":3000}` {
		t.Fatalf("after timeout: %+v %v", res, err)
	}
	// Service-level Run reports the same.
	_, err = e.svc.Run(ctx, "ops.slow", json.RawMessage(`{"ms":3000}`), toolsapi.RunOptions{UserID: "u", Timeout: 200 * time.Millisecond})
	var srt *toolsapi.RunTimeoutError
	if !errors.As(err, &srt) || srt.ExecutionID == "" {
		t.Fatalf("service run timeout: %v", err)
	}
	// Cancel a running execution.
	res, err = e.c.Tools.Execute(ctx, "ops.slow", toolsclient.ExecuteToolOptions{Input: map[string]int{"ms": 30000}, Mode: catalog.ModeAsync})
	if err != nil || res.Status.Terminal() {
		t.Fatalf("async slow: %+v %v", res, err)
	}
	res, err = e.c.Executions.Cancel(ctx, res.ID)
	if err != nil || res.Status != catalog.StatusCanceled || res.Error == nil || res.Error.Code != catalog.CodeCanceled {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	again, err := e.c.Executions.Cancel(ctx, res.ID)
	if err != nil || again.Status != catalog.StatusCanceled {
		t.Fatalf("cancel again: %+v %v", again, err)
	}
}

func TestToolsAPIDelegatedExecution(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(60 * time.Second)
	// Async by nature: execute defaults to async mode.
	res, err := e.c.Tools.Execute(ctx, "ops.report", toolsclient.ExecuteToolOptions{Input: map[string]string{"spec": "q3"}, IdempotencyKey: "report:q3"})
	if err != nil || res.Status.Terminal() {
		t.Fatalf("execute = %+v %v", res, err)
	}
	var a tools.Action
	select {
	case a = <-e.jobs:
	case <-time.After(20 * time.Second):
		t.Fatal("no job")
	}
	if want := signals.ActionID(res.ID, signals.ExecutionCallID); a.ID != want {
		t.Fatalf("action id %s, want %s", a.ID, want)
	}
	// Invalid output: 422, the action stays pending.
	if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "maybe"}); !errors.Is(err, actions.ErrInvalidOutput) {
		t.Fatalf("invalid output: %v", err)
	}
	if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": "42 rows"}); err != nil {
		t.Fatal(err)
	}
	done, err := e.c.Executions.Wait(ctx, res.ID, 100*time.Millisecond)
	if err != nil || done.Status != catalog.StatusSucceeded || string(done.Output) != `{"detail":"42 rows","status":"succeeded"}` {
		t.Fatalf("done = %+v %v", done, err)
	}
	// Duplicate completion: 200; a different one after the end: 409.
	if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": "42 rows"}); err != nil {
		t.Fatalf("duplicate: %v", err)
	}
	if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "failed", "detail": "no"}); !errors.Is(err, actions.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	// The same key joins the ended execution: no second job.
	again, err := e.c.Tools.Execute(ctx, "ops.report", toolsclient.ExecuteToolOptions{Input: map[string]string{"spec": "q3"}, IdempotencyKey: "report:q3"})
	if err != nil || again.ID != res.ID || again.Status != catalog.StatusSucceeded {
		t.Fatalf("again = %+v %v", again, err)
	}
	select {
	case j := <-e.jobs:
		t.Fatalf("second job %s", j.ID)
	default:
	}
	// Cancelling a waiting delegated execution: later completions are 410.
	res, err = e.c.Tools.Execute(ctx, "ops.report", toolsclient.ExecuteToolOptions{Input: map[string]string{"spec": "q4"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case a = <-e.jobs:
	case <-ctx.Done():
		t.Fatal("the delegated execution's job never arrived")
	}
	if res, err = e.c.Executions.Cancel(ctx, res.ID); err != nil || res.Status != catalog.StatusCanceled {
		t.Fatalf("cancel = %+v %v", res, err)
	}
	if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": "late"}); !errors.Is(err, actions.ErrGone) {
		t.Fatalf("late completion: %v", err)
	}
}

// executeToolCalls for both providers, with mapped, unmapped, failing and
// invalid calls: through the HTTP endpoint, through the client's executor
// (one request per call) and through the service's executor directly.
func TestToolsAPIExecuteToolCalls(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(90 * time.Second)
	bundle, err := e.c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle.Anthropic()) != 5 { // counter, slow, fail, report, ask_question
		t.Fatalf("bundle = %+v", bundle.Anthropic())
	}
	nm := bundle.NameMap
	wire := func(n string) string { return nm.CanonicalToWire["ops."+n] }
	acalls := []catalog.AnthropicToolCall{
		{Type: "tool_use", ID: "toolu_1", Name: wire("counter"), Input: json.RawMessage(`{"label":"x"}`)},
		{Type: "tool_use", ID: "toolu_2", Name: "ops.counter", Input: json.RawMessage(`{"label":"x"}`)}, // canonical, not wire: unmapped
		{Type: "tool_use", ID: "toolu_3", Name: wire("fail"), Input: json.RawMessage(`{}`)},
		{Type: "tool_use", ID: "toolu_4", Name: wire("counter"), Input: json.RawMessage(`{"label":""}`)},
		{Type: "tool_use", ID: "toolu_5", Name: wire("ask_question"), Input: json.RawMessage(`{"question":"?"}`)},
	}
	checkAnthropic := func(how string, blocks []catalog.AnthropicToolResultBlock) {
		t.Helper()
		if len(blocks) != len(acalls) {
			t.Fatalf("%s: %d blocks", how, len(blocks))
		}
		for i, b := range blocks {
			if b.Type != "tool_result" || b.ToolUseID != acalls[i].ID {
				t.Fatalf("%s: block %d = %+v", how, i, b)
			}
		}
		if blocks[0].IsError || !strings.Contains(blocks[0].Content, `"label":"x"`) {
			t.Fatalf("%s: ok call = %+v", how, blocks[0])
		}
		for i, want := range map[int]string{1: "unknown_tool", 2: "printer is on fire", 3: "invalid_input", 4: "not_executable"} {
			if !blocks[i].IsError || !strings.Contains(blocks[i].Content, want) {
				t.Fatalf("%s: block %d = %+v, want %s", how, i, blocks[i], want)
			}
		}
	}
	blocks, err := toolsclient.ExecuteAnthropicToolCalls(ctx, e.c, acalls, toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	if err != nil {
		t.Fatal(err)
	}
	checkAnthropic("http", blocks)
	n := e.count.Load()
	// Retrying the same calls joins their executions (key toolcall:<id>).
	blocks, _ = toolsclient.ExecuteAnthropicToolCalls(ctx, e.c, acalls, toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	checkAnthropic("http retry", blocks)
	if e.count.Load() != n {
		t.Fatalf("a retried tool call ran again")
	}
	checkAnthropic("client executor", catalog.ExecuteAnthropicToolCalls(ctx, e.c.Executor(), acalls, catalog.ExecuteToolCallsOptions{NameMap: nm, UserID: "user_9"}))
	checkAnthropic("service executor", e.svc.ExecuteAnthropicToolCalls(ctx, acalls, catalog.ExecuteToolCallsOptions{NameMap: nm, UserID: "user_8"}))

	ocalls, err := catalog.DecodeOpenAIToolCalls([]byte(fmt.Sprintf(`[
		{"id":"call_1","type":"function","function":{"name":%q,"arguments":"{\"label\":\"y\"}"}},
		{"id":"call_2","type":"function","function":{"name":"no_such_tool","arguments":"{}"}},
		{"id":"call_3","type":"function","function":{"name":%q,"arguments":"{}"}},
		{"id":"call_4","type":"custom","custom":{"name":%q,"input":"{\"label\":\"z\"}"}},
		{"id":"call_5","type":"function","function":{"name":%q,"arguments":"{not json"}},
		{"id":"call_6","type":"function","function":{"name":%q,"arguments":"{\"spec\":\"oa\"}"}}
	]`, wire("counter"), wire("fail"), wire("counter"), wire("counter"), wire("report"))))
	if err != nil {
		t.Fatal(err)
	}
	// The delegated call waits for its job: complete it when it shows up.
	go func() {
		for {
			select {
			case a := <-e.jobs:
				_ = actions.Complete(context.Background(), a.Completion, map[string]string{"status": "succeeded", "detail": "oa"})
			case <-ctx.Done():
				return
			}
		}
	}()
	checkOpenAI := func(how string, msgs []catalog.OpenAIToolResultMessage) {
		t.Helper()
		if len(msgs) != len(ocalls) {
			t.Fatalf("%s: %d messages", how, len(msgs))
		}
		for i, m := range msgs {
			if m.Role != "tool" || m.ToolCallID != ocalls[i].CallID() {
				t.Fatalf("%s: message %d = %+v", how, i, m)
			}
		}
		if !strings.Contains(msgs[0].Content, `"label":"y"`) || !strings.Contains(msgs[3].Content, `"label":"z"`) || !strings.Contains(msgs[5].Content, `"detail":"oa"`) {
			t.Fatalf("%s: ok calls = %+v", how, msgs)
		}
		for i, want := range map[int]string{1: "unknown_tool", 2: "printer is on fire", 4: "invalid_input"} {
			var body struct {
				Error catalog.ExecutionError `json:"error"`
			}
			if json.Unmarshal([]byte(msgs[i].Content), &body) != nil || !strings.Contains(body.Error.Code+": "+body.Error.Message, want) {
				t.Fatalf("%s: message %d = %+v, want %s", how, i, msgs[i], want)
			}
		}
	}
	msgs, err := toolsclient.ExecuteOpenAIToolCalls(ctx, e.c, ocalls, toolsclient.ExecuteToolCallsOptions{NameMap: nm, PollMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	checkOpenAI("http", msgs)
	checkOpenAI("client executor", catalog.ExecuteOpenAIToolCalls(ctx, e.c.Executor(), ocalls, catalog.ExecuteToolCallsOptions{NameMap: nm, UserID: "user_9", PollMs: 50}))
	checkOpenAI("service executor", e.svc.ExecuteOpenAIToolCalls(ctx, ocalls, catalog.ExecuteToolCallsOptions{NameMap: nm, UserID: "user_8"}))
}

// One executeToolCalls request starts at most MaxToolCalls executions: a
// request with more is refused whole (400 too_many_calls, naming the limit
// and how to raise it) before any starts.
func TestToolsAPIToolCallsCap(t *testing.T) {
	starts := &startCounter{}
	e := newTapiEnv(t, starts.wrap) // the default cap
	ctx := e.Ctx(60 * time.Second)
	bundle, err := e.c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	nm := bundle.NameMap
	anthropic := func(n int) []catalog.AnthropicToolCall {
		calls := make([]catalog.AnthropicToolCall, n)
		for i := range calls {
			calls[i] = catalog.AnthropicToolCall{Type: "tool_use", ID: fmt.Sprintf("toolu_%d", i), Name: nm.CanonicalToWire["ops.counter"], Input: json.RawMessage(fmt.Sprintf(`{"label":"%d"}`, i))}
		}
		return calls
	}
	refused := func(how string, err error, limit int) {
		t.Helper()
		var ae *toolsclient.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != toolsapi.CodeTooManyCalls ||
			!strings.Contains(ae.Message, fmt.Sprintf("the limit is %d", limit)) || !strings.Contains(ae.Message, "--max-tool-calls") {
			t.Fatalf("%s: %v, want 400 %s naming the limit %d and the flag", how, err, toolsapi.CodeTooManyCalls, limit)
		}
		// Answered after the handler returned: a started execution would
		// be counted already.
		if n := starts.n.Load(); n != 0 {
			t.Fatalf("%s: the refused request started %d executions", how, n)
		}
	}
	_, err = toolsclient.ExecuteAnthropicToolCalls(ctx, e.c, anthropic(100), toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	refused("100 anthropic calls", err, toolsapi.DefaultMaxToolCalls)
	raw := make([]map[string]any, toolsapi.DefaultMaxToolCalls+1)
	for i := range raw {
		raw[i] = map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": nm.CanonicalToWire["ops.counter"], "arguments": `{"label":"o"}`}}
	}
	b, _ := json.Marshal(raw)
	ocalls, err := catalog.DecodeOpenAIToolCalls(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = toolsclient.ExecuteOpenAIToolCalls(ctx, e.c, ocalls, toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	refused(fmt.Sprintf("%d openai calls", len(ocalls)), err, toolsapi.DefaultMaxToolCalls)

	// A server configured with a cap of 3 refuses 4 calls and runs 3.
	svc, err := toolsapi.New(toolsapi.Options{Client: starts, TaskQueue: e.TaskQueue, Agent: e.agent, MaxToolCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := toolsclient.New(hs.URL, "")
	_, err = toolsclient.ExecuteAnthropicToolCalls(ctx, c, anthropic(4), toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	refused("4 calls over a cap of 3", err, 3)
	blocks, err := toolsclient.ExecuteAnthropicToolCalls(ctx, c, anthropic(3), toolsclient.ExecuteToolCallsOptions{NameMap: nm})
	if err != nil || len(blocks) != 3 {
		t.Fatalf("3 calls: %+v %v", blocks, err)
	}
	for i, b := range blocks {
		if b.IsError || !strings.Contains(b.Content, fmt.Sprintf(`"label":"%d"`, i)) {
			t.Fatalf("call %d: %+v", i, b)
		}
	}
	if n := starts.n.Load(); n != 3 || e.count.Load() != 3 {
		t.Fatalf("3 calls started %d executions, ran %d times", n, e.count.Load())
	}
}

func TestToolsAPIGetAndSearch(t *testing.T) {
	e := newTapiEnv(t, nil)
	ctx := e.Ctx(30 * time.Second)
	res, err := e.c.Tools.Search(ctx, catalog.SearchToolsOptions{Query: "external report job", Limit: 3})
	if err != nil || len(res.Tools) == 0 || res.Tools[0].Name != "ops.report" {
		t.Fatalf("search = %+v %v", res, err)
	}
	mcp, err := e.c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatMCP})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range mcp.MCP() {
		if tl.Name == "ops.report" {
			t.Fatal("an async tool was listed without includeAsync")
		}
	}
	mcp, _ = e.c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatMCP, IncludeAsync: true})
	found := false
	for _, tl := range mcp.MCP() {
		found = found || (tl.Name == "ops.report" && tl.Execution != nil && tl.Execution.TaskSupport == "required")
	}
	if !found {
		t.Fatalf("includeAsync: %+v", mcp.MCP())
	}
	info, err := e.c.Tools.Describe(ctx, "ops.ask_question")
	if err != nil || info.Executable || info.Tool.Name != "ops.ask_question" {
		t.Fatalf("describe = %+v %v", info, err)
	}
	oa, err := e.c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatOpenAI, Strict: true, Toolkits: []string{"ops"}})
	if err != nil || len(oa.OpenAI()) != 5 || oa.OpenAI()[0].Function.Strict == nil {
		t.Fatalf("openai = %+v %v", oa, err)
	}
}
