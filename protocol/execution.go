package protocol

import "encoding/json"

// The state of a tools API execution (docs/tools-api.md): one tool call
// run outside a session. The execution workflow records it and the catalog
// (catalog.ExecutionResult) serves it, so it lives here, below both.

// ExecutionStatus is the state of an execution.
type ExecutionStatus string

// Execution statuses. Queued and running are not terminal.
const (
	ExecutionQueued    ExecutionStatus = "queued"
	ExecutionRunning   ExecutionStatus = "running"
	ExecutionSucceeded ExecutionStatus = "succeeded"
	ExecutionFailed    ExecutionStatus = "failed"
	ExecutionCanceled  ExecutionStatus = "canceled"
	ExecutionTimedOut  ExecutionStatus = "timed_out"
)

// Terminal reports whether the status is final.
func (s ExecutionStatus) Terminal() bool {
	switch s {
	case ExecutionSucceeded, ExecutionFailed, ExecutionCanceled, ExecutionTimedOut:
		return true
	}
	return false
}

// ExecutionResult is the state (and, when terminal, the outcome) of one execution.
type ExecutionResult struct {
	// ID identifies the execution (GET /v1/executions/{id}).
	ID     string          `json:"id"`
	Tool   string          `json:"tool"`
	Status ExecutionStatus `json:"status"`
	// Output is the tool's JSON output when Status is succeeded.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is set when Status is failed, canceled or timed_out.
	Error *ExecutionError `json:"error,omitempty"`
}

// ExecutionError is why an execution did not succeed.
type ExecutionError struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

func (e *ExecutionError) Error() string {
	if e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return e.Message
}

// Error codes of execution results, lower case as the tools API writes
// them (the stream's action codes above are upper case).
const (
	ExecCodeUnknownTool     = "unknown_tool"
	ExecCodeInvalidInput    = "invalid_input"
	ExecCodeExecutionFailed = "execution_failed"
	ExecCodeTimeout         = "timeout"
	ExecCodeCanceled        = "canceled"
)

// Progress is a running tool's report of how far it got
// (tools.Context.ReportProgress): recorded as its activity's heartbeat, it
// is relayed to callers that asked for progress, such as MCP clients that
// send a progressToken (notifications/progress). Total, when known, is
// what Progress counts up to.
type Progress struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}
