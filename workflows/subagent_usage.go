package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Usage roll-up (changeSubagentUsage; docs/subagents.md, docs/limits.md),
// as eve counts a child's usage against its parent ("A child's usage,
// including what the child's own subagents spent, counts against the
// parent's quota. An agent task's usage counts with each reply it sends").
//
//   - A child session adds every turn's usage to what it has not reported
//     to a parent yet (sessionState.Unreported): the turns a parent's call
//     ran, and any other (a message sent to it directly, a turn whose
//     parent stopped waiting).
//   - Its reply to a parent's call (signals.AgentReply.Usage) carries all
//     of it; once the signal is delivered the count starts again. A reply
//     the parent is not there to hear (its turn ended) keeps it for the
//     next.
//   - The parent turn adds a reply's usage to its own as the reply
//     arrives, whether or not the call still waits for it: its session
//     limits (checked before its next model call), turn.waiting, its
//     output to the session, and so session.waiting and the session's
//     window, count what its subagents spent. A child's own children's
//     usage is in the child turn's, so it reaches the root.

// noteTurnUsage adds a finished turn's usage to what a child session owes
// its parent. A session no parent ever called keeps nothing.
func (s *session) noteTurnUsage(msg queuedMessage, u protocol.TokenUsage) {
	if msg.ReplyTo == nil && s.st.Unreported == nil {
		return
	}
	var sum protocol.TokenUsage
	if s.st.Unreported != nil {
		sum = *s.st.Unreported
	}
	sum = addUsage(sum, u)
	s.st.Unreported = &sum
}

// replyUsage is the usage a reply to a parent carries (nil: none to report,
// or a history from before the change).
func (s *session) replyUsage(ctx workflow.Context) *protocol.TokenUsage {
	if s.st.Unreported == nil || !s.changeOn(ctx, changeSubagentUsage) {
		return nil
	}
	u := *s.st.Unreported
	return &u
}

// usageReported forgets what a delivered reply carried.
func (s *session) usageReported(r signals.AgentReply) {
	if r.Usage != nil {
		s.st.Unreported = nil
	}
}

// countAgentUsage adds a child's reported usage to the turn's.
func (t *turn) countAgentUsage(ctx workflow.Context, r signals.AgentReply) {
	if r.Usage == nil || !t.changeOn(ctx, changeSubagentUsage) {
		return
	}
	t.usage = addUsage(t.usage, *r.Usage)
}

// addUsage is the sum of two usages.
func addUsage(a, b protocol.TokenUsage) protocol.TokenUsage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	return a
}
