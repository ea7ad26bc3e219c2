package signals

import (
	"encoding/json"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// Tool executions outside a session (the tools API: execute, run, and MCP
// tools/call) run as one workflow each. Its workflow ID is the execution id.
const (
	// ExecutionWorkflow is the workflow type of one tool execution. Input
	// ExecutionInput, result ExecutionOutput.
	ExecutionWorkflow = "eve.ToolExecution"
	// QueryExecution reads an execution's current state. Result
	// ExecutionOutput (Status queued, running, or terminal).
	QueryExecution = "eve.execution.state"
	// UpdateExecutionApproval answers the approval an execution waits for
	// (ExecutionInput.AskApproval). Input ExecutionApprovalAnswer; it is
	// refused unless the execution waits for that request and the answer
	// comes from the principal the execution runs for.
	UpdateExecutionApproval = "eve.execution.approve"
	// UpdateExecutionClientInput delivers an MCP client's answers to what a
	// task's round asked (protocol.ClientRound.Task). Input
	// ExecutionClientAnswer; refused unless every answer is to a request
	// still pending, from the principal the execution runs for. Once all
	// are answered, the next round runs.
	UpdateExecutionClientInput = "eve.execution.client-input"
)

// MaxClientRounds bounds the rounds one task's tool may ask its client
// for; the round after them fails, saying so. It is fixed: a tool that
// needs more asks for several inputs in one round.
const MaxClientRounds = 20

// ExecutionClientAnswer answers some or all of a task's pending client
// requests, by request id.
type ExecutionClientAnswer struct {
	Responses map[string]json.RawMessage `json:"responses"`
	By        *auth.Principal            `json:"by"`
}

// ExecutionApprovalRequestID names an execution's one approval request.
const ExecutionApprovalRequestID = "approval"

// A delegated tool's execution also answers UpdateSettleAction and
// QueryAction (see above), so completion URLs settle executions exactly as
// they settle the delegated calls of a turn.

// ExecutionIDPrefix starts every execution id.
const ExecutionIDPrefix = "exec_"

// ExecutionCallID is the call id of an execution's one tool call: the
// activity is "tool/execute", and the tool's Context.IdempotencyKey is
// "<execution id>/execute" on every attempt.
const ExecutionCallID = "execute"

// Error codes of executions (beside protocol's ExecCode codes: unknown_tool,
// invalid_input, execution_failed, timeout and canceled).
const (
	CodeInvalidOutput    = "invalid_output"
	CodeDeadlineExceeded = "deadline_exceeded"
	CodeDenied           = "denied"
	CodeApprovalRequired = "approval_required"
	CodeNotExecutable    = "not_executable"
)

// ExecutionInput starts one tool execution (the tools API's execute, run
// and executeToolCalls, and MCP tools/call). The starter, which has the
// agent's tool registry, decides the plan; the workflow only follows it, so
// worker configuration never leaks into workflow decisions. The workflow's
// own input type, workflows.ExecutionInput, has these fields with the plan
// decoded (activities.CallPlan, which this contract package cannot name).
type ExecutionInput struct {
	// ExecutionID is the workflow ID, derived by the starter from the user,
	// the tool and the idempotency key.
	ExecutionID string `json:"executionId"`
	// Tool is the canonical catalog name ("demo.get_weather"); the plan's
	// call names the agent's own tool ("get_weather").
	Tool           string `json:"tool"`
	UserID         string `json:"userId"`
	ConnectionID   string `json:"connectionId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// InputHash fingerprints the input, so a reused key with other input is
	// told apart from a retry.
	InputHash string `json:"inputHash,omitempty"`
	// Caller is who the tool runs for: its Context.Session.Auth.Current and
	// Initiator. The starter fills it from UserID and ConnectionID.
	Caller *auth.Principal `json:"caller,omitempty"`
	// Plan is the encoded activities.CallPlan: kind (authored or
	// delegated), activity timeouts and retries, a delegated tool's
	// deadline and output schema, and the approval policy kind.
	Plan json.RawMessage `json:"plan"`
	// SkipApproval runs gated tools without asking (the starter decided the
	// caller may). Otherwise always/once policies refuse the execution and
	// custom policies are evaluated: skip or approve runs, deny and ask
	// refuse (there is nobody to ask outside a session).
	SkipApproval bool `json:"skipApproval,omitempty"`
	// AskApproval lets a call that needs a person's approval wait for it
	// (UpdateExecutionApproval) instead of being refused: the starter can
	// put the question to its caller (MCP tasks, as input_required).
	AskApproval bool `json:"askApproval,omitempty"`
	// Client is the round of the MCP client that called, for tools that
	// ask it for input (tools.Tool.ClientInput); nil otherwise.
	Client *protocol.ClientRound `json:"client,omitempty"`
}

// ExecutionApproval is the approval an execution waits for.
type ExecutionApproval struct {
	RequestID string          `json:"requestId"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Reason is the approval policy's, if it gave one.
	Reason string `json:"reason,omitempty"`
}

// ExecutionApprovalAnswer answers an ExecutionApproval.
type ExecutionApprovalAnswer struct {
	RequestID string          `json:"requestId"`
	Approved  bool            `json:"approved"`
	Reason    string          `json:"reason,omitempty"`
	By        *auth.Principal `json:"by"`
}

// ExecutionOutput is an execution's state: its result once Status is
// terminal. The workflow returns it (also for failures, timeouts and
// cancellation: the status says how it ended) and answers it to
// QueryExecution while running.
type ExecutionOutput struct {
	protocol.ExecutionResult
	UserID    string `json:"userId,omitempty"`
	InputHash string `json:"inputHash,omitempty"`
	// ActionID names a delegated tool's action (its completion id).
	ActionID string `json:"actionId,omitempty"`
	// Approval is set while the execution waits for a person's approval.
	Approval *ExecutionApproval `json:"approval,omitempty"`
	// ClientInput is set while a task waits for its MCP client: the
	// requests not yet answered.
	ClientInput map[string]protocol.ClientRequest `json:"clientInput,omitempty"`
	StartedAt   time.Time                         `json:"startedAt"`
	FinishedAt  *time.Time                        `json:"finishedAt,omitempty"`
}
