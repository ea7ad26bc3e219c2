package activities

import (
	"fmt"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// OutputTooLargeMessage tells the model (or a job, or a person) that a
// tool's output is over its limit, and how to change that.
func OutputTooLargeMessage(tool string, size, limit int) string {
	return fmt.Sprintf("tool %s returned %d bytes of output; the limit is %d (tools.Tool.MaxOutputBytes). Return less (page or summarize) or raise the tool's MaxOutputBytes.",
		tool, size, limit)
}

// CheckOutputSize returns an error naming the tool, the size and the limit
// when output is larger than limit. A limit of 0 or less is not known (a
// plan recorded before limits existed): nothing is checked. Workflow code
// may call it: it is a pure function of its arguments.
func CheckOutputSize(tool string, output []byte, limit int) error {
	if limit <= 0 || len(output) <= limit {
		return nil
	}
	return fmt.Errorf("output is %d bytes; tool %s accepts at most %d (tools.Tool.MaxOutputBytes). Send less (page or summarize), or raise the tool's MaxOutputBytes",
		len(output), tool, limit)
}

// checkOutputSize fails a call whose marshalled output exceeds the tool's
// limit. The failure is an outcome, not an activity error: the turn goes
// on and the model sees why. The output itself is never logged.
func (a *Activities) checkOutputSize(t *tools.Tool, in ExecuteToolInput, out []byte) (ToolOutcome, bool) {
	limit := t.EffectiveMaxOutputBytes()
	if len(out) <= limit {
		return ToolOutcome{}, false
	}
	a.logger().Warn("tool output exceeds its limit", "tool", t.Name, "call", in.CallID, "size", len(out), "limit", limit)
	return FailedOutcome(protocol.CodeToolOutputTooLarge, OutputTooLargeMessage(t.Name, len(out), limit)), true
}
