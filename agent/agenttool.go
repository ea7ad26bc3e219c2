package agent

import (
	"strings"

	"github.com/eve-temporal/eve/tools"
)

// AgentToolName is the name of eve's built-in agent tool (Agent.AgentTool).
const AgentToolName = "agent"

// AgentToolDescription is eve's description of its built-in agent tool
// (dist/src/tools/framework/agent-contract.js, AGENT_TOOL_DESCRIPTION).
var AgentToolDescription = strings.Join([]string{
	"Delegate a focused subtask to a copy of yourself.",
	"Use it to isolate complex work or split a large task into independent pieces.",
	"Each call starts a task, so several agents can work at once: start every independent one before you wait.",
	"A new child has fresh history and state but reuses your tools and sandbox, so give parallel writers non-overlapping scopes.",
	"In message, state the goal, what to return, and whether it may change files.",
}, " ")

// agentTool is the model-facing built-in: a subagent tool whose child is
// the agent's copy. Its first message to the copy has no description line
// (eve's runtime subagent prompt: `You are the subagent "agent".`).
func agentTool() *tools.Tool {
	t := tools.DefineSubagent(AgentToolName, AgentToolDescription)
	t.Subagent.Description = ""
	return t
}

// copyForAgentTool is the agent AgentTool delegates to: a copy of a named
// "agent" (its task queue's last segment), without the tool and without
// subagents, so it cannot delegate again.
func (a *Agent) copyForAgentTool() *Agent {
	c := *a
	c.Name = AgentToolName
	c.AgentTool = false
	c.Subagents = nil
	c.Description = AgentToolDescription
	return &c
}
