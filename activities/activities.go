// Package activities holds eve's Temporal activities: the model step and
// tool execution. Everything non-deterministic (model calls, tool code,
// schema validation of live data) runs here, never in workflow code.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// Registered activity names.
const (
	ModelStepName        = "eve.ModelStep"
	ExecuteToolName      = "eve.ExecuteTool"
	EvaluateApprovalName = "eve.EvaluateApproval"
	EvaluateResponseName = "eve.EvaluateResponse"
)

// Error types of application errors raised here.
const (
	ErrTypeModel     = "ModelError"
	ErrTypeTool      = "ToolError"
	ErrTypeBadConfig = "ConfigError"
	// A response policy failed or did not answer in time.
	ErrTypeResponsePolicy  = "ResponsePolicyError"
	ErrTypeResponseTimeout = "ResponsePolicyTimeout"
	// A call that learned of its cancellation before its activity's
	// context ended (tools.Context.HeartbeatNow).
	ErrTypeCancelled = "CallCancelled"
)

// Activities is the receiver registered with the worker.
type Activities struct {
	Tools  *tools.Registry
	Model  model.Model
	System string
	Logger *slog.Logger
	// Actions signs delegated actions' completion URLs.
	Actions *ActionsConfig
	// CheckTool holds a resolver's tools to the rules the agent's own
	// tools passed at registration (the catalog's; agent.Register sets
	// it, so the engine need not depend on the catalog).
	CheckTool func(*tools.Tool) error
	// Client lets model steps stream text deltas to their turn.
	Client client.Client
	// Resolvers add tools at session, turn or step start.
	Resolvers []tools.Resolver
	// Disabled names are dropped from non-system resolvers' tools.
	Disabled []string
	// Conversations holds sessions' conversations (model steps read and
	// extend them by reference).
	Conversations *conversation.Store
	// OnReminder notifies people of reminders and escalations (nil: none).
	OnReminder ReminderHook
	// Changes, when set, tells which sessions recorded events (the notify
	// bus): a call waiting for its person's answer reads it when its
	// session changes instead of polling (ask.go).
	Changes Subscriber
	cache   resolverCache
}

// Subscriber delivers "session X changed" (notify.Bus's Subscribe); an
// empty session id means any may have.
type Subscriber interface {
	Subscribe(fn func(sessionID string, events int)) (cancel func())
}

// ModelStepInput is one model call.
type ModelStepInput struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	StepIndex int    `json:"stepIndex"`
	// Conversation is the stored conversation (nil: an empty one); Append are the
	// messages that follow it (the user's message, tool results), stored
	// by the step before the model is called.
	Conversation *conversation.Ref `json:"conversation,omitempty"`
	Append       []model.Message   `json:"append,omitempty"`
	// Dynamic are the resolved tools in force for this step.
	Dynamic []DynamicTool `json:"dynamic,omitempty"`
	// StreamTo, when set, is the turn workflow that receives streamed text
	// as coalesced signals (message.appended events).
	StreamTo string `json:"streamTo,omitempty"`
}

// Kinds of call, as plans record them (tools.Kind; one table of what each
// implies: tools.Kind.Info).
const (
	KindAuthored  = string(tools.KindAuthored)
	KindClient    = string(tools.KindClient)
	KindDelegated = string(tools.KindDelegated)
)

// CallPlan is how the workflow must run one tool call. The model step decides
// it from the registry and records it in history, so workflow code never
// reads worker configuration directly.
type CallPlan struct {
	Call  model.ToolCall `json:"call"`
	Known bool           `json:"known"`
	Kind  string         `json:"kind,omitempty"`
	// InputError is set when the input breaks the tool's schema: the call
	// fails at once, without asking anyone or running anything.
	InputError string `json:"inputError,omitempty"`
	// Approval is the policy kind (approval.KindNever ...).
	Approval string `json:"approval,omitempty"`
	Title    string `json:"title,omitempty"`
	// Prompt is the reviewer's text built from the validated input
	// (approval.Policy.WithPrompt); empty: the default.
	Prompt string `json:"prompt,omitempty"`
	// ResponsePolicy: a response policy decides who may settle the call
	// (EvaluateResponse); otherwise only the requester may.
	ResponsePolicy bool `json:"responsePolicy,omitempty"`
	// Editable: a reviewer may approve with an edited input
	// (approval.Policy.Editable), checked against InputSchema (the tool's,
	// set only then) in workflow code.
	Editable    bool            `json:"editable,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Request and OutputSchema are set for client tools.
	Request      *tools.InputRequest `json:"request,omitempty"`
	OutputSchema json.RawMessage     `json:"outputSchema,omitempty"`
	// Deadline is set for delegated tools.
	Deadline time.Duration `json:"deadline,omitempty"`
	// MaxOutputBytes is the tool's output limit in force
	// (tools.Tool.EffectiveMaxOutputBytes). Workflow code checks delegated
	// completions and client answers against it; 0 (a plan recorded before
	// the field existed) means not known, and nothing is checked.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// InputDeadline is the tool's own deadline for a person's answer
	// (tools.Tool.InputDeadline: 0 the agent's, negative none).
	InputDeadline time.Duration `json:"inputDeadline,omitempty"`
	// RequestDeadline is this call's own deadline from its approval
	// policy (approval.Policy.WithDeadline; 0 none given, negative no
	// deadline); Reminders the tool's own; Escalation the policy's
	// (a request's follow-ups: workflows/request.go).
	RequestDeadline time.Duration        `json:"requestDeadline,omitempty"`
	Reminders       *tools.Reminders     `json:"reminders,omitempty"`
	Escalation      *approval.Escalation `json:"escalation,omitempty"`
	// Activity options for the call.
	Local            bool              `json:"local,omitempty"`
	Timeout          time.Duration     `json:"timeout"`
	HeartbeatTimeout time.Duration     `json:"heartbeatTimeout,omitempty"`
	Retry            tools.RetryPolicy `json:"retry"`
}

// ModelStepOutput is the model's response plus a plan for each tool call.
type ModelStepOutput struct {
	ModelID  string         `json:"modelId"`
	Response model.Response `json:"response"`
	Plans    []CallPlan     `json:"plans,omitempty"`
	// Conversation is the stored conversation after the step: the input's,
	// Append, and the model's answer (set when the input's was).
	Conversation *conversation.Ref `json:"conversation,omitempty"`
}

// ModelStep runs one model step with the registry's tools.
func (a *Activities) ModelStep(ctx context.Context, in ModelStepInput) (ModelStepOutput, error) {
	msgs, conv, err := a.stepMessages(ctx, in)
	if err != nil {
		return ModelStepOutput{}, err
	}
	req := model.Request{System: a.System, Messages: msgs, Tools: a.descriptors(in.Dynamic)}
	stream, flush := a.streamer(ctx, in)
	resp, err := a.Model.Step(ctx, req, stream)
	flush()
	if err != nil {
		if model.IsRetryable(err) {
			msg := fmt.Sprintf("model step %d of %s: %v", in.StepIndex, in.TurnID, err)
			if d, ok := model.RetryDelay(err); ok {
				// Honour the provider's Retry-After.
				return ModelStepOutput{}, temporal.NewApplicationErrorWithOptions(msg, "ModelRetryable", temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: d})
			}
			return ModelStepOutput{}, temporal.NewApplicationErrorWithCause(msg, "ModelRetryable", err)
		}
		return ModelStepOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("model step %d of %s: %v", in.StepIndex, in.TurnID, err), ErrTypeModel, err)
	}
	out := ModelStepOutput{ModelID: a.Model.ID(), Response: resp}
	if conv != nil {
		answer := model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
		next, err := a.Conversations.Append(ctx, in.SessionID, *conv, append(append([]model.Message(nil), in.Append...), answer)...)
		if err != nil {
			return ModelStepOutput{}, temporal.NewApplicationErrorWithCause("store the model's answer: "+err.Error(), ErrTypeStore, err)
		}
		out.Conversation = &next
	}
	for _, c := range resp.ToolCalls {
		t, err := a.lookup(ctx, c.Name, in.Dynamic, auth.Session{})
		if err != nil {
			return ModelStepOutput{}, fmt.Errorf("find tool %s: %w", c.Name, err)
		}
		out.Plans = append(out.Plans, PlanCall(t, c))
	}
	return out, nil
}

// PlanCall is how a call of t runs: the one call-plan builder, used by the
// model step for a turn's calls and by the tools API for executions. A nil
// t (a tool the agent does not have) gives an unknown call. Input that
// breaks t's schema, or for which a delegated tool cannot compute its
// deadline or a client tool its request, sets InputError. The plan is
// recorded in history: what it computes for a tool and an input must not
// change between releases (tests pin it).
func PlanCall(t *tools.Tool, c model.ToolCall) CallPlan {
	if t == nil {
		return CallPlan{Call: c, Timeout: tools.DefaultTimeout, Retry: tools.RetryPolicy{MaximumAttempts: 1}}
	}
	p := CallPlan{
		Call:             c,
		Known:            true,
		Kind:             KindAuthored, // the tool's own once its input is valid (pinned)
		Approval:         t.Approval.Kind(),
		Title:            t.DisplayTitle(),
		Local:            t.Local,
		Timeout:          t.EffectiveTimeout(),
		HeartbeatTimeout: t.HeartbeatTimeout,
		Retry:            t.EffectiveRetry(),
		MaxOutputBytes:   t.EffectiveMaxOutputBytes(),
		InputDeadline:    t.InputDeadline,
	}
	if err := t.ValidateInput(c.Input); err != nil {
		p.InputError = fmt.Sprintf("invalid input for tool %s: %v. Call it again with input that matches its input schema.", t.Name, err)
		return p
	}
	p.Kind = string(t.Kind())
	p.ResponsePolicy = t.Approval.HasResponsePolicy()
	if p.Approval != approval.KindNever {
		pc := approval.PromptContext{ToolName: c.Name, CallID: c.ID, ToolInput: c.Input}
		p.Prompt = t.Approval.Prompt(pc)
		if t.Approval.IsEditable() && !t.Kind().Info().AsksPerson {
			p.Editable, p.InputSchema = true, t.InputSchema
		}
		planFollowUps(&p, t, pc)
	} else {
		p.Reminders = t.InputReminders
	}
	if t.Kind().Info().NeedsDeadline {
		p.OutputSchema = t.OutputSchema
		d, err := t.DeadlineOf(c.Input)
		if err != nil {
			p.InputError = fmt.Sprintf("tool %s cannot compute a deadline for this input: %v", t.Name, err)
			return p
		}
		p.Deadline = d
	}
	if t.Kind().Info().AsksPerson {
		p.OutputSchema = t.OutputSchema
		req, err := t.RequestFor(c.Input)
		if err != nil {
			p.InputError = fmt.Sprintf("tool %s cannot ask with this input: %v", t.Name, err)
			return p
		}
		p.Request = &req
	}
	return p
}

// ApprovalInput asks a custom policy about one call.
type ApprovalInput struct {
	Context approval.Context `json:"context"`
	Dynamic []DynamicTool    `json:"dynamic,omitempty"`
}

// PolicyTimeout bounds one custom policy evaluation.
const PolicyTimeout = 10 * time.Second

// EvaluateApproval runs a tool's custom approval policy. A policy that
// errors, panics, times out or answers nonsense fails closed: the result
// asks a person, with the reason logged and shown in the prompt.
func (a *Activities) EvaluateApproval(ctx context.Context, in ApprovalInput) (st approval.Status, err error) {
	t, lerr := a.lookup(ctx, in.Context.ToolName, in.Dynamic, in.Context.Session)
	if lerr != nil || t == nil {
		return approval.Status{Type: approval.UserApproval, Reason: "the approval policy could not be found"}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, PolicyTimeout)
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

// ResponseInput asks a tool's response policy about one response.
type ResponseInput struct {
	Context approval.ResponseContext `json:"context"`
	Dynamic []DynamicTool            `json:"dynamic,omitempty"`
}

// ResponsePolicyTimeout bounds one response policy evaluation (eve's 10 s).
const ResponsePolicyTimeout = 10 * time.Second

// Reasons of candidates whose policy did not decide.
const (
	ReasonResponseFailed   = "We couldn't verify your response. Please try again."
	ReasonResponseTimedOut = "The approval policy did not answer in time. Please try again."
)

// EvaluateResponse runs a tool's response policy. A policy that errors,
// panics or answers no verdict fails: the response settles nothing (an
// error of type ErrTypeResponsePolicy, logged with the tool and call).
func (a *Activities) EvaluateResponse(ctx context.Context, in ResponseInput) (v approval.Verdict, err error) {
	c := in.Context
	t, lerr := a.lookup(ctx, c.Request.ToolName, in.Dynamic, c.Session)
	if lerr != nil || t == nil {
		return approval.Verdict{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the response policy of tool %s could not be found", c.Request.ToolName), ErrTypeResponsePolicy, lerr)
	}
	pctx, cancel := context.WithTimeout(ctx, ResponsePolicyTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			a.logger().Error("response policy panicked; the response settles nothing", "tool", t.Name, "call", c.Request.CallID, "panic", r)
			v, err = approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s panicked", t.Name), ErrTypeResponsePolicy, nil)
		}
	}()
	v, err = t.Approval.EvaluateResponse(pctx, c)
	if err == nil && !v.Valid() {
		err = fmt.Errorf("verdict %q is neither allowed nor rejected", v.Status)
	}
	if err != nil {
		a.logger().Error("response policy failed; the response settles nothing", "tool", t.Name, "call", c.Request.CallID, "err", err)
		if pctx.Err() != nil && ctx.Err() == nil {
			return approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s did not answer within %s", t.Name, ResponsePolicyTimeout), ErrTypeResponseTimeout, err)
		}
		return approval.Verdict{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the response policy of tool %s failed: %v", t.Name, err), ErrTypeResponsePolicy, err)
	}
	return v, nil
}

// ExecuteToolInput is one tool call.
type ExecuteToolInput struct {
	Session  auth.Session    `json:"session"`
	TurnID   string          `json:"turnId"`
	CallID   string          `json:"callId"`
	ToolName string          `json:"toolName"`
	Input    json.RawMessage `json:"input"`
	// ActionID and Deadline are set for delegated calls.
	ActionID string    `json:"actionId,omitempty"`
	Deadline time.Time `json:"deadline,omitempty"`
	// Dynamic locates a resolved tool.
	Dynamic []DynamicTool `json:"dynamic,omitempty"`
	// Approver settled the call's approval (tools.Context.Approver).
	Approver *auth.Principal `json:"approver,omitempty"`
	// Client is the calling MCP client's round (tools.Context.Client), set
	// only for executions of tools.Tool.ClientInput tools MCP started.
	Client *protocol.ClientRound `json:"client,omitempty"`
}

// ToolOutcome is a settled call as the model and the stream see it. Input
// and output validation failures are outcomes, not activity failures, so
// they are never retried.
type ToolOutcome struct {
	Status string                `json:"status"` // completed or failed
	Output json.RawMessage       `json:"output"`
	Error  *protocol.ActionError `json:"error,omitempty"`
}

// FailedOutcome builds a failed outcome whose output tells the model why.
func FailedOutcome(code, message string) ToolOutcome {
	out, _ := json.Marshal(map[string]string{"error": message, "code": code})
	return ToolOutcome{Status: protocol.StatusFailed, Output: out, Error: &protocol.ActionError{Code: code, Message: message}}
}

// ExecuteTool validates the input, runs the tool and validates its output.
func (a *Activities) ExecuteTool(ctx context.Context, in ExecuteToolInput) (ToolOutcome, error) {
	t, err := a.lookup(ctx, in.ToolName, in.Dynamic, in.Session)
	var changed *IdentityChangedError
	if errors.As(err, &changed) {
		return FailedOutcome(protocol.CodeConnectionChanged, changed.Error()), nil
	}
	if err != nil {
		return ToolOutcome{}, fmt.Errorf("find tool %s: %w", in.ToolName, err)
	}
	if t == nil {
		return FailedOutcome(protocol.CodeToolNotFound, fmt.Sprintf("unknown tool %q", in.ToolName)), nil
	}
	if err := t.ValidateInput(in.Input); err != nil {
		return FailedOutcome(protocol.CodeToolInputInvalid,
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
	tctx.Client = in.Client
	if t.Delegated != nil {
		return a.delegate(ctx, tctx, t, in)
	}
	if t.Execute == nil {
		return FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s cannot be executed here (it is answered by a person)", t.Name)), nil
	}
	result, panicked, err := runTool(t, tctx, in.Input)
	if panicked != nil {
		// A panic is a bug in the tool, not a failure a retry may pass:
		// the call fails at once, and the model reads that it crashed.
		a.logger().Error("tool panicked", "tool", t.Name, "call", in.CallID, "panic", panicked, "stack", string(debug.Stack()))
		return FailedOutcome(protocol.CodeToolPanicked, fmt.Sprintf("tool %s crashed (it panicked: %v); this is a bug in the tool", t.Name, panicked)), nil
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return ToolOutcome{}, err
		}
		if errors.Is(context.Cause(callCtx), errCancelRequested) {
			// Learned through HeartbeatNow before the SDK's throttled
			// heartbeat ended ctx: the call ends without a retry.
			return ToolOutcome{}, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("tool %s: %v", t.Name, errCancelRequested), ErrTypeCancelled,
				temporal.ApplicationErrorOptions{NonRetryable: true, Cause: err, Category: temporal.ApplicationErrorCategoryBenign})
		}
		var ask *tools.ClientInputRequired
		if errors.As(err, &ask) {
			return clientInputOutcome(t, in, ask), nil
		}
		msg := fmt.Sprintf("tool %s failed: %v", t.Name, err)
		if tools.IsNonRetryable(err) {
			return ToolOutcome{}, temporal.NewNonRetryableApplicationError(msg, ErrTypeTool, err)
		}
		return ToolOutcome{}, temporal.NewApplicationErrorWithCause(msg, ErrTypeTool, err)
	}
	out, err := json.Marshal(result)
	if err != nil {
		return FailedOutcome(protocol.CodeToolOutputInvalid, fmt.Sprintf("tool %s returned a value that is not JSON: %v", t.Name, err)), nil
	}
	if o, tooLarge := a.checkOutputSize(t, in, out); tooLarge {
		return o, nil
	}
	if err := t.ValidateOutput(out); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			a.logger().Warn("tool output breaks its schema", "tool", t.Name, "call", in.CallID, "problems", ve.Problems)
		}
		return FailedOutcome(protocol.CodeToolOutputInvalid, fmt.Sprintf("tool %s returned output that breaks its output schema: %v", t.Name, err)), nil
	}
	return ToolOutcome{Status: protocol.StatusCompleted, Output: out}, nil
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
func (a *Activities) heartbeatNow(callCtx context.Context, cancel context.CancelCauseFunc, info activity.Info) func(...any) {
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

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// clientInputOutcome ends a round whose tool asked its MCP client for
// input: the output carries the requests and the tool's state for the MCP
// server. A tool that asks where no client can answer fails, saying why.
func clientInputOutcome(t *tools.Tool, in ExecuteToolInput, ask *tools.ClientInputRequired) ToolOutcome {
	if in.Client == nil || !t.ClientInput {
		why := "it was not called by an MCP client"
		if !t.ClientInput {
			why = "it does not set tools.Tool.ClientInput"
		}
		return FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s asked for client input, which it cannot do here: %s", t.Name, why))
	}
	out, err := json.Marshal(protocol.ClientInputRequest{InputRequests: ask.Requests, State: ask.State, BeforeTask: ask.BeforeTask})
	if err != nil {
		return FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s asked for client input that does not encode: %v", t.Name, err))
	}
	o := FailedOutcome(protocol.CodeClientInputRequired, fmt.Sprintf("tool %s asks its MCP client for input", t.Name))
	o.Output = out
	return o
}
