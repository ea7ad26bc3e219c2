package e2e

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// approval.Auto (issue 23, item 4): the agent's (scripted) model reviews
// each exact call; clear runs it, caution or an answer that is no verdict
// asks a person with the reason; the verdict is recorded in history.
func TestAutoApproval(t *testing.T) {
	env := evetest.New(t)
	var runs atomic.Int32
	env.StartWorker(autoAgent(t, &runs))
	ctx := env.Ctx(30 * time.Second)

	// Clear: it runs, nobody asked.
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "count 1", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != signals.TurnStatusCompleted || runs.Load() != 1 || len(evetest.Of(env.Events(ctx, res.SessionID), protocol.InputRequested)) != 0 {
		t.Fatalf("clear: outcome %+v, runs %d", res.Outcome, runs.Load())
	}
	if r := recordedReviews(t, env, res.SessionID+"/turn_0"); len(r) != 1 || r[0].Verdict != approval.VerdictClear || r[0].Reason != "counting once is harmless" {
		t.Fatalf("recorded reviews = %+v", r)
	}

	// Caution: a person is asked, with the model's reason.
	for _, tc := range []struct{ msg, reason string }{
		{"count 2", "the automatic review advised caution: counting twice needs a look"},
		{"count 3", "the automatic review failed"}, // no verdict: asks
	} {
		before := runs.Load()
		id, d := startParked(t, env, tc.msg)
		if runs.Load() != before || !strings.Contains(d.Requests[0].Prompt, "("+tc.reason+")") {
			t.Fatalf("%s: runs %d, prompt %q", tc.msg, runs.Load(), d.Requests[0].Prompt)
		}
		respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	}
	if runs.Load() != 3 {
		t.Fatalf("runs = %d after two approvals", runs.Load())
	}
}

// autoAgent has one tool, count, under approval.Auto; its scripted model
// reviews {"n":1} as clear, {"n":2} as caution, and anything else with no
// verdict.
func autoAgent(t *testing.T, runs *atomic.Int32) *agent.Agent {
	tool := countingTool("count", runs, map[string]bool{"ok": true})
	tool.Approval = approval.Auto(approval.AutoConfig{Instructions: "Review whether counting needs a person."})
	return evetest.Agent(t, `
rules:
  - match: '^Review this tool call(?s:.*)"n":1\b'
    reply: '{"verdict": "clear", "reason": "counting once is harmless"}'
  - match: '^Review this tool call(?s:.*)"n":2\b'
    reply: '{"verdict": "caution", "reason": "counting twice needs a look"}'
  - match: '^Review this tool call'
    reply: 'I am not sure.'
  - match: 'count (?P<n>\d)'
    steps:
      - calls: [{tool: count, inputJSON: '{"n": {{n}}}'}]
      - reply: counted
`, tool)
}

// recordedReviews reads the automatic reviews a turn's history recorded
// (the approval activity's results).
func recordedReviews(t *testing.T, env *evetest.Env, wid string) []approval.Review {
	t.Helper()
	ctx := env.Ctx(10 * time.Second)
	it := env.Client.GetWorkflowHistory(ctx, wid, "", false, 0)
	var out []approval.Review
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil {
			continue
		}
		for _, p := range m.GetDetails()["result"].GetPayloads() {
			var st approval.Status
			if json.Unmarshal(p.GetData(), &st) == nil && st.Review != nil {
				out = append(out, *st.Review)
			}
		}
	}
	return out
}
