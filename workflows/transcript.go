package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
)

// transcript is the conversation as a turn keeps it. byRef: it is stored
// (ref) and pending holds the messages no model step has stored yet. Turns
// recorded before conversations were stored carry it inline: msgs (history
// first) and added (this turn's).
type transcript struct {
	byRef   bool
	ref     conversation.Ref
	pending []model.Message
	msgs    []model.Message
	added   []model.Message
	// count is the number of messages this turn added.
	count int
	// noCompact: compacting again in this turn won't help (it failed, or
	// the turn alone fills the window).
	noCompact bool
}

func newTranscript(byRef bool, in TurnInput) transcript {
	if !byRef {
		return transcript{msgs: append([]model.Message(nil), in.History...)}
	}
	c := transcript{byRef: true}
	if in.Conversation != nil {
		c.ref = *in.Conversation
	}
	// A session that kept its conversation inline hands it over once.
	c.pending = append([]model.Message(nil), in.History...)
	return c
}

// add appends a message of this turn.
func (c *transcript) add(m model.Message) {
	c.count++
	if c.byRef {
		c.pending = append(c.pending, m)
		return
	}
	c.msgs = append(c.msgs, m)
	c.added = append(c.added, m)
}

// readBy sets what a model step reads: the stored conversation and the
// messages it stores first, or the inline messages.
func (c *transcript) readBy(step *activities.ModelStepInput) {
	if !c.byRef {
		step.Messages = c.msgs
		return
	}
	ref := c.ref
	step.Conversation, step.Append = &ref, c.pending
}

// answered records the model's answer: a step that read a stored
// conversation stored what it read and the answer; an inline one appends it.
func (c *transcript) answered(stored *conversation.Ref, answer model.Message) {
	if !c.byRef {
		c.add(answer)
		return
	}
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
	in := activities.AppendInput{SessionID: sessionID, Conversation: c.ref, Messages: c.pending}
	if err := workflow.ExecuteLocalActivity(lctx, activities.AppendConversationName, in).Get(ctx, &ref); err != nil {
		workflow.GetLogger(ctx).Error("the turn's last messages could not be stored; the conversation goes on without them", "turn", turnID, "error", err)
		return
	}
	c.ref, c.pending = ref, nil
}
