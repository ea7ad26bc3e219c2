package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// stubResults are a session's action.result events by tool, in order.
func stubResults(t *testing.T, evs []protocol.Event, tool string) []protocol.ActionResultData {
	t.Helper()
	var out []protocol.ActionResultData
	for _, e := range evetest.Of(evs, protocol.ActionResult) {
		var d protocol.ActionResultData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Result.ToolName == tool {
			out = append(out, d)
		}
	}
	return out
}

// createStubbed creates a session with stubs and a first message over HTTP
// and returns its id.
func (e *apiEnv) createStubbed(t *testing.T, headers map[string]string, message string, stubs any) string {
	t.Helper()
	r := e.do(t, "POST", "/eve/v1/session", map[string]any{"message": message, "stubs": stubs}, headers)
	if r.Status != 202 {
		t.Fatalf("create: status %d: %s", r.Status, r.Body)
	}
	return r.json(t)["sessionId"].(string)
}

// stubDiff says how got differs from want, "" when they are equal, in
// the "(-want +got)" style: both as JSON.
func stubDiff(want, got any) string {
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	if string(w) == string(g) {
		return ""
	}
	return "-" + string(w) + "\n+" + string(g)
}

func stubIdle(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting }

// Stubs on the open loopback server (eve dev): matched in order against the
// validated input, a sequence repeating its last entry across turns, an
// unmatched call running the real tool, a throw failing the call, each
// stubbed call marked, and the verification route naming the matched rules.
func TestToolStubsPlayback(t *testing.T) {
	e := demoAPI(t, nil)
	stubs := []map[string]any{
		{"id": "paris", "tool": "get_weather", "match": map[string]any{"city": map[string]any{"const": "Paris"}},
			"outcomes": []any{map[string]any{"response": map[string]any{"city": "Paris", "condition": "stubbed-sun", "temperatureC": 30}},
				map[string]any{"response": map[string]any{"city": "Paris", "condition": "stubbed-rain", "temperatureC": 5}}}},
		{"id": "lima", "tool": "get_weather", "match": map[string]any{"city": map[string]any{"const": "Lima"}},
			"outcome": map[string]any{"throw": map[string]any{"name": "TimeoutError", "message": "weather service timed out"}}},
		{"id": "never", "tool": "get_weather", "match": map[string]any{"city": map[string]any{"const": "Atlantis"}},
			"outcome": map[string]any{"response": "unused"}},
	}
	id := e.createStubbed(t, nil, "what's the weather in Paris", stubs)
	waitFor(t, e.Env, id, stubIdle)
	for _, msg := range []string{"what's the weather in Paris", "what's the weather in Paris", "what's the weather in Oslo", "what's the weather in Lima"} {
		if _, err := e.C.SendAndWait(e.Ctx(60*time.Second), id, msg, nil); err != nil {
			t.Fatal(err)
		}
	}
	evs := waitFor(t, e.Env, id, func(evs []protocol.Event) bool {
		return stubIdle(evs) && len(evetest.Of(evs, protocol.ActionResult)) == 5
	})
	type got struct {
		Status string
		Stub   *protocol.ActionStub
		Output string
	}
	var gots []got
	for _, d := range stubResults(t, evs, "get_weather") {
		out := string(d.Result.Output)
		if d.Stub == nil { // the real tool: its output varies
			out = "real"
		}
		gots = append(gots, got{d.Status, d.Stub, out})
	}
	want := []got{
		{protocol.StatusCompleted, &protocol.ActionStub{RuleID: "paris", Position: 0}, `{"city":"Paris","condition":"stubbed-sun","temperatureC":30}`},
		{protocol.StatusCompleted, &protocol.ActionStub{RuleID: "paris", Position: 1}, `{"city":"Paris","condition":"stubbed-rain","temperatureC":5}`},
		{protocol.StatusCompleted, &protocol.ActionStub{RuleID: "paris", Position: 2}, `{"city":"Paris","condition":"stubbed-rain","temperatureC":5}`},
		{protocol.StatusCompleted, nil, "real"},
		{protocol.StatusFailed, &protocol.ActionStub{RuleID: "lima", Position: 0}, `{"code":"TOOL_EXECUTION_FAILED","error":"weather service timed out"}`},
	}
	if diff := stubDiff(want, gots); diff != "" {
		t.Errorf("get_weather results (-want +got):\n%s", diff)
	}
	r := e.do(t, "GET", "/eve/v1/session/"+id+"/stubs", nil, nil)
	if r.Status != 200 {
		t.Fatalf("stubs: status %d: %s", r.Status, r.Body)
	}
	if diff := stubDiff(`{"error":null,"matchedRuleIds":["paris","lima"]}`, strings.TrimSpace(string(r.Body))); diff != "" {
		t.Errorf("GET stubs (-want +got):\n%s", diff)
	}
}

// Approvals still apply to a stubbed call: the call parks, a denial
// consumes no entry, and an approval returns the stub's outcome.
func TestToolStubsKeepApprovals(t *testing.T) {
	e := demoAPI(t, nil)
	stubs := []map[string]any{{"id": "refund", "tool": "refund_charge", "outcomes": []any{
		map[string]any{"response": map[string]any{"refunded": "stub-first"}},
		map[string]any{"response": map[string]any{"refunded": "stub-second"}}}}}
	id := e.createStubbed(t, nil, "refund ch_1 for 5", stubs)
	for i, outcome := range []string{protocol.OutcomeDenied, protocol.OutcomeApproved} {
		if i > 0 {
			if _, err := e.C.Send(e.Ctx(30*time.Second), id, "refund ch_2 for 5"); err != nil {
				t.Fatal(err)
			}
		}
		evs := waitFor(t, e.Env, id, func(evs []protocol.Event) bool {
			return len(evetest.Of(evs, protocol.InputRequested)) == i+1
		})
		var req protocol.InputRequestedData
		if err := evetest.Of(evs, protocol.InputRequested)[i].Decode(&req); err != nil {
			t.Fatal(err)
		}
		opt := "approve"
		if outcome == protocol.OutcomeDenied {
			opt = "deny"
		}
		r := e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"inputResponses": []any{map[string]any{"requestId": req.Requests[0].RequestID, "optionId": opt}}}, nil)
		if r.Status >= 300 {
			t.Fatalf("respond: %d %s", r.Status, r.Body)
		}
		waitFor(t, e.Env, id, func(evs []protocol.Event) bool {
			return stubIdle(evs) && len(stubResults(t, evs, "refund_charge")) == i+1
		})
	}
	evs := e.Events(e.Ctx(10*time.Second), id)
	res := stubResults(t, evs, "refund_charge")
	if res[0].Stub != nil || res[0].Status != protocol.StatusRejected {
		t.Errorf("denied call: status %s, stub %+v; want rejected and no stub", res[0].Status, res[0].Stub)
	}
	if diff := stubDiff(&protocol.ActionStub{RuleID: "refund", Position: 0}, res[1].Stub); diff != "" {
		t.Errorf("approved call's stub (-want +got):\n%s", diff)
	}
	if got := string(res[1].Result.Output); got != `{"refunded":"stub-first"}` {
		t.Errorf("approved call's output = %s", got)
	}
	// The decision record marks the approval whose call a stub settled:
	// the person's decision was real, the tool did not run.
	ds := decisionsOf(t, e.Ctx(10*time.Second), e.C, client.DecisionFilter{SessionID: id})
	type mark struct {
		Outcome string
		Stub    *protocol.ActionStub
	}
	var got []mark
	for _, d := range ds {
		got = append(got, mark{d.Outcome, d.Stub})
	}
	want := []mark{{protocol.OutcomeDenied, nil}, {protocol.OutcomeApproved, &protocol.ActionStub{RuleID: "refund", Position: 0}}}
	if diff := stubDiff(want, got); diff != "" {
		t.Errorf("decision record (-want +got):\n%s", diff)
	}
}

// Only a granted caller may stub: the keys file's allowToolStubs or the
// app's hook; others are refused before anything starts, and so is their
// read of the verification route.
func TestToolStubsNeedGrant(t *testing.T) {
	keys, err := api.ParseKeys([]byte(`
keys:
  sk_alice_0123456789: {principalId: alice}
  sk_evals_0123456789: {principalId: eval-runner, principalType: service, allowToolStubs: true}
  sk_hooked_0123456789: {principalId: hooked}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := demoAPI(t, func(o *api.Options) {
		o.Keys = keys
		o.AllowToolStubs = func(_ context.Context, p *auth.Principal) bool { return p.ID == "hooked" }
	})
	stubs := []any{map[string]any{"id": "w", "tool": "get_weather", "outcome": map[string]any{"response": 1}}}
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	wantError(t, e.do(t, "POST", "/eve/v1/session", map[string]any{"message": "hi", "stubs": stubs}, bearer("sk_alice_0123456789")), 403, api.CodeForbidden, "Tool stubbing is not permitted")
	for _, k := range []string{"sk_evals_0123456789", "sk_hooked_0123456789"} {
		id := e.createStubbed(t, bearer(k), "what's the weather in Paris", stubs)
		waitFor(t, e.Env, id, stubIdle)
		if r := e.do(t, "GET", "/eve/v1/session/"+id+"/stubs", nil, bearer(k)); r.Status != 200 || !strings.Contains(string(r.Body), `"matchedRuleIds":["w"]`) {
			t.Errorf("%s: GET stubs = %d %s", k, r.Status, r.Body)
		}
		wantError(t, e.do(t, "GET", "/eve/v1/session/"+id+"/stubs", nil, bearer("sk_alice_0123456789")), 403, api.CodeForbidden, "Tool stubbing")
	}
}

// Malformed rules are refused on create, naming the rule; so are 101.
func TestToolStubsMalformed(t *testing.T) {
	e := demoAPI(t, nil)
	resp := map[string]any{"response": 1}
	many := make([]any, 101)
	for i := range many {
		many[i] = map[string]any{"id": fmt.Sprint("r", i), "tool": "get_weather", "outcome": resp}
	}
	for _, tc := range []struct {
		name  string
		stubs any
		want  string
	}{
		{"not an array", map[string]any{}, "array"},
		{"no id", []any{map[string]any{"tool": "get_weather", "outcome": resp}}, "tool stub 1: expected 'id'"},
		{"no tool", []any{map[string]any{"id": "a", "outcome": resp}}, `tool stub "a": expected 'tool'`},
		{"both outcomes", []any{map[string]any{"id": "b", "tool": "get_weather", "outcome": resp, "outcomes": []any{resp}}}, `tool stub "b": use exactly one`},
		{"empty outcomes", []any{map[string]any{"id": "c", "tool": "get_weather", "outcomes": []any{}}}, `tool stub "c": expected 'outcomes'`},
		{"bad throw", []any{map[string]any{"id": "d", "tool": "get_weather", "outcome": map[string]any{"throw": map[string]any{"name": "E"}}}}, `tool stub "d": outcome: throw: expected 'message'`},
		{"response and throw", []any{map[string]any{"id": "e", "tool": "get_weather", "outcome": map[string]any{"response": 1, "throw": map[string]any{"message": "x"}}}}, `tool stub "e": outcome: expected exactly one`},
		{"bad matcher", []any{map[string]any{"id": "f", "tool": "get_weather", "match": map[string]any{"city": map[string]any{"type": "nope"}}, "outcome": resp}}, `tool stub "f": could not create matcher "city"`},
		{"unsupported keyword", []any{map[string]any{"id": "g", "tool": "get_weather", "match": map[string]any{"city": map[string]any{"format": "email"}}, "outcome": resp}}, `tool stub "g": matcher "city" uses "format"`},
		{"duplicate id", []any{map[string]any{"id": "h", "tool": "get_weather", "outcome": resp}, map[string]any{"id": "h", "tool": "get_weather", "outcome": resp}}, `duplicate tool stub id "h"`},
		{"catalog tool", []any{map[string]any{"id": "i", "tool": "eve__tool", "outcome": resp}}, `tool stub "i": cannot stub eve__tool`},
		{"101 rules", many, "the limit is 100 rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.do(t, "POST", "/eve/v1/session", map[string]any{"message": "hi", "stubs": tc.stubs}, nil), 400, api.CodeBadRequest, tc.want)
		})
	}
}

const stubKillRules = `
rules:
  - match: charge
    steps:
      - calls: [{tool: charge, input: {amount: 5}}]
      - calls: [{tool: slow}]
      - reply: "charged {{result.charge.charged}}; slow by {{result.slow.worker}}"
`

// chargeTool is not idempotent and must never run in these tests: a call
// leaves a marker file the test looks for.
func chargeTool(markerDir string) *tools.Tool {
	return &tools.Tool{
		Name: "charge", Description: "Charge a card.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			os.WriteFile(filepath.Join(markerDir, fmt.Sprintf("charge-ran-%d", ctx.Attempt)), nil, 0o644)
			return map[string]any{"charged": "for real"}, nil
		},
	}
}

func stubKillAgent(workerName, markerDir string) *agent.Agent {
	m, err := scripted.Parse([]byte(stubKillRules))
	if err != nil {
		panic(err)
	}
	reg := tools.NewRegistry()
	reg.MustRegister(chargeTool(markerDir), slowTool(workerName, markerDir))
	return &agent.Agent{Name: "kill", Model: m, Tools: reg, LocalModel: true}
}

// A worker SIGKILLed in a turn after a stub settled a call: the new worker
// replays the recorded decision (the call keeps its first outcome and
// position, the sequence does not advance) and the real tool never runs.
func TestWorkerKilledDuringStubbedTurn(t *testing.T) {
	env := evetest.New(t)
	markers := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
		"EVE_E2E_WORKER_MARKERS="+markers, "EVE_E2E_WORKER_AGENT=stubs", env.Server.PayloadStoreEnv())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	e := newAPIEnv(t, env, nil)
	stubs := []any{map[string]any{"id": "charge", "tool": "charge", "outcomes": []any{
		map[string]any{"response": map[string]any{"charged": "stub-first"}},
		map[string]any{"response": map[string]any{"charged": "stub-second"}}}}}
	id := e.createStubbed(t, nil, "charge", stubs)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(markers, "doomed-1")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow tool never started in the doomed worker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	env.StartWorker(stubKillAgent("survivor", markers))
	evs := waitFor(t, env, id, stubIdle)
	var reply string
	for _, ev := range evetest.Of(evs, protocol.MessageCompleted) {
		var d protocol.MessageCompletedData
		if err := ev.Decode(&d); err != nil {
			t.Fatal(err)
		}
		reply = d.Message
	}
	if want := "charged stub-first; slow by survivor"; reply != want {
		t.Errorf("reply = %q, want %q", reply, want)
	}
	res := stubResults(t, evs, "charge")
	if len(res) != 1 {
		t.Fatalf("%d charge results, want 1", len(res))
	}
	if diff := stubDiff(&protocol.ActionStub{RuleID: "charge", Position: 0}, res[0].Stub); diff != "" {
		t.Errorf("charge's stub (-want +got):\n%s", diff)
	}
	ran, _ := filepath.Glob(filepath.Join(markers, "charge-ran-*"))
	if len(ran) > 0 {
		t.Errorf("the real charge tool ran: %v", ran)
	}
	// The next turn continues the sequence at the second entry: the crash
	// did not advance it twice.
	if _, err := e.C.Send(e.Ctx(30*time.Second), id, "charge"); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(t, env, id, func(evs []protocol.Event) bool { return stubIdle(evs) && len(stubResults(t, evs, "charge")) == 2 })
	if got := string(stubResults(t, evs, "charge")[1].Result.Output); got != `{"charged":"stub-second"}` {
		t.Errorf("second turn's charge = %s, want stub-second", got)
	}
}
