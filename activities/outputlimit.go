package activities

import (
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// checkOutputSize fails a call whose marshalled output exceeds the tool's
// limit. The failure is an outcome, not an activity error: the turn goes
// on and the model sees why. The output itself is never logged.
func (a *activitySet) checkOutputSize(t *tools.Tool, in work.ExecuteToolInput, out []byte) (work.ToolOutcome, bool) {
	limit := t.EffectiveMaxOutputBytes()
	if len(out) <= limit {
		return work.ToolOutcome{}, false
	}
	a.logger().Warn("tool output exceeds its limit", "tool", t.Name, "call", in.CallID, "size", len(out), "limit", limit)
	return work.FailedOutcome(protocol.CodeToolOutputTooLarge, work.OutputTooLargeMessage(t.Name, len(out), limit)), true
}
