// Package activities holds eve's Temporal activities: the model step and
// tool execution. Everything non-deterministic (model calls, tool code,
// schema validation of live data) runs here, never in workflow code.
// Register puts them on a worker (agent.Register calls it); what the
// workflows send them and get back is internal/work.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// Options are what Register builds eve's activities from: the agent's
// tools, model and hooks (agent.Agent), and what its worker wires in
// (agent.Host). agent.Register fills them.
type Options struct {
	Tools  *tools.Registry
	Model  model.Model
	System string
	// Resolvers add tools at session, turn or step start.
	Resolvers []tools.Resolver
	// Disabled names are dropped from non-system resolvers' tools.
	Disabled []string
	// CheckTool holds a resolver's tools to the rules the agent's own
	// tools passed at registration (the catalog's; agent.Register sets
	// it, so the engine need not depend on the catalog).
	CheckTool func(*tools.Tool) error
	// OnReminder notifies people of reminders and escalations (nil: none).
	// It runs once per notice, retried when it fails, so it must tolerate
	// a repeat of the same tools.Reminder.IdempotencyKey.
	OnReminder func(ctx context.Context, r tools.Reminder) error

	// Store holds sessions' conversations (model steps read and extend
	// them by reference). Required.
	Store payloadstore.Store
	// Client lets model steps stream text deltas to their turn, and
	// sessions read the events of a turn that ended abnormally.
	Client client.Client
	Logger *slog.Logger
	// Actions sign delegated tools' completion URLs (nil: delegated tools
	// fail, saying so).
	Actions *Actions
	// Changes, when set, tells which sessions recorded events (the notify
	// bus): a call waiting for its person's answer reads it when its
	// session changes instead of polling (ask.go).
	Changes Subscriber
	// Subagents are the agents a tool's code may delegate to
	// (tools.Context.Agent; agent.Agent.Subagents, CodeOnly ones too).
	Subagents []Subagent
	// SearchAttributes: the namespace has eve's search attributes, so a
	// child session a call opens starts with them.
	SearchAttributes bool
	// ConversationFormat is how conversations are written (agent.Host).
	ConversationFormat conversation.Format
}

// activitySet is the receiver of the activities registered on a worker.
type activitySet struct {
	Options
	// actions signs delegated actions' completion URLs.
	actions *actionsConfig
	// conversations holds sessions' conversations.
	conversations *conversation.Store
	cache         resolverCache
}

// Subscriber delivers "session X changed" (notify.Bus's Subscribe); an
// empty session id means any may have.
type Subscriber interface {
	Subscribe(fn func(sessionID string, events int)) (cancel func())
}

// ModelStep runs one model step with the registry's tools.
func (a *activitySet) ModelStep(ctx context.Context, in work.ModelStepInput) (work.ModelStepOutput, error) {
	msgs, conv, err := a.stepMessages(ctx, in)
	if err != nil {
		return work.ModelStepOutput{}, err
	}
	req := model.Request{System: a.System, Messages: msgs, Tools: a.descriptors(in.Dynamic)}
	if a.Tools.HasTasks() {
		// eve's task tools and its system block (tools/tasks.md).
		req.Tools = append(req.Tools, tools.TaskControlDescriptors()...)
		req.System = strings.TrimSpace(req.System + "\n\n" + tools.TaskSystemBlock)
	}
	if len(in.OutputSchema) > 0 {
		// The turn must end with a structured result: eve's eve__reply.
		req.Tools = append(req.Tools, tools.ReplyDescriptor(in.OutputSchema))
	}
	stream, flush := a.streamer(ctx, in)
	began := time.Now()
	resp, err := a.Model.Step(ctx, req, stream)
	elapsed := time.Since(began)
	flush()
	if err != nil {
		if model.IsRetryable(err) {
			msg := fmt.Sprintf("model step %d of %s: %v", in.StepIndex, in.TurnID, err)
			if d, ok := model.RetryDelay(err); ok {
				// Honour the provider's Retry-After.
				return work.ModelStepOutput{}, temporal.NewApplicationErrorWithOptions(msg, "ModelRetryable", temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: d})
			}
			return work.ModelStepOutput{}, temporal.NewApplicationErrorWithCause(msg, "ModelRetryable", err)
		}
		return work.ModelStepOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("model step %d of %s: %v", in.StepIndex, in.TurnID, err), work.ErrTypeModel, err)
	}
	out := work.ModelStepOutput{ModelID: a.Model.ID(), Response: resp, Elapsed: max(elapsed.Milliseconds(), 1)}
	if conv != nil {
		answer := model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
		next, err := a.conversations.Append(ctx, in.SessionID, *conv, append(append([]model.Message(nil), in.Append...), answer)...)
		if err != nil {
			return work.ModelStepOutput{}, temporal.NewApplicationErrorWithCause("store the model's answer: "+err.Error(), work.ErrTypeStore, err)
		}
		out.Conversation = &next
	}
	for _, c := range resp.ToolCalls {
		if len(in.OutputSchema) > 0 && c.Name == tools.ReplyToolName {
			continue // the turn reads it (workflows/output.go)
		}
		t, err := a.lookup(ctx, c.Name, in.Dynamic, auth.Session{})
		if err != nil {
			return work.ModelStepOutput{}, fmt.Errorf("find tool %s: %w", c.Name, err)
		}
		out.Plans = append(out.Plans, work.PlanCall(t, c))
	}
	return out, nil
}

// EvaluateApproval runs a tool's custom approval policy. A policy that
// errors, panics, times out or answers nonsense fails closed: the result
// asks a person, with the reason logged and shown in the prompt.
func (a *activitySet) EvaluateApproval(ctx context.Context, in work.ApprovalInput) (st approval.Status, err error) {
	t, lerr := a.lookup(ctx, in.Context.ToolName, in.Dynamic, in.Context.Session)
	if lerr != nil || t == nil {
		return approval.Status{Type: approval.UserApproval, Reason: "the approval policy could not be found"}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, work.PolicyTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			a.logger().Error("approval policy panicked; asking a person", "tool", t.Name, "call", in.Context.CallID, "panic", r)
			st, err = approval.Status{Type: approval.UserApproval, Reason: "the approval policy failed"}, nil
		}
	}()
	c := in.Context
	c.ToolAnnotations = &approval.ToolAnnotations{ReadOnly: t.Annotations.ReadOnly, Destructive: t.Annotations.Destructive,
		Idempotent: t.Annotations.Idempotent || t.Idempotent, OpenWorld: t.Annotations.OpenWorld}
	if cfg, ok := t.Approval.AutoConfig(); ok {
		st, r := cfg.ReviewWith(pctx, a.Model, c)
		a.logger().Info("automatic approval review", "tool", t.Name, "call", in.Context.CallID, "verdict", r.Verdict, "reason", r.Reason)
		st.Review = &r
		return st, nil
	}
	st, err = t.Approval.Evaluate(pctx, c)
	if err != nil || !st.Valid() {
		a.logger().Error("approval policy failed; asking a person", "tool", t.Name, "call", in.Context.CallID, "err", err, "status", st.Type)
		return approval.Status{Type: approval.UserApproval, Reason: "the approval policy failed"}, nil
	}
	return st, nil
}

// EvaluateResponse runs a tool's response policy. A policy that errors,
// panics or answers no verdict fails: the response settles nothing (an
// error of type ErrTypeResponsePolicy, logged with the tool and call).
func (a *activitySet) EvaluateResponse(ctx context.Context, in work.ResponseInput) (v approval.Verdict, err error) {
	c := in.Context
	t, lerr := a.lookup(ctx, c.Request.ToolName, in.Dynamic, c.Session)
	if lerr != nil || t == nil {
		return approval.Verdict{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the response policy of tool %s could not be found", c.Request.ToolName), work.ErrTypeResponsePolicy, lerr)
	}
	pctx, cancel := context.WithTimeout(ctx, work.ResponsePolicyTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			a.logger().Error("response policy panicked; the response settles nothing", "tool", t.Name, "call", c.Request.CallID, "panic", r)
			v, err = approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s panicked", t.Name), work.ErrTypeResponsePolicy, nil)
		}
	}()
	v, err = t.Approval.EvaluateResponse(pctx, c)
	if err == nil && !v.Valid() {
		err = fmt.Errorf("verdict %q is neither allowed nor rejected", v.Status)
	}
	if err != nil {
		a.logger().Error("response policy failed; the response settles nothing", "tool", t.Name, "call", c.Request.CallID, "err", err)
		if pctx.Err() != nil && ctx.Err() == nil {
			return approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s did not answer within %s", t.Name, work.ResponsePolicyTimeout), work.ErrTypeResponseTimeout, err)
		}
		return approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s failed: %v", t.Name, err), work.ErrTypeResponsePolicy, err)
	}
	return v, nil
}

// ExecuteTool validates the input, runs the tool and validates its output.
func (a *activitySet) ExecuteTool(ctx context.Context, in work.ExecuteToolInput) (work.ToolOutcome, error) {
	t, err := a.lookup(ctx, in.ToolName, in.Dynamic, in.Session)
	var changed *identityChangedError
	if errors.As(err, &changed) {
		return work.FailedOutcome(protocol.CodeConnectionChanged, changed.Error()), nil
	}
	if err != nil {
		return work.ToolOutcome{}, fmt.Errorf("find tool %s: %w", in.ToolName, err)
	}
	if t == nil {
		return work.FailedOutcome(protocol.CodeToolNotFound, fmt.Sprintf("unknown tool %q", in.ToolName)), nil
	}
	if err := t.ValidateInput(in.Input); err != nil {
		return work.FailedOutcome(protocol.CodeToolInputInvalid,
			fmt.Sprintf("invalid input for tool %s: %v. Call it again with input that matches its input schema.", t.Name, err)), nil
	}
	var attempt int32 = 1
	heartbeat := func(...any) {}
	var beatNow func(...any)
	callCtx := ctx
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		attempt = info.Attempt
		if !info.IsLocalActivity {
			heartbeat = func(d ...any) { activity.RecordHeartbeat(ctx, d...) }
			if a.Client != nil {
				var cancel context.CancelCauseFunc
				callCtx, cancel = context.WithCancelCause(ctx)
				defer cancel(nil)
				beatNow = a.heartbeatNow(callCtx, cancel, info)
			}
		}
	}
	tctx := tools.NewContext(callCtx, in.Session, in.TurnID, in.CallID, t.Name, attempt, heartbeat)
	if beatNow != nil {
		tctx.SetHeartbeatNow(beatNow)
	}
	if activity.IsActivity(ctx) {
		tctx.SetWorkerStop(activity.GetWorkerStopChannel(ctx))
	}
	if attempt > 1 && activity.HasHeartbeatDetails(ctx) {
		tctx.SetLastHeartbeat(func(v any) error { return activity.GetHeartbeatDetails(ctx, v) })
	}
	tctx.Approver = in.Approver
	if ask := a.asker(in); ask != nil {
		tctx.SetAsker(ask)
	}
	if send := a.agentSender(in); send != nil {
		tctx.SetAgentSender(send)
	}
	tctx.Client = in.Client
	tctx.TaskID = in.TaskID
	if in.Resumable || (t.Task != nil && t.Task.Resumable) {
		// Outside a turn (the tools API, MCP) a resumable tool's call
		// starts fresh and what it saves is dropped.
		tctx.SetTaskState(in.TaskState)
	}
	if t.Delegated != nil {
		return a.delegate(ctx, tctx, t, in)
	}
	if t.Execute == nil {
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s cannot be executed here (it is answered by a person)", t.Name)), nil
	}
	result, panicked, err := runTool(t, tctx, in.Input)
	if panicked != nil {
		// A panic is a bug in the tool, not a failure a retry may pass:
		// the call fails at once, and the model reads that it crashed.
		a.logger().Error("tool panicked", "tool", t.Name, "call", in.CallID, "panic", panicked, "stack", string(debug.Stack()))
		return work.FailedOutcome(protocol.CodeToolPanicked, fmt.Sprintf("tool %s crashed (it panicked: %v); this is a bug in the tool", t.Name, panicked)), nil
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return work.ToolOutcome{}, err
		}
		if errors.Is(context.Cause(callCtx), errCancelRequested) {
			// Learned through HeartbeatNow before the SDK's throttled
			// heartbeat ended ctx: the call ends without a retry.
			return work.ToolOutcome{}, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("tool %s: %v", t.Name, errCancelRequested), work.ErrTypeCancelled,
				temporal.ApplicationErrorOptions{NonRetryable: true, Cause: err, Category: temporal.ApplicationErrorCategoryBenign})
		}
		var ask *tools.ClientInputRequired
		if errors.As(err, &ask) {
			return clientInputOutcome(t, in, ask), nil
		}
		msg := fmt.Sprintf("tool %s failed: %v", t.Name, err)
		if tools.IsNonRetryable(err) {
			return work.ToolOutcome{}, temporal.NewNonRetryableApplicationError(msg, work.ErrTypeTool, err)
		}
		return work.ToolOutcome{}, temporal.NewApplicationErrorWithCause(msg, work.ErrTypeTool, err)
	}
	out, err := json.Marshal(result)
	if err != nil {
		return work.FailedOutcome(protocol.CodeToolOutputInvalid, fmt.Sprintf("tool %s returned a value that is not JSON: %v", t.Name, err)), nil
	}
	if o, tooLarge := a.checkOutputSize(t, in, out); tooLarge {
		return o, nil
	}
	if err := t.ValidateOutput(out); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			a.logger().Warn("tool output breaks its schema", "tool", t.Name, "call", in.CallID, "problems", ve.Problems)
		}
		return work.FailedOutcome(protocol.CodeToolOutputInvalid, fmt.Sprintf("tool %s returned output that breaks its output schema: %v", t.Name, err)), nil
	}
	res := work.ToolOutcome{Status: protocol.StatusCompleted, Output: out}
	if state, saved := tctx.SavedTaskState(); saved {
		res.TaskState = state
	}
	return res, nil
}

// errCancelRequested ends a call's context when a heartbeat sent at once
// (tools.Context.HeartbeatNow) learns that the call was cancelled, or
// that the workflow that made it has ended (a cancelled turn ends at once
// and takes the activity's cancel request with it).
var errCancelRequested = errors.New("the call was cancelled")

// heartbeatNow sends a call's heartbeat with the worker's client, which
// Temporal's throttling does not hold, and ends callCtx when Temporal
// answers that the call was cancelled or its workflow has ended.
// Anything else (a failed request, a paused activity, an attempt that
// timed out while its workflow runs on) is left to the SDK's own
// heartbeats, which act on it as always.
func (a *activitySet) heartbeatNow(callCtx context.Context, cancel context.CancelCauseFunc, info activity.Info) func(...any) {
	var attemptGone atomic.Bool
	return func(details ...any) {
		if attemptGone.Load() {
			activity.RecordHeartbeat(callCtx, details...)
			return
		}
		rctx, done := context.WithTimeout(callCtx, 10*time.Second)
		defer done()
		err := a.Client.RecordActivityHeartbeat(rctx, info.TaskToken, details...)
		var notFound *serviceerror.NotFound
		switch {
		case err == nil || callCtx.Err() != nil:
		case temporal.IsCanceledError(err):
			cancel(errCancelRequested)
		case errors.As(err, &notFound):
			d, derr := a.Client.DescribeWorkflowExecution(rctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
			if derr == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				cancel(errCancelRequested)
				return
			}
			attemptGone.Store(true)
		}
	}
}

// runTool runs t's Execute, reporting a panic instead of unwinding.
func runTool(t *tools.Tool, ctx *tools.Context, input json.RawMessage) (result any, panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	result, err = t.Execute(ctx, input)
	return result, nil, err
}

func (a *activitySet) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// clientInputOutcome ends a round whose tool asked its MCP client for
// input: the output carries the requests and the tool's state for the MCP
// server. A tool that asks where no client can answer fails, saying why.
func clientInputOutcome(t *tools.Tool, in work.ExecuteToolInput, ask *tools.ClientInputRequired) work.ToolOutcome {
	if in.Client == nil || !t.ClientInput {
		why := "it was not called by an MCP client"
		if !t.ClientInput {
			why = "it does not set tools.Tool.ClientInput"
		}
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s asked for client input, which it cannot do here: %s", t.Name, why))
	}
	out, err := json.Marshal(protocol.ClientInputRequest{InputRequests: ask.Requests, State: ask.State, BeforeTask: ask.BeforeTask})
	if err != nil {
		return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s asked for client input that does not encode: %v", t.Name, err))
	}
	o := work.FailedOutcome(protocol.CodeClientInputRequired, fmt.Sprintf("tool %s asks its MCP client for input", t.Name))
	o.Output = out
	return o
}
