package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// runningCall is a call whose tool is running, which may ask.
type runningCall struct {
	c       *pendingCall
	stepIdx int
}

// registerAsks installs what a running call asks through: SignalAsk puts
// a question on the board (input.requested, the turn waits for input as
// for a client tool), and QueryAsked tells the call how it was settled.
func (t *turn) registerAsks(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, signals.QueryAsked, func(requestID string) (signals.AskState, error) {
		r := t.board.byID[requestID]
		if r == nil || !r.asked {
			return signals.AskState{}, nil
		}
		return signals.AskState{Known: true, Settled: r.settled, Resolution: r.res}, nil
	}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, signals.SignalAsk)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
				var a signals.AskRequest
				c.Receive(ctx, &a)
				t.ask(ctx, a)
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	return nil
}

// ask opens a running call's question. A retried attempt asks the same
// request id again: the board has it, and the query answers it.
func (t *turn) ask(ctx workflow.Context, a signals.AskRequest) {
	rc, ok := t.running[a.CallID]
	req := a.Request
	if !ok || rc.c.done || t.board.byID[req.RequestID] != nil || !strings.HasPrefix(req.RequestID, "ask_"+a.CallID+"_") ||
		strings.TrimSpace(req.Prompt) == "" {
		return // not a running call's: the call hears nothing and gives up
	}
	if workflow.GetVersion(ctx, changeAsk, workflow.DefaultVersion, 1) < 1 {
		return
	}
	p := rc.c.plan
	// The answer is the question's, not the tool's output.
	p.Request = &tools.InputRequest{Prompt: req.Prompt, Display: req.Display, Options: req.Options, AllowFreeform: req.AllowFreeform}
	p.OutputSchema = nil
	req.Kind = protocol.KindQuestion
	req.Action = toolCallAction(p.Call)
	r := t.board.add(&openRequest{plan: p, stepIdx: rc.stepIdx, req: req, asked: true}, workflow.Now(ctx))
	t.watchDeadline(ctx, r)
	t.park(ctx, rc.stepIdx, []protocol.InputRequest{r.req})
}

// startRunning notes a call whose tool is about to run.
func (t *turn) startRunning(c *pendingCall, stepIdx int) {
	if t.running == nil {
		t.running = map[string]runningCall{}
	}
	t.running[c.plan.Call.ID] = runningCall{c: c, stepIdx: stepIdx}
}

// stopRunning settles as cancelled what the call asked and nobody
// answered before it ended (it stopped waiting: cancelled, timed out).
func (t *turn) stopRunning(ctx workflow.Context, c *pendingCall) {
	delete(t.running, c.plan.Call.ID)
	var left []protocol.InputResolution
	for _, r := range t.board.requests {
		if r.asked && !r.settled && r.plan.Call.ID == c.plan.Call.ID {
			if res, ok := t.board.cancel(r); ok {
				left = append(left, res)
			}
		}
	}
	t.recordResolutions(ctx, left)
}
