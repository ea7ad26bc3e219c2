package tools

import (
	"errors"
)

// Answer is a person's answer to Context.Ask. Outcome is
// protocol.OutcomeAnswered (OptionID and/or Text set), or why nobody
// answered: protocol.OutcomeCancelled (the turn was cancelled or a
// steering message withdrew it), protocol.OutcomeExpired (its deadline).
type Answer struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
	Text     string `json:"text,omitempty"`
}

// ErrCannotAsk: this call has nobody to ask. Only a turn's call running in
// a regular activity can ask (not a local activity, whose workflow task is
// held while it runs, and not a tools-API execution, which has no
// session person).
var ErrCannotAsk = errors.New("this call cannot ask a person: only a turn's call that runs in a regular activity (Tool.Local false) can")

// Asker asks the session's person and waits for the answer; the runtime
// sets it (SetAsker).
type Asker func(ctx *Context, q InputRequest) (Answer, error)

// Ask asks the session's person a question in the middle of the call (a
// remote MCP server's elicitation, say) and waits for the answer: the
// turn records input.requested as for a client tool, and the person
// answers as they answer any question. The wait lasts at most the tool's
// Timeout (and HeartbeatTimeout is kept alive meanwhile). Asking the same
// questions in the same order on a retried attempt finds the answers
// given before.
func (c *Context) Ask(q InputRequest) (Answer, error) {
	if c.ask == nil {
		return Answer{}, ErrCannotAsk
	}
	q, err := q.Normalize()
	if err != nil {
		return Answer{}, err
	}
	return c.ask(c, q)
}

// SetAsker sets how Ask reaches a person: the runtime sets it for a
// turn's calls; a tool's test may set its own.
func (c *Context) SetAsker(fn Asker) { c.ask = fn }
