package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Delegation from code (eve's ctx.agent(name).send(message,
// {outputSchema}); docs/subagents.md, "Delegate from code"): a tool's
// Execute opens a session with a subagent of its agent, sends it messages
// and reads each turn's result. The model does not see the session; it
// sees what the tool returns.
//
//	review, err := ctx.Agent("reviewer").Send("Review these notes:\n\n"+notes,
//		tools.SendOptions{OutputSchema: reviewSchema})
//	if err != nil || review.Status == tools.AgentFailed { … }
//	var r struct{ Approved bool `json:"approved"` }
//	_ = json.Unmarshal(review.Data, &r)

// AgentResult is what one message's turn gave back (eve's result(): data,
// message, status, error).
type AgentResult struct {
	// Data is the structured result, when the message sent OutputSchema.
	Data json.RawMessage `json:"data,omitempty"`
	// Message is the agent's final reply text, when it did not.
	Message string `json:"message,omitempty"`
	// Status is AgentWaiting (the session waits for its next message),
	// AgentCompleted (the session ended with the turn) or AgentFailed. A
	// cancelled turn is AgentWaiting with neither Data nor Message.
	Status string `json:"status"`
	// Error says why the turn failed (Status AgentFailed only).
	Error *AgentError `json:"error,omitempty"`
	// SessionID is the child session's id: every session route takes it
	// (its stream, as the calling session's initiator).
	SessionID string `json:"sessionId"`
}

// AgentError is why a delegated turn failed.
type AgentError struct {
	Message string `json:"message"`
}

// AgentResult statuses (eve's).
const (
	AgentWaiting   = "waiting"
	AgentCompleted = "completed"
	AgentFailed    = "failed"
)

// SendOptions are a message's options (eve's send options).
type SendOptions struct {
	// OutputSchema asks the turn for a structured result matching this
	// JSON Schema (an object schema): AgentResult.Data. The agent answers
	// with eve's eve__reply tool; a turn that cannot fails with
	// OUTPUT_SCHEMA_NOT_FULFILLED.
	OutputSchema json.RawMessage
}

// AgentSender is how the runtime delivers a delegated message: to the
// session'th session this call opened with the named agent (counted from
// 1, in the order the call opens them), its message'th message (from 1).
// The runtime sets it for a turn's calls (SetAgentSender); a tool's test
// may set its own.
type AgentSender func(ctx *Context, name string, session, message int, text string, opts SendOptions) (AgentResult, error)

// ErrCannotDelegate: this call has no agent to delegate to: only a turn's
// call running in a regular activity (not Local) can, on a worker with a
// Temporal client.
var ErrCannotDelegate = errors.New("this call cannot delegate to an agent: only a turn's call that runs in a regular activity (Tool.Local false) can")

// AgentSession is a session with a subagent that a call opened
// (Context.Agent). It opens on its first Send; each Send is a message
// that runs as the session's next turn, with the conversation so far.
type AgentSession struct {
	ctx  *Context
	name string
	n    int // which of the call's sessions
	sent int
}

// Agent returns a new session with the subagent name of the calling agent
// (agent.Agent.Subagents, CodeOnly ones included). Every call returns a
// new session, which only this call addresses. Exactly once: the child's
// session id derives from the calling session, the call and the order in
// which the call opens its sessions, and each message's delivery from its
// place in its session, so a retried attempt that opens the same sessions
// and sends the same messages in the same order starts no second child
// and sends nothing twice: it reads the results given before.
func (c *Context) Agent(name string) *AgentSession {
	if c.agents == nil { // a Context not made by NewContext
		c.agents = &agentBox{}
	}
	c.agents.opened++
	return &AgentSession{ctx: c, name: name, n: c.agents.opened}
}

// agentBox counts the sessions a call opened (shared by its Context's copies).
type agentBox struct{ opened int }

// Name is the agent the session is with.
func (s *AgentSession) Name() string { return s.name }

// Send sends a message and waits for the end of the turn it runs as
// (bounded by the tool's Timeout; the wait heartbeats the call). An
// unknown agent name or a child that cannot be reached is an error; a
// turn that failed is a result with Status AgentFailed.
func (s *AgentSession) Send(message string, opts ...SendOptions) (AgentResult, error) {
	if strings.TrimSpace(message) == "" {
		return AgentResult{}, errors.New("send to agent " + s.name + ": the message is empty")
	}
	var o SendOptions
	if len(opts) > 1 {
		return AgentResult{}, fmt.Errorf("send to agent %s: pass at most one SendOptions", s.name)
	}
	if len(opts) == 1 {
		o = opts[0]
	}
	if s.ctx.sendAgent == nil {
		return AgentResult{}, ErrCannotDelegate
	}
	s.sent++
	return s.ctx.sendAgent(s.ctx, s.name, s.n, s.sent, message, o)
}

// SetAgentSender sets how Context.Agent's sessions reach their agents:
// the runtime sets it for a turn's calls; a tool's test may set its own.
func (c *Context) SetAgentSender(fn AgentSender) { c.sendAgent = fn }
