package tools

import (
	"encoding/json"
	"errors"
)

// Subagent makes a tool a subagent's: a call sends its message to a child
// session of the named agent (agent.Agent.Subagents declares them; the
// agent package defines the tool, DefineSubagent). Each call is a
// resumable task of kind "agent": the child's final reply is the task's
// result, and the model continues the same child with its taskId.
type Subagent struct {
	// Agent is the subagent's name (its agent.Agent.Name).
	Agent string
	// Description is the subagent's description, which its first message
	// quotes (eve's subagent prompt).
	Description string
}

// SubagentInputSchema is eve's input of a subagent tool: {message}; as a
// resumable task, the model sees the optional taskId property too.
var SubagentInputSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to send to the agent, with everything it needs to do the work."}},"required":["message"],"additionalProperties":false}`)

// DefineSubagent is the model-facing tool of a subagent: name and
// description are the subagent's, its input eve's {message, taskId?}, and
// each call a resumable task (tools.Task{Resumable: true}).
func DefineSubagent(name, description string) *Tool {
	return AsTask(&Tool{Name: name, Description: description, InputSchema: SubagentInputSchema,
		Subagent: &Subagent{Agent: name, Description: description}}, Task{Resumable: true})
}

func (t *Tool) compileSubagent() []error {
	var errs []error
	if t.Execute != nil {
		errs = append(errs, errors.New("a subagent's tool runs the subagent, not Execute: drop Execute"))
	}
	if t.Task == nil || !t.Task.Resumable {
		errs = append(errs, errors.New("a subagent's calls are resumable tasks: define it with DefineSubagent"))
	}
	if t.Local {
		errs = append(errs, errors.New("a subagent's tool cannot be Local: the child is a session of its own"))
	}
	return errs
}
