package signals

import "github.com/eve-temporal/eve/protocol"

// Workflow tools (tools.DefineWorkflow): a call starts the app's workflow
// as a child of the workflow that owns the call (a turn's, or a tools API
// execution's).

// WorkflowToolID is the workflow id of the child a workflow tool's call
// starts: derived from the owning workflow's id and the call id, so a
// retried workflow task or a replay on another worker names the same
// child, and Temporal never starts it twice ("<turn workflow
// id>/tool/<call id>", e.g. "ses_1/turn_2/tool/call_1").
func WorkflowToolID(workflowID, callID string) string {
	return workflowID + "/" + toolActivityPrefix + callID
}

// Memo keys of a workflow tool's child: they link it to its session, turn
// and call (and it carries the search attribute EveSessionId when the
// namespace has eve's search attributes).
const (
	MemoSession = "eveSession"
	MemoTurn    = "eveTurn"
	MemoCall    = "eveCall"
	MemoTool    = "eveTool"
	// MemoAskTag is the tag a subagent's turn puts in its call's question
	// ids (AskID); absent elsewhere.
	MemoAskTag = "eveAskTag"
)

// SignalAnswered (turn → a workflow tool's child) carries the settlement
// of a question the child asked its call's person (SignalAsk, whose
// request id the child chose: AskID, "ask_<call id>_<key>", with the
// MemoAskTag tag in a subagent's turn). Payload Answered.
// Package tools/wfcall sends the question and reads the answer.
const SignalAnswered = "eve.tool.answered"

// Answered is SignalAnswered's payload.
type Answered struct {
	RequestID  string                   `json:"requestId"`
	Resolution protocol.InputResolution `json:"resolution"`
}
