package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// People in the loop from any depth (docs/subagents.md): the demo's
// researcher asks for approval of fetch_paper; the request is proxied on
// the root session's stream (the child's request id, the root's callId),
// the person answers through the root session, the child decides it, the
// root relays approval.settled and input.resolved, and the child's reply
// arrives in the root turn. Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the root turn and the child's turn
// (v0.5.0-turn-subagent-proxied-*.json).
func TestSubagentProxiedApproval(t *testing.T) {
	env := demoEnv(t)
	for _, tc := range []struct {
		name, option, reply, outcome, resolved string
		runs                         int
	}{
		{name: "approved", option: "approve", outcome: protocol.OutcomeApproved, resolved: protocol.OutcomeApproved, runs: 1,
			reply: "The researcher says: Fetched: the paper on tidal power (12 pages)."},
		{name: "denied", option: "cancel", outcome: protocol.OutcomeCancelled, resolved: protocol.OutcomeDenied, runs: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := env.Ctx(2 * time.Minute)
			id, err := env.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: "ask researcher fetch tidal power", Caller: alice})
			evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
			var ts protocol.TaskStartedData
			_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&ts)
			child := signals.SubagentSessionID(id, ts.TaskID)
			var req protocol.InputRequestedData
			_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
			if len(req.Requests) != 1 {
				t.Fatalf("proxied input.requested %+v", req)
			}
			r := req.Requests[0]
			if req.CallID != ts.CallID || req.TurnID != "turn_0" || r.Kind != protocol.KindToolApproval ||
				r.Action.ToolName != "fetch_paper" || r.RequestID != "apr_"+r.Action.CallID ||
				r.Prompt != "Let the researcher fetch a paper on tidal power?" {
				t.Fatalf("proxied input.requested %+v (request %+v)", req, r)
			}
			// The child asked the same request on its own stream.
			cevs := waitFor(t, env, child, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) > 0 })
			var creq protocol.InputRequestedData
			_ = evetest.Of(cevs, protocol.InputRequested)[0].Decode(&creq)
			if creq.CallID != "" || len(creq.Requests) != 1 || creq.Requests[0].RequestID != r.RequestID {
				t.Fatalf("child's input.requested %+v", creq)
			}

			// The person answers through the root session.
			if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: tc.option}}, Responder: alice}); err != nil {
				t.Fatal(err)
			}
			evs = waitFor(t, env, id, idle(1))
			cevs = waitFor(t, env, child, idle(1))
			if tc.reply != "" {
				if got, want := lastReply(t, evs), tc.reply+" To follow up, say: tell "+ts.TaskID+" <message>"; got != want {
					t.Errorf("reply %q, want %q", got, want)
				}
			}
			// The root relayed the child's settlement, once each.
			for _, evs := range [][]protocol.Event{evs, cevs} {
				var got []string
				for _, e := range evetest.Of(evs, protocol.ApprovalSettled) {
					var d protocol.ApprovalSettledData
					_ = e.Decode(&d)
					got = append(got, d.RequestID+" "+d.Outcome)
				}
				for _, e := range evetest.Of(evs, protocol.InputResolved) {
					var d protocol.InputResolvedData
					_ = e.Decode(&d)
					for _, res := range d.Resolutions {
						got = append(got, "resolved "+res.RequestID+" "+res.Outcome)
					}
				}
				want := []string{r.RequestID + " " + tc.outcome, "resolved " + r.RequestID + " " + tc.resolved}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("settlement (-want +got):\n%s\n%s", diff, evetest.Join(evs))
				}
			}
			if n := len(evetest.Of(evs, protocol.InputRequested)); n != 1 {
				t.Errorf("%d input.requested on the root, want 1", n)
			}
			// The child's tool ran once (or not at all, denied).
			runs := 0
			for _, e := range evetest.Of(cevs, protocol.ActionResult) {
				if strings.Contains(string(e.Data), `"fetch_paper"`) && strings.Contains(string(e.Data), "12 pages") {
					runs++
				}
			}
			if runs != tc.runs {
				t.Errorf("fetch_paper ran %d times, want %d: %s", runs, tc.runs, evetest.Join(cevs))
			}
			// An answer repeated through the root changes nothing.
			res, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: r.RequestID, OptionID: tc.option}}, Responder: alice})
			if err == nil && fmt.Sprint(res.Duplicates) != fmt.Sprint([]string{r.RequestID}) {
				t.Errorf("repeat: %+v", res)
			}
			if tc.name == "approved" {
				saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-proxied-approved")
				saveTaskHistory(t, env, child+"/turn_0", "turn-subagent-proxied-child")
			}
		})
	}
}
