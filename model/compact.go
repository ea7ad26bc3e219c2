package model

import (
	"context"
	"fmt"
	"strings"
)

// Compactor is a model that summarizes a conversation its own way. The
// scripted model does, deterministically; other models are asked with
// CompactionPrompt through Step.
type Compactor interface {
	Compact(ctx context.Context, msgs []Message) (summary string, usage Usage, err error)
}

// CompactionPrompt is the instruction a model gets to summarize a conversation.
const CompactionPrompt = "Summarize the conversation so far for your own later use: what the user wants, " +
	"decisions made, facts learned from tools (with the values that matter), work completed, and work that remains. " +
	"Be complete but brief; the summary replaces the conversation."

// SummaryPrefix starts the message that replaces a compacted conversation.
const SummaryPrefix = "[Summary of the earlier conversation]\n"

// Summarize asks m for a summary of msgs: through Compact when m is a
// Compactor, else as one step with CompactionPrompt and no tools.
func Summarize(ctx context.Context, m Model, msgs []Message) (string, Usage, error) {
	if c, ok := m.(Compactor); ok {
		return c.Compact(ctx, msgs)
	}
	req := Request{System: CompactionPrompt, Messages: append(append([]Message(nil), msgs...), Message{Role: RoleUser, Text: CompactionPrompt})}
	resp, err := m.Step(ctx, req, nil)
	if err != nil {
		return "", Usage{}, err
	}
	if strings.TrimSpace(resp.Text) == "" {
		return "", resp.Usage, fmt.Errorf("model %s answered the compaction request without text", m.ID())
	}
	return resp.Text, resp.Usage, nil
}
