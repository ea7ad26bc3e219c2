package signals

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Delegation from code (tools.Context.Agent): a tool's call opens sessions
// with its agent's subagents and sends them messages through the session
// workflow's send Update (UpdateSend, Wait), started with the Update
// (Update-with-Start, conflict policy USE_EXISTING) on the subagent's task
// queue.

// CodeAgentSessionID is the id of the n'th session (from 1) the call
// callKey (tools.Context.IdempotencyKey: session, turn and call) opened with
// the subagent name: a retried attempt that opens its sessions in the same
// order names the same children, so Temporal never starts one twice. An
// ordinary session id ("ses_sub_…").
func CodeAgentSessionID(parentSessionID, callKey, name string, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00code\x00%s\x00%s\x00%d", parentSessionID, callKey, name, n)))
	return "ses_sub_" + hex.EncodeToString(sum[:12])
}

// CodeAgentUpdateID is the send Update's id (and, "dlv_"-prefixed, the
// delivery's) of the m'th message (from 1) to a code-opened child session:
// a retried attempt's Update joins the first and answers its result.
func CodeAgentUpdateID(childSessionID string, m int) string {
	return fmt.Sprintf("agentcall_%s_%d", childSessionID, m)
}

// SubagentPrompt is eve's first message to a subagent
// (dist/src/subagents/invocation.js, formatSubagentPrompt): who it is,
// what it is for, and the caller's message.
func SubagentPrompt(name, description, message string) string {
	lines := []string{fmt.Sprintf(`You are the subagent "%s".`, name)}
	if strings.TrimSpace(description) != "" {
		lines = append(lines, "Description: "+description)
	}
	lines = append(lines, "", "The caller delegated the following task to you. Complete it and return the result directly. The caller may send follow-up messages after you answer.", "", "Caller message:", message)
	return strings.Join(lines, "\n")
}

// SignalAgentOpened (a call's activity → its turn) announces a session the
// call's code opened with a subagent; payload protocol.AgentStartedData.
// The turn records it as agent.started, once per child session.
const SignalAgentOpened = "eve.agent.opened"
