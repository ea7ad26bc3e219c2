package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// eve's own metrics, recorded through the SDK's workflow metrics handler so
// they are not repeated on replay. They reach Prometheus with the SDK's.
const (
	metricTurns           = "eve_turns"      // counter, tag status
	metricToolCalls       = "eve_tool_calls" // counter, tags tool, outcome
	metricInputsOpened    = "eve_input_requests_opened"
	metricInputsResolved  = "eve_input_requests_resolved" // counter, tags kind, outcome
	metricApprovalWait    = "eve_approval_wait"           // timer
	metricDelegatedSettle = "eve_delegated_actions"       // counter, tags tool, outcome
)

func countTurn(ctx workflow.Context, status string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"status": status}).Counter(metricTurns).Inc(1)
}

func countToolCall(ctx workflow.Context, tool, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": tool, "outcome": outcome}).Counter(metricToolCalls).Inc(1)
}

func countInputsOpened(ctx workflow.Context, kind string, n int) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": kind}).Counter(metricInputsOpened).Inc(int64(n))
}

func countInputResolved(ctx workflow.Context, kind, outcome string, waited time.Duration) {
	h := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": kind, "outcome": outcome})
	h.Counter(metricInputsResolved).Inc(1)
	if kind == "tool-approval" {
		h.Timer(metricApprovalWait).Record(waited)
	}
}

func countDelegatedAction(ctx workflow.Context, tool, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": tool, "outcome": outcome}).Counter(metricDelegatedSettle).Inc(1)
}
