package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
)

// errNoStore is a worker set up without a store.
var errNoStore = temporal.NewNonRetryableApplicationError(
	"this worker has no conversation store: set agent.Host.Store (payloadstore.FromEnv reads EVE_PAYLOAD_STORE) to the store its Temporal client uses",
	work.ErrTypeBadConfig, nil)

// stepMessages returns what the model reads: the stored conversation plus
// Append.
func (a *activitySet) stepMessages(ctx context.Context, in work.ModelStepInput) ([]model.Message, *conversation.Ref, error) {
	if in.Conversation == nil {
		in.Conversation = &conversation.Ref{}
	}
	if a.conversations == nil {
		return nil, nil, errNoStore
	}
	msgs, err := a.conversations.Load(ctx, *in.Conversation)
	if err != nil {
		return nil, nil, storeError("read the conversation", err)
	}
	// Append is stored with the model's answer, in one manifest write.
	return append(msgs, in.Append...), in.Conversation, nil
}

func storeError(what string, err error) error {
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s: %v", what, err), work.ErrTypeStore, err)
}

// AppendConversation stores messages that no model step stored (a turn that
// ended after its tools ran) and returns the conversation.
func (a *activitySet) AppendConversation(ctx context.Context, in work.AppendInput) (conversation.Ref, error) {
	if a.conversations == nil {
		return conversation.Ref{}, errNoStore
	}
	ref, err := a.conversations.Append(ctx, in.SessionID, in.Conversation, in.Messages...)
	if err != nil {
		return conversation.Ref{}, storeError("store the conversation", err)
	}
	return ref, nil
}

// Compact summarizes the conversation with the agent's model and stores a
// new conversation holding only the summary.
func (a *activitySet) Compact(ctx context.Context, in work.CompactInput) (work.CompactOutput, error) {
	if a.conversations == nil {
		return work.CompactOutput{}, errNoStore
	}
	before, err := a.conversations.Append(ctx, in.SessionID, in.Conversation, in.Append...)
	if err != nil {
		return work.CompactOutput{}, storeError("store the conversation", err)
	}
	msgs, err := a.conversations.Load(ctx, before)
	if err != nil {
		return work.CompactOutput{}, storeError("read the conversation", err)
	}
	keep := min(max(in.Keep, 0), len(msgs))
	old, kept := msgs[:len(msgs)-keep], msgs[len(msgs)-keep:]
	if len(old) == 0 {
		return work.CompactOutput{Conversation: before, Before: before}, nil
	}
	summary, usage, err := model.Summarize(ctx, a.Model, fitTokens(old, in.MaxInputTokens))
	if err != nil {
		if model.IsRetryable(err) {
			return work.CompactOutput{}, temporal.NewApplicationErrorWithCause("compaction: "+err.Error(), "ModelRetryable", err)
		}
		return work.CompactOutput{}, temporal.NewNonRetryableApplicationError("compaction: "+err.Error(), work.ErrTypeModel, err)
	}
	next, err := a.conversations.Append(ctx, in.SessionID, conversation.Ref{},
		append([]model.Message{{Role: model.RoleUser, Text: model.SummaryPrefix + summary}}, kept...)...)
	if err != nil {
		return work.CompactOutput{}, storeError("store the summary", err)
	}
	return work.CompactOutput{Conversation: next, Before: before, Usage: usage}, nil
}

// fitTokens drops the oldest messages until the rest fit in max tokens
// (0: no bound), never leaving tool results without the call they answer.
func fitTokens(msgs []model.Message, max int) []model.Message {
	if max <= 0 {
		return msgs
	}
	total := 0
	start := len(msgs)
	for start > 0 {
		n := conversation.EstimateTokens(msgs[start-1 : start])
		if total+n > max && start < len(msgs) {
			break
		}
		total += n
		start--
	}
	for start < len(msgs) && msgs[start].Role == model.RoleTool {
		start++
	}
	if start >= len(msgs) {
		// One message larger than the bound: summarize it alone, cut.
		last := msgs[len(msgs)-1]
		if b := max * conversation.BytesPerToken; len(last.Text) > b {
			last.Text = last.Text[len(last.Text)-b:]
		}
		last.ToolResults = nil
		if last.Role == model.RoleTool {
			last.Role = model.RoleUser
		}
		return []model.Message{last}
	}
	return msgs[start:]
}

// ReviseConversation stores the conversation with its last message (the
// model's answer) replaced: after a person edited a call, the model reads
// the call with the input that ran.
func (a *activitySet) ReviseConversation(ctx context.Context, in work.ReviseInput) (conversation.Ref, error) {
	if a.conversations == nil {
		return conversation.Ref{}, errNoStore
	}
	ref, err := a.conversations.ReplaceLast(ctx, in.SessionID, in.Conversation, in.Message)
	if err != nil {
		return conversation.Ref{}, storeError("revise the conversation", err)
	}
	return ref, nil
}
