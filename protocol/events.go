// Package protocol defines the events of eve's session stream (eve 0.80.1,
// stream version 26) and the input request/response shapes. Field names match
// eve's wire format exactly: the official eve/client reads these.
package protocol

import (
	"encoding/json"
)

// Event types recorded by the runtime.
const (
	SessionStarted   = "session.started"
	SessionWaiting   = "session.waiting"
	SessionFailed    = "session.failed"
	SessionCompleted = "session.completed"
	TurnStarted      = "turn.started"
	TurnWaiting      = "turn.waiting"
	TurnCompleted    = "turn.completed"
	TurnFailed       = "turn.failed"
	TurnCancelled    = "turn.cancelled"
	MessageReceived  = "message.received"
	MessageAppended  = "message.appended"
	MessageCompleted = "message.completed"
	// ResultCompleted is the structured result of a turn whose message
	// asked for one (outputSchema), just before turn.completed.
	ResultCompleted  = "result.completed"
	StepStarted      = "step.started"
	StepCompleted    = "step.completed"
	StepFailed       = "step.failed"
	ActionsRequested = "actions.requested"
	ActionResult     = "action.result"
	InputRequested   = "input.requested"
	InputResolved    = "input.resolved"
	// ApprovalCandidate is one response a response policy judges; an
	// approval without one settles directly (ApprovalSettled only).
	ApprovalCandidate = "approval.candidate"
	ApprovalSettled   = "approval.settled"
	// TaskStarted and TaskSettled frame a task: a call of a task tool
	// (tools.AsTask), once each per call, identified by (taskId, callId);
	// and, in histories recorded before tasks, a delegated call's job.
	TaskStarted = "task.started"
	TaskSettled = "task.settled"
	// AgentStarted announces a subagent's child session, once, on the
	// parent's stream: follow its streamPath for the child's events.
	AgentStarted   = "agent.started"
	ContextCleared = "context.cleared"

	CompactionRequested = "compaction.requested"
	CompactionCompleted = "compaction.completed"
)

// Event is one stamped stream event: {"type","data","meta"}.
type Event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	Meta Meta            `json:"meta"`
}

// Meta is stamped once when the event is recorded and never changes, so a
// replay of the stream yields the same ids (the client de-duplicates by id).
type Meta struct {
	ID          string   `json:"id"`
	At          string   `json:"at"`
	DeliveryIDs []string `json:"deliveryIds,omitempty"`
}

// Decode unmarshals the event's data into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Data, v) }

// TurnRef identifies the turn an event belongs to.
type TurnRef struct {
	Sequence int    `json:"sequence"`
	TurnID   string `json:"turnId"`
}

// TurnStartedData is turn.started's data: the turn, and its trace when the
// worker traces (docs/observability.md).
type TurnStartedData struct {
	TurnRef
	Trace *TraceContext `json:"trace,omitempty"`
}

// TraceContext is a span's W3C trace coordinates: where an observability
// backend shows the turn. TraceFlags is 1 when the trace is sampled.
type TraceContext struct {
	TraceID    string `json:"traceId"`
	SpanID     string `json:"spanId"`
	TraceFlags int    `json:"traceFlags"`
}

// StepRef identifies the model step an event belongs to.
type StepRef struct {
	Sequence  int    `json:"sequence"`
	StepIndex int    `json:"stepIndex"`
	TurnID    string `json:"turnId"`
}

// Task statuses and the cancel reason of task.settled.
const (
	TaskCompleted           = "completed"
	TaskFailed              = "failed"
	TaskCancelled           = "cancelled"
	TaskCancelTurnCancelled = "turn_cancelled"
	// TaskCancelTaskCancel: the model called eve__task_cancel.
	TaskCancelTaskCancel = "task_cancel"
	// TaskCancelTurnEnded: the turn ended (it failed) while the task worked.
	TaskCancelTurnEnded = "turn_ended"
)

// TaskStartedData is task.started: a call started a task. Kind is "tool"
// (eve's kind for every tool's task but an agent's, "agent").
type TaskStartedData struct {
	CallID string `json:"callId"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	TaskID string `json:"taskId"`
	TurnID string `json:"turnId"`
}

// AgentStartedData is agent.started: the call (and its task) that started
// a subagent's child session, the subagent's name, the child's session id
// and the route of its stream.
type AgentStartedData struct {
	CallID     string `json:"callId"`
	TurnID     string `json:"turnId"`
	TaskID     string `json:"taskId,omitempty"`
	Name       string `json:"name"`
	SessionID  string `json:"sessionId"`
	StreamPath string `json:"streamPath"`
}

// TaskSettledData is task.settled: the task's call settled, completed
// (with its output), failed (with the error) or cancelled (with why:
// task_cancel, turn_cancelled, turn_ended).
type TaskSettledData struct {
	CallID string          `json:"callId"`
	Cancel *TaskCancel     `json:"cancel,omitempty"`
	Error  *TaskError      `json:"error,omitempty"`
	Kind   string          `json:"kind,omitempty"`
	Name   string          `json:"name,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Status string          `json:"status"`
	TaskID string          `json:"taskId"`
	TurnID string          `json:"turnId"`
}

// TaskInfo is one task as a listing shows it: its call, and its status
// ("working", "idle" for a resumable task between calls, or
// task.settled's status). Progress is what a working task's tool last
// reported (tools.Context.ReportProgress), when the listing read it.
type TaskInfo struct {
	CallID   string    `json:"callId"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Progress *Progress `json:"progress,omitempty"`
	Status   string    `json:"status"`
	TaskID   string    `json:"taskId"`
	TurnID   string    `json:"turnId"`
}

// TaskIdle is a TaskInfo's status for a resumable task between calls.
const TaskIdle = "idle"

// SessionTasks is GET /eve/v1/session/{id}/tasks: the session's tasks.
// While a turn runs (TurnID) they are that turn's (working, settled,
// and the idle resumable tasks it may continue); between turns, the idle
// resumable tasks the session keeps.
type SessionTasks struct {
	SessionID string     `json:"sessionId"`
	TurnID    string     `json:"turnId,omitempty"`
	Tasks     []TaskInfo `json:"tasks"`
}

// TaskCancelResult is POST /eve/v1/session/{id}/tasks/{taskId}/cancel:
// the task's work was stopped (its task.settled says cancelled,
// cancel.reason task_cancel).
type TaskCancelResult struct {
	OK        bool   `json:"ok"`
	SessionID string `json:"sessionId"`
	TaskID    string `json:"taskId"`
	TurnID    string `json:"turnId"`
	Status    string `json:"status"`
}

// TaskWorking is a TaskInfo's status while the task works.
const TaskWorking = "working"

// TaskCancel says why a task was cancelled; TaskError why it failed.
type TaskCancel struct {
	Reason string `json:"reason"`
}
type TaskError struct {
	Message string `json:"message"`
}

// SessionCompletedData is session.completed: the session ended (its
// lifetime is over), with its token usage.
type SessionCompletedData struct {
	Usage *TokenUsage `json:"usage,omitempty"`
}

type SessionStartedData struct {
	Runtime *RuntimeIdentity `json:"runtime,omitempty"`
}

type RuntimeIdentity struct {
	AgentID    string `json:"agentId"`
	AgentName  string `json:"agentName,omitempty"`
	EveVersion string `json:"eveVersion"`
}

type SessionWaitingData struct {
	ContinuationToken string      `json:"continuationToken"`
	Usage             *TokenUsage `json:"usage,omitempty"`
	Wait              string      `json:"wait"` // "next-user-message"
}

type TurnCompletedData = TurnRef
type TurnCancelledData = TurnRef

type MessageReceivedData struct {
	Message  string `json:"message"`
	Sequence int    `json:"sequence"`
	TurnID   string `json:"turnId"`
}

type MessageAppendedData struct {
	MessageDelta string `json:"messageDelta"`
	StepRef
}

type MessageCompletedData struct {
	FinishReason string `json:"finishReason"`
	Message      string `json:"message"`
	StepRef
}

// ResultCompletedData is result.completed: the turn's structured result,
// valid against the schema its message sent (eve's data.result).
type ResultCompletedData struct {
	Result json.RawMessage `json:"result"`
	StepRef
}

type StepStartedData struct {
	ModelID string `json:"modelId"`
	StepRef
}

type StepCompletedData struct {
	FinishReason string     `json:"finishReason"`
	Usage        *StepUsage `json:"usage,omitempty"`
	StepRef
}

type StepUsage struct {
	InputTokens      int `json:"inputTokens,omitempty"`
	OutputTokens     int `json:"outputTokens,omitempty"`
	CacheReadTokens  int `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
}

// TokenUsage is the session's running usage.
type TokenUsage struct {
	CacheReadTokens  int `json:"cacheReadTokens"`
	CacheWriteTokens int `json:"cacheWriteTokens"`
	InputTokens      int `json:"inputTokens"`
	OutputTokens     int `json:"outputTokens"`
}

// Add returns the sum of two usages.
func (u TokenUsage) Add(s StepUsage) TokenUsage {
	u.InputTokens += s.InputTokens
	u.OutputTokens += s.OutputTokens
	u.CacheReadTokens += s.CacheReadTokens
	u.CacheWriteTokens += s.CacheWriteTokens
	return u
}

type StepFailedData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	StepRef
}

type TurnFailedData struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Sequence int    `json:"sequence"`
	Terminal bool   `json:"terminal"`
	TurnID   string `json:"turnId"`
}

type TurnWaitingData struct {
	On       string      `json:"on"` // "input" or "tasks"
	Sequence int         `json:"sequence"`
	TurnID   string      `json:"turnId"`
	Usage    *TokenUsage `json:"usage,omitempty"`
}

// ToolCallAction is eve's RuntimeToolCallActionRequest (a strict object).
type ToolCallAction struct {
	CallID   string          `json:"callId"`
	Input    json.RawMessage `json:"input"`
	Kind     string          `json:"kind"` // "tool-call"
	ToolName string          `json:"toolName"`
}

type ActionsRequestedData struct {
	Actions []ToolCallAction `json:"actions"`
	StepRef
}

// ToolResultAction is eve's RuntimeToolResultActionResult.
type ToolResultAction struct {
	CallID    string          `json:"callId"`
	ErrorName string          `json:"errorName,omitempty"`
	IsError   bool            `json:"isError,omitempty"`
	Kind      string          `json:"kind"` // "tool-result"
	Output    json.RawMessage `json:"output"`
	ToolName  string          `json:"toolName"`
}

// Action result statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRejected  = "rejected"
)

// ActionError is the stable failure payload of action.result.
type ActionError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Name    string `json:"name,omitempty"`
}

// Error codes of action.result.
const (
	CodeToolInputInvalid  = "TOOL_INPUT_INVALID"
	CodeToolOutputInvalid = "TOOL_OUTPUT_INVALID"
	// CodeToolOutputTooLarge: the output exceeds the tool's MaxOutputBytes.
	CodeToolOutputTooLarge = "TOOL_OUTPUT_TOO_LARGE"
	CodeToolExecution      = "TOOL_EXECUTION_FAILED"
	// CodeToolPanicked: the tool's code panicked (a bug); not retried.
	CodeToolPanicked = "TOOL_PANICKED"
	CodeToolNotFound = "TOOL_NOT_FOUND"
	// CodeConnectionChanged: a connection tool's destination (endpoint or
	// instance key) changed between the call's planning and its execution.
	CodeConnectionChanged = "CONNECTION_CHANGED"
	CodeToolDenied        = "TOOL_EXECUTION_DENIED"
	CodeToolTimeout       = "TOOL_TIMEOUT"
	CodeToolCancelled     = "TOOL_CANCELLED"
	// CodeInputExpired: the call's approval or question reached its
	// deadline unanswered; the tool did not run.
	CodeInputExpired     = "INPUT_EXPIRED"
	CodeDeadlineExceeded = "DEADLINE_EXCEEDED"
	// CodeUnknownTask: a taskId names no task that can take the call
	// (eve's UNKNOWN_TASK).
	CodeUnknownTask = "UNKNOWN_TASK"
	// CodeTooManyTasks: the call would start a task while
	// tools.MaxWorkingTasks work (eve's TOO_MANY_TASKS).
	CodeTooManyTasks = "TOO_MANY_TASKS"
	// CodeTaskDeadlineExceeded: a task's work passed its deadline
	// (tools.Task.Deadline); the work was cancelled.
	CodeTaskDeadlineExceeded = "TASK_DEADLINE_EXCEEDED"
)

type ActionResultData struct {
	Error  *ActionError     `json:"error,omitempty"`
	Result ToolResultAction `json:"result"`
	Status string           `json:"status"`
	StepRef
	// Stub is set when a tool stub settled the call (eve's evals): the
	// real tool did not run.
	Stub *ActionStub `json:"stub,omitempty"`
}

type ContextClearedData struct {
	Sequence  int    `json:"sequence"`
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
}

// CompactionData is the data of compaction.requested and compaction.completed.
type CompactionData struct {
	ModelID          string `json:"modelId"`
	Sequence         int    `json:"sequence"`
	SessionID        string `json:"sessionId"`
	StepIndex        int    `json:"stepIndex"`
	TurnID           string `json:"turnId"`
	UsageInputTokens *int   `json:"usageInputTokens"`
}
