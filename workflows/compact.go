package workflows

import (
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"go.temporal.io/sdk/workflow"
)

// full: the conversation reached the agent's share of the model's context
// window (Config.CompactAt; negative turns it off), and compacting may help.
func (c *transcript) full(cfg Config) bool {
	if c.noCompact || cfg.CompactAt <= 0 || cfg.ContextWindow <= 0 {
		return false
	}
	return float64(c.tokens()) >= cfg.CompactAt*float64(cfg.ContextWindow)
}

// compact replaces the conversation with the model's summary of it, between
// two steps, as eve does. A failed compaction leaves the conversation as
// it is: the step goes on with it (and fails if the model cannot take it).
func (t *turn) compact(ctx workflow.Context, stepIdx int) {
	before := t.conv.tokens()
	data := protocol.CompactionData{ModelID: t.cfg.ModelID, Sequence: t.in.Sequence, SessionID: t.in.SessionID,
		StepIndex: stepIdx, TurnID: t.in.TurnID, UsageInputTokens: &before}
	t.log.emit(ctx, protocol.CompactionRequested, data)
	// The running turn stays as it is: its user message, calls and results.
	out, err := runCompaction(ctx, t.cfg, work.CompactInput{SessionID: t.in.SessionID, Conversation: t.conv.ref, Append: t.conv.pending, Keep: t.conv.count})
	if err != nil {
		workflow.GetLogger(ctx).Warn("compaction failed; the turn goes on with the whole conversation", "turn", t.in.TurnID, "error", err)
		t.conv.noCompact = true // not again in this turn
		return
	}
	t.conv.ref, t.conv.pending = out.Conversation, nil
	t.usage = t.usage.Add(protocol.StepUsage(out.Usage))
	after := t.conv.tokens()
	data.UsageInputTokens = &after
	t.log.emit(ctx, protocol.CompactionCompleted, data)
	if t.conv.full(t.cfg) {
		// The turn alone fills the window: compacting again won't help.
		t.conv.noCompact = true
	}
}

// runCompaction runs the Compact activity the way model steps run.
func runCompaction(ctx workflow.Context, cfg Config, in work.CompactInput) (work.CompactOutput, error) {
	// The summarizing model reads at most 80% of its window; the oldest
	// messages beyond it are left out.
	in.MaxInputTokens = cfg.ContextWindow * 8 / 10
	var out work.CompactOutput
	err := modelActivity(ctx, cfg, work.CompactName, in).Get(ctx, &out)
	return out, err
}
