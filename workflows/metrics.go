package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/model"
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

// The OpenTelemetry GenAI metrics, beside eve's own (docs/observability.md).
// The SDK's handler has no histogram of plain numbers, so token usage is a
// counter (tag gen_ai.token.type), not the conventions' histogram.
const (
	metricGenAITokens      = "gen_ai.client.token.usage"        // counter, tags gen_ai.token.type, model
	metricGenAIDuration    = "gen_ai.client.operation.duration" // timer (seconds)
	metricGenAIToolElapsed = "gen_ai.execute_tool.duration"     // timer (seconds), tags tool, error.type
)

func recordChat(ctx workflow.Context, modelID string, d time.Duration, u model.Usage, errType string) {
	provider, m := tracing.ProviderModel(modelID)
	tags := map[string]string{"gen_ai.operation.name": tracing.OpChat, "gen_ai.provider.name": provider, "gen_ai.request.model": m}
	if errType != "" {
		tags["error.type"] = errType
	}
	h := workflow.GetMetricsHandler(ctx).WithTags(tags)
	h.Timer(metricGenAIDuration).Record(d)
	if errType == "" {
		h.WithTags(map[string]string{"gen_ai.token.type": "input"}).Counter(metricGenAITokens).Inc(int64(u.InputTokens))
		h.WithTags(map[string]string{"gen_ai.token.type": "output"}).Counter(metricGenAITokens).Inc(int64(u.OutputTokens))
	}
}

func recordTool(ctx workflow.Context, tool string, d time.Duration, errType string) {
	tags := map[string]string{"gen_ai.operation.name": tracing.OpExecuteTool, "gen_ai.tool.name": tool}
	if errType != "" {
		tags["error.type"] = errType
	}
	workflow.GetMetricsHandler(ctx).WithTags(tags).Timer(metricGenAIToolElapsed).Record(d)
}
