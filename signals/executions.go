package signals

// Tool executions outside a session (the tools API: execute, run, and MCP
// tools/call) run as one workflow each. Its workflow ID is the execution id.
const (
	// ExecutionWorkflow is the workflow type of one tool execution. Input
	// workflows.ExecutionInput, result workflows.ExecutionOutput.
	ExecutionWorkflow = "eve.ToolExecution"
	// QueryExecution reads an execution's current state. Result
	// workflows.ExecutionOutput (Status queued, running, or terminal).
	QueryExecution = "eve.execution.state"
)

// A delegated tool's execution also answers UpdateSettleAction and
// QueryAction (see above), so completion URLs settle executions exactly as
// they settle the delegated calls of a turn.
