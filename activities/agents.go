package activities

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
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
		// The child's turn relays its people in the loop to this call's
		// turn, so the root's person answers them (as eve's ctx.agent).
		relay := &signals.AgentReplyTo{WorkflowID: signals.TurnWorkflowID(in.Session.ID, in.TurnID), CallID: in.CallID}
		req := signals.SendRequest{Message: text, DeliveryID: "dlv_" + uid, Caller: in.Session.Auth.Current, Wait: true, OutputSchema: o.OutputSchema, RelayTo: relay}
		defer keepBeating(tctx)()
		var opened func()
		if m == 1 {
			// Once the child took the first message: agent.started on
			// the calling turn's stream (workflows/agentcall.go).
			opened = func() {
				d := protocol.AgentStartedData{CallID: in.CallID, TurnID: in.TurnID, TaskID: in.TaskID, Name: name,
					SessionID: childID, StreamPath: signals.SessionStreamPath(childID)}
				if err := a.Client.SignalWorkflow(tctx, signals.TurnWorkflowID(in.Session.ID, in.TurnID), "", signals.SignalAgentOpened, d); err != nil {
					a.logger().Warn("agent.started of a code-opened session not recorded", "call", in.CallID, "child", childID, "err", err)
				}
			}
		}
		origin := in.Origin.Child(in.Session.ID, sub.Name, childID)
		res, err := a.sendChild(tctx, childID, signals.SubagentTaskQueue(activity.GetInfo(tctx).TaskQueue, name), in.Session.Auth.Initiator, origin, uid, req, opened)
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

// sendChild sends req to the child session childID as the send Update
// uid, starting the session with it when it does not run yet (its starter
// is the calling session's initiator, in its memo, as a model-called
// child's: the API authorizes its routes as the parent's).
// opened, when set, runs once the Update was accepted.
//
// origin places the child under the calling session's root (the inbox,
// the decision record), as a model-called child's.
func (a *activitySet) sendChild(ctx context.Context, childID, queue string, initiator *auth.Principal, origin *protocol.SubagentOrigin, uid string, req signals.SendRequest, opened func()) (signals.SendResult, error) {
	opts := client.StartWorkflowOptions{
		ID:                       childID,
		TaskQueue:                queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            "eve subagent session opened by a tool's code",
	}
	opts.Memo = map[string]any{signals.MemoOrigin: origin}
	if initiator != nil {
		opts.Memo[signals.MemoInitiator] = initiator
	}
	if a.SearchAttributes {
		// No status: the session's running turn's is its (SessionVersions 3).
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(searchSession.ValueSet(childID))
	}
	start := a.Client.NewWithStartWorkflowOperation(opts, signals.SessionWorkflow, signals.SessionInput{SessionID: childID, Initiator: initiator, Versions: signals.SessionVersions, Origin: origin})
	h, err := a.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID: uid, WorkflowID: childID, UpdateName: signals.UpdateSend,
			Args: []any{req}, WaitForStage: client.WorkflowUpdateStageAccepted,
		},
	})
	if err != nil {
		return signals.SendResult{}, err
	}
	if opened != nil {
		opened()
	}
	var res signals.SendResult
	err = h.Get(ctx, &res)
	return res, err
}

// The search attribute a session starts with (as internal/sessions starts one).
var searchSession = temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionID)

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
