package protocol

// DeniedResult is a denied call's result (action.result's result.output,
// and what the model reads), in eve's shape:
//
//	{"approval": {"requestId": "apr_call_1", "status": "denied"},
//	 "code": "TOOL_EXECUTION_DENIED", "message": "...", "tool": {"result": "not_run"}}
//
// Approval is there when a person was asked (status "denied", or "ignored"
// when a new message withdrew the prompt); a policy's denial asked nobody.
// Sessions whose turns started before 0.5.0's change "eve-denied-result"
// keep reading {"error", "code", "reason"}.
type DeniedResult struct {
	Approval *DeniedApproval `json:"approval,omitempty"`
	Code     string          `json:"code"`
	Message  string          `json:"message"`
	Tool     DeniedTool      `json:"tool"`
}

// DeniedApproval is the request a denied call's person was asked.
type DeniedApproval struct {
	RequestID string `json:"requestId"`
	Status    string `json:"status"`
}

// DeniedTool says what became of the tool: ToolResultNotRun.
type DeniedTool struct {
	Result string `json:"result"`
}

// A DeniedApproval's status, and a DeniedTool's result.
const (
	DeniedStatusDenied  = "denied"
	DeniedStatusIgnored = "ignored"
	ToolResultNotRun    = "not_run"
)
