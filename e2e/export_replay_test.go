package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
)

// recordDemoSession drives a demo session over HTTP: a tool call, an
// approval approved, a question answered, a call the tenant policy denies.
func recordDemoSession(t *testing.T, ctx context.Context, c *client.Client) string {
	t.Helper()
	turn, err := c.SendAndWait(ctx, "", "what's the weather in Paris", nil)
	if err != nil || turn.Status != client.TurnCompleted {
		t.Fatalf("weather: %+v, %v", turn, err)
	}
	id := turn.SessionID
	for _, step := range []struct{ message, option string }{{"refund ch_1 for 5", "approve"}, {"choose a plan", "pro"}} {
		parked, err := c.SendAndWait(ctx, id, step.message, nil)
		if err != nil || parked.Status != client.TurnWaiting || len(parked.Open) != 1 {
			t.Fatalf("%q: %+v, %v", step.message, parked, err)
		}
		if _, done, err := c.RespondAndWait(ctx, id, []protocol.InputResponse{{RequestID: parked.Open[0].RequestID, OptionID: step.option}}, nil); err != nil || done.Status != client.TurnCompleted {
			t.Fatalf("%q answered: %+v, %v", step.message, done, err)
		}
	}
	if turn, err := c.SendAndWait(ctx, id, "credit t2 10", nil); err != nil || !strings.Contains(turn.Reply, "denied by policy") {
		t.Fatalf("credit: %+v, %v", turn, err)
	}
	return id
}

// A recorded demo session becomes a test: its export replays unchanged
// against a new worker and API server (the stubs stand in for every call
// that ran), and the same replay against a scripted model changed to call
// another tool fails with a readable diff of the trajectories.
func TestExportStubsReplay(t *testing.T) {
	rec := demoAPI(t, nil)
	ctx := rec.Ctx(2 * time.Minute)
	id := recordDemoSession(t, ctx, rec.C)

	export, err := rec.C.ExportStubs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"what's the weather in Paris", "refund ch_1 for 5", "choose a plan", "credit t2 10"}, export.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	wantSteps := []protocol.RecordedStep{
		{Message: "what's the weather in Paris"},
		{Message: "refund ch_1 for 5"},
		{Respond: []protocol.RecordedResponse{{ToolName: "refund_charge", Kind: protocol.KindToolApproval, OptionID: "approve"}}},
		{Message: "choose a plan"},
		{Respond: []protocol.RecordedResponse{{ToolName: "choose_plan", Kind: protocol.KindQuestion, OptionID: "pro"}}},
		{Message: "credit t2 10"},
	}
	if diff := cmp.Diff(wantSteps, export.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	type call struct{ Turn, Tool, Input, Status string }
	var calls []call
	for _, c := range export.Calls {
		calls = append(calls, call{c.TurnID, c.Tool, string(c.Input), c.Status})
	}
	wantCalls := []call{
		{"turn_0", "get_weather", `{"city":"Paris"}`, protocol.StatusCompleted},
		{"turn_1", "refund_charge", `{"amount":5,"chargeId":"ch_1"}`, protocol.StatusCompleted},
		{"turn_2", "choose_plan", `{"accountId":"acct_1"}`, protocol.StatusCompleted},
		{"turn_3", "issue_credit", `{"amount":10,"tenantId":"t2"}`, protocol.StatusRejected},
	}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// Stubs for the calls that ran: not the question (its answer is a
	// step) nor the denied call (it never ran).
	type rule struct{ ID, Tool, Match string }
	var rules []rule
	for _, s := range export.Stubs {
		m, _ := json.Marshal(s.Match)
		rules = append(rules, rule{s.ID, s.Tool, string(m)})
	}
	wantRules := []rule{
		{"refund_charge-1", "refund_charge", `{"amount":{"const":5},"chargeId":{"const":"ch_1"}}`},
		{"get_weather-1", "get_weather", `{"city":{"const":"Paris"}}`},
	}
	if diff := cmp.Diff(wantRules, rules); diff != "" {
		t.Errorf("stubs (-want +got):\n%s", diff)
	}

	// Unchanged: a new worker and API server (the next build) replay it.
	next := demoAPI(t, nil)
	res, err := next.C.Replay(ctx, export)
	if err != nil {
		t.Fatal(err)
	}
	if res.Diff != "" {
		t.Fatalf("the unchanged agent's replay differs:\n%s", res.Diff)
	}
	// The stubs answered: the refund's result is the recorded one (its
	// idempotency key names the recorded session), the real tool did not run.
	evs := next.Events(ctx, res.SessionID)
	refunds := stubResults(t, evs, "refund_charge")
	if len(refunds) != 1 || refunds[0].Stub == nil || !strings.Contains(string(refunds[0].Result.Output), id+"/turn_1/") {
		t.Fatalf("replayed refund: %+v", refunds)
	}

	// The scripted model changed: the weather rule now calls issue_credit.
	changed := strings.Replace(string(demo.Rules()), "rules:\n", `rules:
  - match: 'weather (?:in|for|at) (?P<city>[\p{L} .''-]+?)[?.!]*$'
    steps:
      - calls: [{tool: issue_credit, input: {tenantId: "{{city}}", amount: 1}}]
      - reply: "Credit: {{result.issue_credit.credited}}{{result.issue_credit.message}}"
`, 1)
	cenv := evetest.New(t)
	cenv.StartWorker(evetest.Agent(t, changed, demo.Tools()...))
	res, err = newAPIEnv(t, cenv, nil).C.Replay(ctx, export)
	if err != nil {
		t.Fatal(err)
	}
	want := `the trajectory differs (-recorded +replayed: turn, tool, input):
- turn_0 get_weather {"city":"Paris"}
+ turn_0 issue_credit {"amount":1,"tenantId":"Paris"}
  turn_1 refund_charge {"amount":5,"chargeId":"ch_1"}
  turn_2 choose_plan {"accountId":"acct_1"}
  turn_3 issue_credit {"amount":10,"tenantId":"t2"}
`
	if diff := cmp.Diff(want, res.Diff); diff != "" {
		t.Fatalf("the changed model's replay (-want +got):\n%s", diff)
	}
}

// The CLI: eve session export-stubs prints the recording, replay-stubs
// passes on the same server and prints the diff (exit 1) when the
// recording's trajectory is not what the agent does.
func TestExportStubsCLI(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(2 * time.Minute)
	id := recordDemoSession(t, ctx, e.C)
	bin := eveBinary(t)
	out, err := e.eveCLI(t, bin, "", "export-stubs", id)
	if err != nil {
		t.Fatalf("export-stubs: %v\n%s", err, out)
	}
	var rec protocol.SessionRecording
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.SessionID != id || len(rec.Stubs) != 2 {
		t.Fatalf("export-stubs printed %v:\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "rec.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.eveCLI(t, bin, "", "replay-stubs", file); err != nil || !strings.Contains(out, "the same 4 calls") {
		t.Fatalf("replay-stubs: %v\n%s", err, out)
	}
	// A recording whose first call was another city's.
	edited := strings.Replace(out, `"city": "Paris"`, `"city": "Rome"`, -1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = e.eveCLI(t, bin, "", "replay-stubs", file)
	if err == nil || !strings.Contains(out, "- turn_0 get_weather {\"city\":\"Rome\"}\n+ turn_0 get_weather {\"city\":\"Paris\"}\n") ||
		!strings.Contains(out, "the replay's trajectory differs from the recording") {
		t.Fatalf("replay-stubs of an edited recording: %v\n%s", err, out)
	}
}
