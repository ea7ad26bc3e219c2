package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Subagents (changeSubagents; docs/subagents.md): a subagent's call is a
// resumable task of kind "agent" whose work is a child session.
//
//   - The task's first call starts the child: a session workflow of the
//     subagent's, on its task queue (signals.SubagentTaskQueue), with the
//     id signals.SubagentSessionID(parent session, task id). The start is
//     a command of the turn's workflow task, so a failed task starts
//     nothing and its retry issues the same start; REJECT_DUPLICATE makes
//     the id the child's forever. Its parent-close policy is ABANDON: the
//     turn that started it ends, and the child lives on, idle, for the
//     parent session's later turns, which address it by its derived id
//     (the session keeps the task between turns); it ends by its own
//     lifetime (agent.Agent.SessionLifetime).
//   - Each call (the first, or a later one by taskId) signals the child
//     the message (signals.SignalAgentMessage); the child runs it as a
//     turn of its own and, when that turn ends, signals the calling turn
//     its outcome (signals.SignalAgentReply), which settles the task.
//   - agent.started is recorded once, on the parent, when the child starts.

// subagentDeliveryPrefix marks the deliveries of a parent's messages.
const subagentDeliveryPrefix = "dlv_agent_"

// runAgent runs a subagent's call: it starts the child on the task's first
// call, sends the message and waits for the child's reply.
func runAgent(ctx workflow.Context, h callHost, c *pendingCall, in work.ExecuteToolInput) work.ToolOutcome {
	t, isTurn := h.(*turn)
	p := c.plan
	if !isTurn || p.Subagent == nil || p.Task == nil || c.taskID == "" ||
		!t.changeOn(ctx, changeSubagents) {
		return work.FailedOutcome(codeNotExecutable, fmt.Sprintf("tool %s (kind %q) runs only in a turn, as a task: it cannot be executed here", c.tool, p.Kind))
	}
	var msg struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(in.Input, &msg)
	childID := signals.SubagentSessionID(t.in.SessionID, c.taskID)
	text := msg.Message
	if p.Task.TaskID == "" {
		// The task's first call: start the child session.
		if out, ok := t.startChild(ctx, c, childID); !ok {
			return out
		}
		text = signals.SubagentPrompt(p.Subagent.Agent, p.Subagent.Description, msg.Message)
	}
	t.listenAgentReplies(ctx)
	if t.callTasks == nil {
		t.callTasks = map[string]string{}
	}
	t.callTasks[p.Call.ID] = c.taskID
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	m := signals.AgentMessage{Message: text, DeliveryID: subagentDeliveryPrefix + strings.ReplaceAll(self, "/", "_") + "_" + p.Call.ID,
		ReplyTo: self, CallID: p.Call.ID, Caller: t.in.Auth.Current}
	if err := workflow.SignalExternalWorkflow(ctx, childID, "", signals.SignalAgentMessage, m).Get(ctx, nil); err != nil {
		if ctx.Err() != nil {
			t.stopChild(ctx, p.Call.ID, childID, m.DeliveryID) // subagent_cancel.go
			return cancelledOutcome(c.tool)
		}
		// The child session ended (its lifetime) or is gone: the task ends
		// with this call, so a later call by its taskId is UNKNOWN_TASK.
		if ts := t.taskByID(c.taskID); ts != nil {
			ts.resumable = false
		}
		return taskRefusal(protocol.CodeUnknownTask, fmt.Sprintf(`No task "%s" is available to %s: it may have ended or belong to another tool. Start a new one by calling %s without taskId.`, c.taskID, c.tool, c.tool))
	}
	if err := workflow.Await(ctx, func() bool { _, ok := t.agentReplies[p.Call.ID]; return ok }); err != nil {
		t.stopChild(ctx, p.Call.ID, childID, m.DeliveryID) // subagent_cancel.go
		return cancelledOutcome(c.tool)
	}
	r := t.agentReplies[p.Call.ID]
	delete(t.agentReplies, p.Call.ID)
	if r.Status == signals.TurnStatusCompleted {
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: mustJSON(r.Reply)}
	}
	why := r.Error
	if why == "" {
		why = "its turn " + r.Status
	}
	return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("the subagent %s (session %s) did not answer: %s", c.tool, childID, why))
}

// startChild starts the subagent's child session and records agent.started.
func (t *turn) startChild(ctx workflow.Context, c *pendingCall, childID string) (work.ToolOutcome, bool) {
	p := c.plan
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:            childID,
		TaskQueue:             signals.SubagentTaskQueue(workflow.GetInfo(ctx).TaskQueueName, p.Subagent.Agent),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		Memo: map[string]any{
			signals.MemoSession: t.in.SessionID, signals.MemoTurn: t.in.TurnID,
			signals.MemoCall: p.Call.ID, signals.MemoTool: p.Call.Name,
		},
		StaticSummary: fmt.Sprintf("eve subagent %s, task %s of session %s", p.Subagent.Agent, c.taskID, t.in.SessionID),
	}
	if t.in.Auth.Initiator != nil {
		opts.Memo[signals.MemoInitiator] = t.in.Auth.Initiator
	}
	in := sessionInput{SessionID: childID, Initiator: t.in.Auth.Initiator, Versions: inputVersions}
	if t.changeOn(ctx, changeSubagentOrigin) {
		// The child's place under the root, so its requests and decisions
		// name their root session and depth (docs/subagents.md).
		in.Origin = t.in.Origin.Child(t.in.SessionID, p.Subagent.Agent, childID)
		opts.Memo[signals.MemoOrigin] = in.Origin
	}
	if t.cfg.SearchAttributes {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(searchStatus.ValueSet(statusIdle), searchSession.ValueSet(childID))
	}
	// Disconnected: cancelling the call (eve__task_cancel, a cancelled
	// turn) must not cancel the child session, which outlives the call.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	fut := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(dctx, opts), signals.SessionWorkflow, in)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("the subagent %s could not start its session %s: %s", c.tool, childID, errorMessage(err))), false
	}
	t.log.emit(ctx, protocol.AgentStarted, protocol.AgentStartedData{CallID: p.Call.ID, TurnID: t.in.TurnID, TaskID: c.taskID,
		Name: p.Subagent.Agent, SessionID: childID, StreamPath: signals.SessionStreamPath(childID)})
	return work.ToolOutcome{}, true
}

// listenAgentReplies receives the children's replies to this turn's calls.
func (t *turn) listenAgentReplies(ctx workflow.Context) {
	if t.agentReplies != nil {
		return
	}
	t.agentReplies = map[string]signals.AgentReply{}
	// The relayed inputs, unless the listener of the sessions the turn's
	// code opened has them already (agentcall.go): one receiver each.
	takeInputs := !t.agentInputs
	t.agentInputs = true
	ch := workflow.GetSignalChannel(ctx, signals.SignalAgentReply)
	inputs := workflow.GetSignalChannel(ctx, signals.SignalAgentInput)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
				var r signals.AgentReply
				c.Receive(ctx, &r)
				t.countAgentUsage(ctx, r) // subagent_usage.go
				t.agentReplies[r.CallID] = r
			})
			if takeInputs {
				sel.AddReceive(inputs, func(c workflow.ReceiveChannel, _ bool) {
					var in signals.AgentInput
					c.Receive(ctx, &in)
					t.takeAgentInput(ctx, in) // proxy.go
				})
			}
			sel.Select(ctx)
		}
	})
}

// agentMessage takes a parent turn's message (signals.SignalAgentMessage):
// it waits in the queue for a turn of its own, whose outcome answers the
// parent (replyToParent). A re-sent message joins the first.
func (s *session) agentMessage(ctx workflow.Context, m signals.AgentMessage) {
	if _, dup := s.st.Deliveries[m.DeliveryID]; dup || s.pendingOf(m.DeliveryID) != nil {
		return
	}
	to := &signals.AgentReplyTo{WorkflowID: m.ReplyTo, CallID: m.CallID}
	if s.ended {
		s.replyToParent(ctx, to, signals.TurnOutcome{Status: signals.TurnStatusFailed, Error: "the subagent's session has ended"})
		return
	}
	qm := queuedMessage{Message: m.Message, DeliveryID: m.DeliveryID, Caller: m.Caller, ReplyTo: to}
	if s.joinTurn(ctx, qm) { // subagent_join.go
		return
	}
	s.enqueue(qm)
}

// replyToParent answers a parent turn's message with its turn's outcome. A
// parent turn that has ended (cancelled) is not there to hear it.
func (s *session) replyToParent(ctx workflow.Context, to *signals.AgentReplyTo, o signals.TurnOutcome) {
	if !s.changeOn(ctx, changeSubagents) {
		return
	}
	r := signals.AgentReply{CallID: to.CallID, Status: o.Status, Reply: o.Reply, Error: o.Error, Usage: s.replyUsage(ctx)}
	if err := workflow.SignalExternalWorkflow(ctx, to.WorkflowID, "", signals.SignalAgentReply, r).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Info("the parent turn of a subagent's message is gone; its reply is dropped", "parent", to.WorkflowID, "error", err)
		return
	}
	s.usageReported(r) // subagent_usage.go
}
