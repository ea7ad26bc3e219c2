package activities

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// quietPoll is how often a call waiting for its person reads the answer
// when the notify bus tells it of its session's changes.
const quietPoll = 30 * time.Second

// askUnknownAfter is how long a call waits for its turn to take a
// question before it gives up (the turn ignores a question of a call it
// does not run).
const askUnknownAfter = 30 * time.Second

// asker lets a turn's call ask its person (tools.Context.Ask): a signal to
// the turn, which records input.requested; then the answer, read by a
// query with a backoff up to 2 s (30 s when the notify bus wakes it on
// each change of the session), heartbeating meanwhile. Questions are
// numbered in the order the call asks them, so a retried attempt asking
// the same ones finds their answers (ids signals.AskID, with the tag a
// subagent's turn hands the call in in.AskTag). Nil when nobody can be
// asked.
func (a *activitySet) asker(in work.ExecuteToolInput) tools.Asker {
	if a.Client == nil || in.TurnID == "" || in.TurnID == in.Session.ID {
		return nil
	}
	n := 0
	return func(tctx *tools.Context, q tools.InputRequest) (tools.Answer, error) {
		if !activity.IsActivity(tctx) || activity.GetInfo(tctx).IsLocalActivity {
			return tools.Answer{}, tools.ErrCannotAsk
		}
		n++
		id := signals.AskID(in.AskTag, in.CallID, strconv.Itoa(n))
		wid := signals.TurnWorkflowID(in.Session.ID, in.TurnID)
		req := protocol.InputRequest{Kind: protocol.KindQuestion, Prompt: q.Prompt, Display: q.Display, Options: q.Options,
			AllowFreeform: q.AllowFreeform, RequestID: id}
		if err := a.Client.SignalWorkflow(tctx, wid, "", signals.SignalAsk, signals.AskRequest{CallID: in.CallID, Request: req}); err != nil {
			return tools.Answer{}, fmt.Errorf("ask the session's person: %w", err)
		}
		// With the notify bus, a change of the session wakes the wait; the
		// query then runs only when something happened (and every
		// quietPoll meanwhile, since delivery is best effort).
		changed := make(chan struct{}, 1)
		most := 2 * time.Second
		if a.Changes != nil {
			cancel := a.Changes.Subscribe(func(sid string, _ int) {
				if sid == in.Session.ID || sid == "" {
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			})
			defer cancel()
			most = quietPoll
		}
		if hb := activity.GetInfo(tctx).HeartbeatTimeout; hb > 0 {
			most = min(most, hb/2) // the wait heartbeats the call
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
			case <-changed:
			case <-time.After(wait):
			}
			wait = min(2*wait, most)
		}
	}
}
