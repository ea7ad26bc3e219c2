package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
)

// Activity names of the conversation store.
const (
	AppendConversationName = "eve.AppendConversation"
	CompactName            = "eve.Compact"
)

// ErrTypeStore is the error type of a payload store failure (retried).
const ErrTypeStore = "StoreError"

// errNoStore is a worker set up without a store.
var errNoStore = temporal.NewNonRetryableApplicationError(
	"this worker has no conversation store: set agent.Agent.Store (payloadstore.FromEnv reads EVE_PAYLOAD_STORE) to the store its Temporal client uses",
	ErrTypeBadConfig, nil)

// stepMessages returns what the model reads: the stored conversation plus
// Append.
func (a *Activities) stepMessages(ctx context.Context, in ModelStepInput) ([]model.Message, *conversation.Ref, error) {
	if in.Conversation == nil {
		in.Conversation = &conversation.Ref{}
	}
	if a.Conversations == nil {
		return nil, nil, errNoStore
	}
	msgs, err := a.Conversations.Load(ctx, *in.Conversation)
	if err != nil {
		return nil, nil, storeError("read the conversation", err)
	}
	// Append is stored with the model's answer, in one manifest write.
	return append(msgs, in.Append...), in.Conversation, nil
}

func storeError(what string, err error) error {
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s: %v", what, err), ErrTypeStore, err)
}

// AppendInput stores messages after a conversation.
type AppendInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Messages     []model.Message  `json:"messages"`
}

// AppendConversation stores messages that no model step stored (a turn that
// ended after its tools ran) and returns the conversation.
func (a *Activities) AppendConversation(ctx context.Context, in AppendInput) (conversation.Ref, error) {
	if a.Conversations == nil {
		return conversation.Ref{}, errNoStore
	}
	ref, err := a.Conversations.Append(ctx, in.SessionID, in.Conversation, in.Messages...)
	if err != nil {
		return conversation.Ref{}, storeError("store the conversation", err)
	}
	return ref, nil
}

// CompactInput asks for a conversation to be replaced by a summary.
type CompactInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Append       []model.Message  `json:"append,omitempty"`
	// Keep is how many of the last messages stay as they are after the
	// summary (the running turn's: its user message, calls and results).
	Keep int `json:"keep,omitempty"`
	// MaxInputTokens bounds what the summarizing model reads: the oldest
	// messages beyond it are left out of the summary's input.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
}

// CompactOutput is the compacted conversation.
type CompactOutput struct {
	Conversation conversation.Ref `json:"conversation"`
	// Before is the size of what was compacted.
	Before conversation.Ref `json:"before"`
	Usage  model.Usage      `json:"usage"`
}

// Compact summarizes the conversation with the agent's model and stores a
// new conversation holding only the summary.
func (a *Activities) Compact(ctx context.Context, in CompactInput) (CompactOutput, error) {
	if a.Conversations == nil {
		return CompactOutput{}, errNoStore
	}
	before, err := a.Conversations.Append(ctx, in.SessionID, in.Conversation, in.Append...)
	if err != nil {
		return CompactOutput{}, storeError("store the conversation", err)
	}
	msgs, err := a.Conversations.Load(ctx, before)
	if err != nil {
		return CompactOutput{}, storeError("read the conversation", err)
	}
	keep := min(max(in.Keep, 0), len(msgs))
	old, kept := msgs[:len(msgs)-keep], msgs[len(msgs)-keep:]
	if len(old) == 0 {
		return CompactOutput{Conversation: before, Before: before}, nil
	}
	summary, usage, err := model.Summarize(ctx, a.Model, fitTokens(old, in.MaxInputTokens))
	if err != nil {
		if model.IsRetryable(err) {
			return CompactOutput{}, temporal.NewApplicationErrorWithCause("compaction: "+err.Error(), "ModelRetryable", err)
		}
		return CompactOutput{}, temporal.NewNonRetryableApplicationError("compaction: "+err.Error(), ErrTypeModel, err)
	}
	next, err := a.Conversations.Append(ctx, in.SessionID, conversation.Ref{},
		append([]model.Message{{Role: model.RoleUser, Text: model.SummaryPrefix + summary}}, kept...)...)
	if err != nil {
		return CompactOutput{}, storeError("store the summary", err)
	}
	return CompactOutput{Conversation: next, Before: before, Usage: usage}, nil
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

// ReviseConversationName replaces the model's answer in the stored
// conversation (ReviseConversation).
const ReviseConversationName = "eve.ReviseConversation"

// ReviseInput replaces the last message of a conversation.
type ReviseInput struct {
	SessionID    string           `json:"sessionId"`
	Conversation conversation.Ref `json:"conversation"`
	Message      model.Message    `json:"message"`
}

// ReviseConversation stores the conversation with its last message (the
// model's answer) replaced: after a person edited a call, the model reads
// the call with the input that ran.
func (a *Activities) ReviseConversation(ctx context.Context, in ReviseInput) (conversation.Ref, error) {
	if a.Conversations == nil {
		return conversation.Ref{}, errNoStore
	}
	ref, err := a.Conversations.ReplaceLast(ctx, in.SessionID, in.Conversation, in.Message)
	if err != nil {
		return conversation.Ref{}, storeError("revise the conversation", err)
	}
	return ref, nil
}
