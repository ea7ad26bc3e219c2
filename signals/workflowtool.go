package signals

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
)
