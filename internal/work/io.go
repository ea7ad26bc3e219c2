package work

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

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
	// OutputSchema, when set, offers the model eve's eve__reply tool with
	// it as the input schema (the turn must end with a structured result).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// ModelStepOutput is the model's response plus a plan for each tool call.
type ModelStepOutput struct {
	ModelID  string         `json:"modelId"`
	Response model.Response `json:"response"`
	Plans    []CallPlan     `json:"plans,omitempty"`
	// Conversation is the stored conversation after the step: the input's,
	// Append, and the model's answer (set when the input's was).
	Conversation *conversation.Ref `json:"conversation,omitempty"`
	// Elapsed is how long the model took to answer (milliseconds): the
	// chat span's duration, which workflow time cannot tell for a local
	// activity (docs/observability.md). 0 in histories before it.
	Elapsed int64 `json:"elapsedMs,omitempty"`
}

// ApprovalInput asks a custom policy about one call.
type ApprovalInput struct {
	Context approval.Context `json:"context"`
	Dynamic []DynamicTool    `json:"dynamic,omitempty"`
}

// ResponseInput asks a tool's response policy about one response.
type ResponseInput struct {
	Context approval.ResponseContext `json:"context"`
	Dynamic []DynamicTool            `json:"dynamic,omitempty"`
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
	// TaskID is the task the call serves; TaskState, for a resumable
	// task's call, the state its last call saved (Resumable).
	TaskID    string          `json:"taskId,omitempty"`
	TaskState json.RawMessage `json:"taskState,omitempty"`
	Resumable bool            `json:"resumable,omitempty"`
	// AskTag is the tag a subagent's turn puts in its call's question ids
	// (signals.AskID: ask_<tag>_<callId>_<n>); empty: ask_<callId>_<n>.
	AskTag string `json:"askTag,omitempty"`
	// Origin is the calling session's place under its root (nil: a root
	// session), for the sessions the call's code opens (tools.Context.Agent):
	// they list under the same root. Set by the turns of agents with
	// subagents.
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
}

// ToolOutcome is a settled call as the model and the stream see it. Input
// and output validation failures are outcomes, not activity failures, so
// they are never retried.
type ToolOutcome struct {
	Status string                `json:"status"` // completed or failed
	Output json.RawMessage       `json:"output"`
	Error  *protocol.ActionError `json:"error,omitempty"`
	// TaskState is the state a resumable task's call saved
	// (tools.Context.SaveTaskState); nil: it saved none.
	TaskState json.RawMessage `json:"taskState,omitempty"`
}

// FailedOutcome builds a failed outcome whose output tells the model why.
func FailedOutcome(code, message string) ToolOutcome {
	out, _ := json.Marshal(map[string]string{"error": message, "code": code})
	return ToolOutcome{Status: protocol.StatusFailed, Output: out, Error: &protocol.ActionError{Code: code, Message: message}}
}

// AppendInput stores messages after a conversation.
type AppendInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Messages     []model.Message  `json:"messages"`
}

// CompactInput asks for a conversation to be replaced by a summary.
type CompactInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Append       []model.Message  `json:"append,omitempty"`
	// Keep is how many of the last messages stay as they are after the
	// summary (the running turn's: its user message, calls and results).
	Keep int `json:"keep,omitempty"`
	// MaxInputTokens bounds what the summarizing model reads: the oldest
	// messages beyond it are left out of the summary's input.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
}

// CompactOutput is the compacted conversation.
type CompactOutput struct {
	Conversation conversation.Ref `json:"conversation"`
	// Before is the size of what was compacted.
	Before conversation.Ref `json:"before"`
	Usage  model.Usage      `json:"usage"`
}

// ReviseInput replaces the last message of a conversation.
type ReviseInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Message      model.Message    `json:"message"`
}

// OutcomeOf is a delegated call's result (signals.ActionState.Observe or
// End) as the tool outcome the workflow records.
func OutcomeOf(r signals.ActionResult) ToolOutcome {
	if r.Status == protocol.StatusFailed {
		e := r.Error
		if e == nil {
			e = &protocol.ActionError{Code: protocol.CodeToolExecution, Message: "the job failed"}
		}
		out := FailedOutcome(e.Code, e.Message)
		out.Error = e // keeps the job's own error name
		return out
	}
	return ToolOutcome{Status: protocol.StatusCompleted, Output: r.Output}
}

// OutputTooLargeMessage tells the model (or a job, or a person) that a
// tool's output is over its limit, and how to change that.
func OutputTooLargeMessage(tool string, size, limit int) string {
	return fmt.Sprintf("tool %s returned %d bytes of output; the limit is %d (tools.Tool.MaxOutputBytes). Return less (page or summarize) or raise the tool's MaxOutputBytes.",
		tool, size, limit)
}

// CheckOutputSize returns an error naming the tool, the size and the limit
// when output is larger than limit. A limit of 0 or less is not known (a
// plan recorded before limits existed): nothing is checked. Workflow code
// may call it: it is a pure function of its arguments.
func CheckOutputSize(tool string, output []byte, limit int) error {
	if limit <= 0 || len(output) <= limit {
		return nil
	}
	return fmt.Errorf("output is %d bytes; tool %s accepts at most %d (tools.Tool.MaxOutputBytes). Send less (page or summarize), or raise the tool's MaxOutputBytes",
		len(output), tool, limit)
}

// ResolveInput asks the resolvers of one scope for tools.
type ResolveInput struct {
	Scope     tools.Scope  `json:"scope"`
	Session   auth.Session `json:"session"`
	TurnID    string       `json:"turnId,omitempty"`
	StepIndex int          `json:"stepIndex,omitempty"`
}

// DynamicTool is a resolved tool as recorded in history.
type DynamicTool struct {
	model.ToolDescriptor
	Resolver string       `json:"resolver"`
	System   bool         `json:"system,omitempty"`
	From     ResolveInput `json:"from"`
	// Identity is a connection tool's destination as resolved
	// (tools.Remote.Identity): a call whose tool later resolves to another
	// fails with CONNECTION_CHANGED.
	Identity string `json:"identity,omitempty"`
}

// ResolveOutput lists the resolved tools.
type ResolveOutput struct {
	Tools []DynamicTool `json:"tools"`
}
