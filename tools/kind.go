package tools

// Kind is what a tool is: who produces its result, and when. It is closed:
// every kind has a row in kinds, and adding one means adding its row here
// and its runner in the workflow (docs/architecture.md, "Tool kinds").
type Kind string

const (
	// KindAuthored: the tool's Execute runs in an activity.
	KindAuthored Kind = "authored"
	// KindClient: a person answers it in the app (DefineClient,
	// AskQuestion); the answer is its result.
	KindClient Kind = "client"
	// KindDelegated: an external job completes it later, by completion URL
	// or task token (DefineDelegated).
	KindDelegated Kind = "delegated"
	// KindWorkflow: a Temporal workflow of the app's, started as a child
	// workflow; its result is the call's (DefineWorkflow).
	KindWorkflow Kind = "workflow"
	// KindNexus: an operation behind a Nexus endpoint; its result is the
	// call's (DefineNexus).
	KindNexus Kind = "nexus"
	// KindAgent: a subagent, a child session of its own; its final reply
	// is the call's result (DefineSubagent, agent.Agent.Subagents).
	KindAgent Kind = "agent"
)

// KindInfo is what a kind implies, for every place that must know: the
// gate, the workflow's runners, the catalog and the MCP server.
type KindInfo struct {
	// AsksPerson: its result is a person's answer to an input request.
	AsksPerson bool
	// Async: its result arrives later than the call, from outside eve; the
	// catalog marks it Annotations.Async, and MCP lists it only to clients
	// that can wait (includeAsync, tasks).
	Async bool
	// OutsideSession: the tools API and MCP can run it without a session
	// (nobody can be asked there).
	OutsideSession bool
	// NeedsDeadline: it waits on something outside eve, so a deadline
	// bounds the wait.
	NeedsDeadline bool
}

var kinds = map[Kind]KindInfo{
	KindAuthored:  {OutsideSession: true},
	KindClient:    {AsksPerson: true},
	KindDelegated: {Async: true, OutsideSession: true, NeedsDeadline: true},
	KindWorkflow:  {Async: true, OutsideSession: true, NeedsDeadline: true},
	KindNexus:     {Async: true, OutsideSession: true, NeedsDeadline: true},
	KindAgent:     {Async: true},
}

// Info is the kind's row of the table (the zero KindInfo for an unknown
// kind, such as a call to no tool).
func (k Kind) Info() KindInfo { return kinds[k] }

// Kind is the tool's kind, from how it was defined.
func (t *Tool) Kind() Kind {
	switch {
	case t.Client != nil:
		return KindClient
	case t.Delegated != nil:
		return KindDelegated
	case t.Workflow != nil:
		return KindWorkflow
	case t.Nexus != nil:
		return KindNexus
	case t.Subagent != nil:
		return KindAgent
	}
	return KindAuthored
}
