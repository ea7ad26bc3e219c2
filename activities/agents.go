package activities

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Subagent is an agent a tool's code may delegate to (Options.Subagents):
// its name and description (eve's subagent prompt quotes it).
type Subagent struct {
	Name        string
	Description string
}

// agentSender lets a turn's call delegate to a subagent
// (tools.Context.Agent): the send Update with Wait on the child session,
// started with it (Update-with-Start, USE_EXISTING) on the subagent's
// task queue, the child's id and the Update's derived from the call
// (signals.CodeAgentSessionID, CodeAgentUpdateID), so a retried attempt
// joins what the first started. Nil when nothing can be delegated to.
func (a *activitySet) agentSender(in work.ExecuteToolInput) tools.AgentSender {
	if a.Client == nil || len(a.Subagents) == 0 || in.TurnID == "" || in.TurnID == in.Session.ID {
		return nil
	}
	return func(tctx *tools.Context, name string, n, m int, text string, o tools.SendOptions) (tools.AgentResult, error) {
		if !activity.IsActivity(tctx) || activity.GetInfo(tctx).IsLocalActivity {
			return tools.AgentResult{}, tools.ErrCannotDelegate
		}
		sub, ok := a.subagent(name)
		if !ok {
			return tools.AgentResult{}, tools.NonRetryable(fmt.Errorf("no agent %q to delegate to: the agent's subagents are %s", name, a.subagentNames()))
		}
		if len(o.OutputSchema) > 0 {
			if _, err := schema.Compile("outputSchema", o.OutputSchema); err != nil {
				return tools.AgentResult{}, tools.NonRetryable(fmt.Errorf("send to agent %s: the outputSchema is not a usable JSON Schema: %w", name, err))
			}
		}
		childID := signals.CodeAgentSessionID(in.Session.ID, tctx.IdempotencyKey, name, n)
		if m == 1 {
			text = signals.SubagentPrompt(sub.Name, sub.Description, text)
		}
		uid := signals.CodeAgentUpdateID(childID, m)
		req := signals.SendRequest{Message: text, DeliveryID: "dlv_" + uid, Caller: in.Session.Auth.Current, Wait: true, OutputSchema: o.OutputSchema}
		svc := &sessions.Service{Client: a.Client, TaskQueue: signals.SubagentTaskQueue(activity.GetInfo(tctx).TaskQueue, name), SearchAttributes: a.SearchAttributes}
		defer keepBeating(tctx)()
		res, err := svc.CreateAndSendOnce(tctx, childID, in.Session.Auth.Initiator, uid, req)
		if err != nil {
			return tools.AgentResult{SessionID: childID}, fmt.Errorf("send to agent %s (session %s): %w", name, childID, err)
		}
		out := res.Outcome
		if out == nil || out.Status == signals.TurnStatusWaiting {
			// The turn parked on a person: its end is the turn
			// workflow's result.
			if out, err = turnOutcome(tctx, a, signals.TurnWorkflowID(childID, res.TurnID)); err != nil {
				return tools.AgentResult{SessionID: childID}, fmt.Errorf("wait for agent %s (session %s, %s): %w", name, childID, res.TurnID, err)
			}
		}
		return agentResult(childID, *out), nil
	}
}

// turnOutcome waits for a turn workflow's end and reads its outcome.
func turnOutcome(tctx *tools.Context, a *activitySet, wid string) (*signals.TurnOutcome, error) {
	var out struct {
		Outcome signals.TurnOutcome `json:"outcome"`
	}
	if err := a.Client.GetWorkflow(tctx, wid, "").Get(tctx, &out); err != nil {
		return nil, err
	}
	return &out.Outcome, nil
}

// agentResult is eve's result() of a turn's outcome: a turn that ended
// leaves the session waiting for its next message.
func agentResult(childID string, o signals.TurnOutcome) tools.AgentResult {
	r := tools.AgentResult{Status: tools.AgentWaiting, SessionID: childID}
	switch o.Status {
	case signals.TurnStatusCompleted:
		if len(o.Data) > 0 {
			r.Data = o.Data
		} else {
			r.Message = o.Reply
		}
	case signals.TurnStatusFailed:
		r.Status, r.Error = tools.AgentFailed, &tools.AgentError{Message: o.Error}
	}
	return r
}

// keepBeating heartbeats the call while it waits (when its tool has a
// HeartbeatTimeout); the function it returns stops it.
func keepBeating(tctx *tools.Context) func() {
	hb := activity.GetInfo(tctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(hb/3, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-tctx.Done():
				return
			case <-t.C:
				tctx.Heartbeat()
			}
		}
	}()
	return func() { close(done) }
}

func (a *activitySet) subagent(name string) (Subagent, bool) {
	for _, s := range a.Subagents {
		if s.Name == name {
			return s, true
		}
	}
	return Subagent{}, false
}

func (a *activitySet) subagentNames() string {
	var names []string
	for _, s := range a.Subagents {
		names = append(names, fmt.Sprintf("%q", s.Name))
	}
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}
