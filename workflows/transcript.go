package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
)

// transcript is the conversation as a turn keeps it: stored (ref), and
// pending holds the messages no model step has stored yet.
type transcript struct {
	ref     conversation.Ref
	pending []model.Message
	// count is the number of messages this turn added.
	count int
	// noCompact: compacting again in this turn won't help (it failed, or
	// the turn alone fills the window).
	noCompact bool
}

func newTranscript(in turnInput) transcript {
	var c transcript
	if in.Conversation != nil {
		c.ref = *in.Conversation
	}
	return c
}

// add appends a message of this turn.
func (c *transcript) add(m model.Message) {
	c.count++
	c.pending = append(c.pending, m)
}

// readBy sets what a model step reads: the stored conversation and the
// messages it stores first.
func (c *transcript) readBy(step *work.ModelStepInput) {
	ref := c.ref
	step.Conversation, step.Append = &ref, c.pending
}

// answered records the model's answer: the step stored what it read and
// the answer.
func (c *transcript) answered(stored *conversation.Ref, answer model.Message) {
	if stored != nil {
		c.ref = *stored
	}
	c.pending = nil
	c.count++
}

// tokens estimates what the next model step reads.
func (c *transcript) tokens() int {
	return c.ref.Tokens() + conversation.EstimateTokens(c.pending)
}

// storePending stores the messages no model step stored (the tool results
// of a turn that ended before its next step), so the next turn sees them.
func (c *transcript) storePending(ctx workflow.Context, sessionID, turnID string) {
	if len(c.pending) == 0 {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
	})
	var ref conversation.Ref
	in := work.AppendInput{SessionID: sessionID, Conversation: c.ref, Messages: c.pending}
	if err := workflow.ExecuteLocalActivity(lctx, work.AppendConversationName, in).Get(ctx, &ref); err != nil {
		workflow.GetLogger(ctx).Error("the turn's last messages could not be stored; the conversation goes on without them", "turn", turnID, "error", err)
		return
	}
	c.ref, c.pending = ref, nil
}
