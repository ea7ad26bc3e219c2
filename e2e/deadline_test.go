package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Input deadlines (issue 26): an approval (with its own, per-call deadline)
// and a question (the agent's) whose deadlines pass while the worker is down settle as expired when it is back (the
// timers fired on the server meanwhile); the model reads that nobody
// answered and the turns go on; a late answer is refused with 410.
func TestInputDeadlineWhileWorkerDown(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	// The deadlines leave room for both parks and the worker's stop (well
	// under a second here, a few on a loaded machine) before the first of
	// them passes; the history below shows whether they did.
	const deadline = 10 * time.Second
	a.InputDeadline = deadline
	// The refund's own deadline (its policy's, per call) wins over the agent's.
	refundTool, _ := a.Tools.Get("refund_charge")
	refundTool.Approval = refundTool.Approval.WithDeadline(func(approval.PromptContext) time.Duration { return 8 * time.Second })
	stop := env.StartWorker(a)
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(2 * time.Minute)
	refund := parkOver(t, ctx, e.C, "", "refund ch_9 9")
	question := parkOver(t, ctx, e.C, "", "choose a plan")
	// The stream's input.requested says when each request expires (0.5),
	// and the Go client's fold keeps it with the open request.
	for _, c := range []struct {
		name  string
		turn  *client.Turn
		after time.Duration
	}{{"refund", refund, 8 * time.Second}, {"question", question, deadline}} {
		asked := evetest.Of(c.turn.Events, protocol.InputRequested)
		if len(asked) != 1 {
			t.Fatalf("%s: input.requested %d times", c.name, len(asked))
		}
		at, err := time.Parse(time.RFC3339, asked[0].Meta.At)
		if q := c.turn.Open[0]; err != nil || q.Deadline == nil || q.Deadline.Sub(at).Round(time.Second) != c.after || q.NextReminderAt != nil || q.EscalatesAt != nil {
			t.Fatalf("%s: open request %+v asked at %v (%v); want its deadline %s later, no reminder or escalation", c.name, q, at, err, c.after)
		}
	}
	stop()
	down := time.Now()
	// The scenario: the worker is down when the deadlines pass. Wait for
	// both timers to fire on the server (not for a guess of when a loaded
	// server fires them), then start the worker again.
	for _, id := range []string{refund.SessionID, question.SessionID} {
		wid := signals.TurnWorkflowID(id, "turn_0")
		for deadline := time.Now().Add(60 * time.Second); historyCounts(t, ctx, env.Client, wid)[enumspb.EVENT_TYPE_TIMER_FIRED] == 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the deadline timer of %s never fired", wid)
			}
		}
	}
	restarted := time.Now()
	env.StartWorker(a)

	for _, turn := range []struct {
		id, kind string
	}{{refund.SessionID, protocol.KindToolApproval}, {question.SessionID, protocol.KindQuestion}} {
		evs := env.WaitIdle(turn.id)
		var res protocol.InputResolvedData
		if rs := evetest.Of(evs, protocol.InputResolved); len(rs) != 1 || rs[0].Decode(&res) != nil ||
			res.Resolutions[0].Outcome != protocol.OutcomeExpired || res.Resolutions[0].Kind != turn.kind {
			t.Fatalf("%s: resolutions %+v; events %s", turn.kind, res, evetest.Join(evs))
		}
		var ar protocol.ActionResultData
		if rs := evetest.Of(evs, protocol.ActionResult); len(rs) != 1 || rs[0].Decode(&ar) != nil || !strings.Contains(string(ar.Result.Output), protocol.CodeInputExpired) {
			t.Fatalf("%s: action.result %+v", turn.kind, ar)
		}
		if len(evetest.Of(evs, protocol.TurnCompleted)) != 1 {
			t.Fatalf("%s: the turn did not go on: %s", turn.kind, evetest.Join(evs))
		}
		// The timer fired on the server while no worker ran.
		it := env.Client.GetWorkflowHistory(ctx, signals.TurnWorkflowID(turn.id, "turn_0"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		fired := false
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_FIRED {
				at := ev.GetEventTime().AsTime()
				if at.Before(down) || !at.Before(restarted) {
					t.Fatalf("%s: the timer fired at %v, want while the worker was down (%v to %v): the parks and the stop took longer than the deadlines allow", turn.kind, at, down, restarted)
				}
				fired = true
			}
		}
		if !fired {
			t.Fatalf("%s: no timer fired", turn.kind)
		}
	}
	if r := env.Reply(refund.SessionID); !strings.Contains(r, "Nobody answered the approval for refund_charge before its deadline (8s)") {
		t.Fatalf("the model read: %q", r)
	}
	// A late answer is refused, saying it expired; nothing is recorded.
	before := len(env.Events(ctx, refund.SessionID))
	r := e.do(t, "POST", "/eve/v1/session/"+refund.SessionID, map[string]any{"inputResponses": []map[string]any{{"requestId": refund.Open[0].RequestID, "optionId": "approve"}}}, nil)
	wantError(t, r, http.StatusGone, "input_expired", "expired at its deadline")
	if after := len(env.Events(ctx, refund.SessionID)); after != before {
		t.Fatalf("a late answer recorded %d events", after-before)
	}
}
