package catalog

import "fmt"

// APIError is an error answer of the tools API (docs/tools-api.md): the body
// {ok:false, error, code, ...} with its HTTP status. The server
// (internal/toolsapi) writes it and toolsclient reads it, from this one
// definition.
type APIError struct {
	// OK is always false.
	OK     bool   `json:"ok"`
	Status int    `json:"-"`
	Code   string `json:"code"`
	// Message is the body's "error".
	Message string `json:"error"`
	// Tool and Violations are set for input that breaks the tool's schema.
	Tool       string      `json:"tool,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// ExecutionID names the execution concerned, when there is one.
	ExecutionID string `json:"executionId,omitempty"`
	// ExecStatus is the execution's status, when a run stopped waiting for
	// it (code run_timeout).
	ExecStatus ExecutionStatus `json:"status,omitempty"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("eve tools API: %d %s: %s", e.Status, e.Code, e.Message)
}

// As lets ExecuteAnthropicToolCalls and ExecuteOpenAIToolCalls, run over an
// Executor that answers APIErrors (the tools API in process, or
// toolsclient's Executor), report the code and message to the model.
func (e *APIError) As(target any) bool {
	if p, ok := target.(**ExecutionError); ok {
		*p = &ExecutionError{Code: e.Code, Message: e.Message}
		return true
	}
	return false
}
