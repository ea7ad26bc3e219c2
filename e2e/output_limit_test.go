package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

const outputLimitRules = `
rules:
  - match: "dump (\\d+)"
    steps:
      - calls: [{tool: dump, inputJSON: '{"bytes": {{1}}}'}]
      - reply: "{{result.dump.code}}{{result.dump.n}}: {{result.dump.error}}"
  - match: "job"
    steps:
      - calls: [{tool: job, input: {}}]
      - reply: "{{result.job.code}}{{result.job.n}}: {{result.job.error}}"
  - match: "pick"
    steps:
      - calls: [{tool: pick, input: {}}]
      - reply: "picked {{result.pick.text}}"
  - match: hello
    reply: hi
`

// olDump returns {"n": bytes, "data": "xxx…"} (bytes+20 or so bytes of JSON).
func olDump(limit int) *tools.Tool {
	t := tools.Func("dump", "Return a blob of the given size.",
		func(ctx *tools.Context, in struct {
			Bytes int `json:"bytes"`
		}) (map[string]any, error) {
			return map[string]any{"n": in.Bytes, "data": strings.Repeat("x", in.Bytes)}, nil
		})
	t.OutputSchema = nil
	t.MaxOutputBytes = limit
	return t
}

func olOutputSize(n int) int {
	b, _ := json.Marshal(map[string]any{"n": n, "data": strings.Repeat("x", n)})
	return len(b)
}

func olJob(jobs chan tools.Action, limit int) *tools.Tool {
	t := tools.DefineDelegated("job", "Run an external job.", json.RawMessage(`{"type":"object"}`), nil,
		tools.Delegated{Deadline: time.Hour, Delegate: func(ctx *tools.Context, _ json.RawMessage, a tools.Action) (tools.Pending, error) {
			jobs <- a
			return a.Pending(), nil
		}})
	t.MaxOutputBytes = limit
	return t
}

func olPick(limit int) *tools.Tool {
	t := tools.DefineClient("pick", "Ask the user for a word.", json.RawMessage(`{"type":"object"}`),
		tools.Client{Request: tools.InputRequest{Prompt: "Say a word"}})
	t.MaxOutputBytes = limit
	return t
}

// olTooLarge checks that the turn completed with the model's answer to
// TOOL_OUTPUT_TOO_LARGE, and that the session takes another message.
func olTooLarge(t *testing.T, env *evetest.Env, n, limit int) {
	t.Helper()
	ctx := env.Ctx(90 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: fmt.Sprintf("dump %d", n), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("TOOL_OUTPUT_TOO_LARGE: tool dump returned %d bytes of output; the limit is %d (tools.Tool.MaxOutputBytes). Return less (page or summarize) or raise the tool's MaxOutputBytes.", olOutputSize(n), limit)
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != want {
		t.Fatalf("outcome = %+v\nwant reply %q", res.Outcome, want)
	}
	evs := env.Events(ctx, res.SessionID)
	var ar protocol.ActionResultData
	if err := evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar); err != nil {
		t.Fatal(err)
	}
	if ar.Status != protocol.StatusFailed || ar.Error == nil || ar.Error.Code != protocol.CodeToolOutputTooLarge || len(ar.Result.Output) > 1000 {
		t.Fatalf("action.result = %+v (%d bytes of output)", ar, len(ar.Result.Output))
	}
	if r := env.SendAndWait(ctx, res.SessionID, "hello"); r.Outcome == nil || r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != "hi" {
		t.Fatalf("next turn: %+v", r.Outcome)
	}
}

func TestOutputLimitDefaultTooLargeTurnGoesOn(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, outputLimitRules, olDump(0)))
	olTooLarge(t, env, 1572864, tools.DefaultMaxOutputBytes)
}

func TestOutputLimitFiveMegabytes(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, outputLimitRules, olDump(0)))
	olTooLarge(t, env, 5<<20, tools.DefaultMaxOutputBytes)
}

// A raised limit lets 1.5 MB through in full. (This needs payloads above
// Temporal's blob limits to leave history: External Storage.) The reply is
// not checked: a conversation this large may be compacted before the
// model's next step, and the scripted model then answers by default.
func TestOutputLimitRaisedLetsLargeOutputThrough(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, outputLimitRules, olDump(2<<20)))
	ctx := env.Ctx(90 * time.Second)
	const n = 1572864
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: fmt.Sprintf("dump %d", n), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
	evs := waitFor(t, env, res.SessionID, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	ars := evetest.Of(evs, protocol.ActionResult)
	if len(ars) != 1 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
	var ar protocol.ActionResultData
	ars[0].Decode(&ar)
	var out struct {
		N    int    `json:"n"`
		Data string `json:"data"`
	}
	if err := json.Unmarshal(ar.Result.Output, &out); err != nil || ar.Status != protocol.StatusCompleted || out.N != n || len(out.Data) != n {
		t.Fatalf("action.result status %s, %d bytes of output (%v)", ar.Status, len(ar.Result.Output), err)
	}
	if r := env.SendAndWait(ctx, res.SessionID, "hello"); r.Outcome == nil || r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != "hi" {
		t.Fatalf("next turn: %+v", r.Outcome)
	}
}

// Delegated completions over the limit: 422 naming size and limit, the
// action stays pending and a smaller completion settles it. A raw
// task-token completion over the limit fails the call instead.
func TestOutputLimitDelegatedCompletion(t *testing.T) {
	env := evetest.New(t)
	cfg, _, _ := env.Actions()
	jobs := make(chan tools.Action, 4)
	a := evetest.Agent(t, outputLimitRules, olJob(jobs, 0))
	env.StartWorkerHost(a, agent.Host{Actions: cfg})
	ctx := env.Ctx(90 * time.Second)
	start := func() (string, tools.Action) {
		t.Helper()
		res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "job"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case j := <-jobs:
			return res.SessionID, j
		case <-time.After(20 * time.Second):
			t.Fatal("no job was enqueued")
		}
		return "", tools.Action{}
	}
	reply := func(id string) string {
		t.Helper()
		evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
		mc := evetest.Of(evs, protocol.MessageCompleted)
		var m protocol.MessageCompletedData
		mc[len(mc)-1].Decode(&m)
		return m.Message
	}

	id, j := start()
	const n = 1572864
	big, _ := json.Marshal(map[string]any{"output": map[string]any{"n": n, "data": strings.Repeat("x", n)}})
	st, body := post(t, j.Completion.URL, string(big))
	want := fmt.Sprintf("output is %d bytes; tool job accepts at most %d (tools.Tool.MaxOutputBytes)", olOutputSize(n), tools.DefaultMaxOutputBytes)
	if st != http.StatusUnprocessableEntity || !strings.Contains(body, "invalid_output") || !strings.Contains(body, want) {
		t.Fatalf("1.5 MB completion: %d %s\nwant 422 with %q", st, body, want)
	}
	err := actions.Complete(ctx, j.Completion, map[string]any{"n": 1100000, "data": strings.Repeat("y", 1100000)})
	if !errors.Is(err, actions.ErrInvalidOutput) || !strings.Contains(err.Error(), "accepts at most 1048576") {
		t.Fatalf("actions.Complete over the limit: %v", err)
	}
	// Still pending: a completion within the limit settles it.
	if err := actions.Complete(ctx, j.Completion, map[string]any{"n": 7}); err != nil {
		t.Fatal(err)
	}
	if got := reply(id); got != "7: " {
		t.Fatalf("reply = %q", got)
	}

	// A raw task-token completion skips the API: the call fails with the reason.
	id, j = start()
	result := signals.ActionResult{Kind: signals.ResultKind, Status: protocol.StatusCompleted, Output: big[len(`{"output":`) : len(big)-1]}
	if err := env.Client.CompleteActivity(ctx, j.TaskToken, result, nil); err != nil {
		t.Fatalf("task-token completion: %v", err)
	}
	if got := reply(id); !strings.Contains(got, protocol.CodeToolOutputInvalid) || !strings.Contains(got, want) {
		t.Fatalf("reply = %q", got)
	}
}

// A client tool's answer over the limit is rejected by the respond
// validator; the request stays open for a shorter answer.
func TestOutputLimitClientAnswer(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, outputLimitRules, olPick(100)))
	id, d := startParked(t, env, "pick")
	req := d.Requests[0].RequestID
	_, err := env.Sessions.Respond(env.Ctx(30*time.Second), id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req, Text: strings.Repeat("w", 200)}}, Wait: true})
	if err == nil || !strings.Contains(err.Error(), "the answer makes an output of 211 bytes; tool pick accepts at most 100") {
		t.Fatalf("long answer: %v", err)
	}
	if res := respond(t, env, id, protocol.InputResponse{RequestID: req, Text: "short"}); res.Outcome == nil || res.Outcome.Reply != "picked short" {
		t.Fatalf("outcome = %+v", res.Outcome)
	}
}

// Tools API executions run the same activity: the same outcome.
func TestOutputLimitToolsAPIExecution(t *testing.T) {
	env := evetest.New(t)
	a := evetest.Agent(t, `rules: []`, olDump(0))
	a.Name = "ops"
	env.StartWorker(a) // agent.Register registers the execution workflow too
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := toolsclient.New(hs.URL, "", toolsclient.WithUserID("user_42"))
	res, err := c.Tools.Execute(env.Ctx(90*time.Second), "ops.dump", toolsclient.ExecuteToolOptions{Input: map[string]int{"bytes": 1572864}})
	if err != nil || res.Status != catalog.StatusFailed || res.Error == nil || res.Error.Code != protocol.CodeToolOutputTooLarge ||
		!strings.Contains(res.Error.Message, fmt.Sprintf("returned %d bytes of output; the limit is 1048576", olOutputSize(1572864))) {
		t.Fatalf("execution = %+v %v", res, err)
	}
}
