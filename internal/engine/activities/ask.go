package activities

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// askUnknownAfter is how long a call waits for its turn to take a
// question before it gives up (the turn ignores a question of a call it
// does not run).
const askUnknownAfter = 30 * time.Second

// asker lets a turn's call ask its person (tools.Context.Ask): a signal to
// the turn, which records input.requested; then the answer, read by a
// query with a backoff up to 2 s, heartbeating meanwhile. Questions are
// numbered in the order the call asks them, so a retried attempt asking
// the same ones finds their answers. Nil when nobody can be asked.
func (a *Activities) asker(in ExecuteToolInput) tools.Asker {
	if a.Client == nil || in.TurnID == "" || in.TurnID == in.Session.ID {
		return nil
	}
	n := 0
	return func(tctx *tools.Context, q tools.InputRequest) (tools.Answer, error) {
		if !activity.IsActivity(tctx) || activity.GetInfo(tctx).IsLocalActivity {
			return tools.Answer{}, tools.ErrCannotAsk
		}
		n++
		id := fmt.Sprintf("ask_%s_%d", in.CallID, n)
		wid := signals.TurnWorkflowID(in.Session.ID, in.TurnID)
		req := protocol.InputRequest{Kind: protocol.KindQuestion, Prompt: q.Prompt, Display: q.Display, Options: q.Options,
			AllowFreeform: q.AllowFreeform, RequestID: id}
		if err := a.Client.SignalWorkflow(tctx, wid, "", signals.SignalAsk, signals.AskRequest{CallID: in.CallID, Request: req}); err != nil {
			return tools.Answer{}, fmt.Errorf("ask the session's person: %w", err)
		}
		wait, asked := 200*time.Millisecond, time.Now()
		for {
			v, err := a.Client.QueryWorkflow(tctx, wid, "", signals.QueryAsked, id)
			var st signals.AskState
			if err == nil {
				err = v.Get(&st)
			}
			switch {
			case err != nil && tctx.Err() != nil:
				return tools.Answer{}, tctx.Err()
			case err != nil:
				a.logger().Warn("reading an answer failed; trying again", "call", in.CallID, "request", id, "err", err)
			case st.Settled:
				ans := tools.Answer{Outcome: st.Resolution.Outcome}
				if r := st.Resolution.Response; r != nil {
					ans.OptionID, ans.Text = r.OptionID, r.Text
				}
				return ans, nil
			case !st.Known && time.Since(asked) > askUnknownAfter:
				return tools.Answer{}, errors.New("the turn did not take the question: its call is no longer running")
			}
			tctx.Heartbeat() // keeps the call's checkpoint, if it has one
			select {
			case <-tctx.Done():
				return tools.Answer{}, tctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
	}
}
