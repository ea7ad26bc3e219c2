package workflows

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A turn's spans (docs/observability.md): each is emitted once, when what
// it describes has ended, from a workflow task that is not replaying, with
// workflow times and ids derived from the turn's workflow id
// (internal/tracing). None of this adds a workflow command: with or
// without a tracer, the turn's history is the same.

// spanTracer is the worker's tracer (nil: none).
func spanTracer(ctx workflow.Context) *tracing.Tracer { return tracing.FromWorkflow(ctx) }

// emitSpan emits s in the turn's trace with the attributes every span
// carries: the operation, the conversation (the session), the turn.
func (t *turn) emitSpan(ctx workflow.Context, op string, s tracing.Span) {
	tr := spanTracer(ctx)
	if tr == nil || workflow.IsReplaying(ctx) {
		return
	}
	s.Attrs = append(s.Attrs,
		attribute.String(tracing.AttrConversation, t.in.SessionID),
		attribute.String("eve.turn.id", t.in.TurnID),
		attribute.Int("eve.turn.sequence", t.in.Sequence))
	if op != "" {
		s.Attrs = append(s.Attrs, attribute.String(tracing.AttrOperation, op))
	}
	tr.Emit(ctx, t.wid, s)
}

// startedData is turn.started's data: with the turn's trace (its root span,
// sampled) when the session is traced, as eve's data.trace.
func (t *turn) startedData() protocol.TurnStartedData {
	d := protocol.TurnStartedData{TurnRef: t.ref()}
	if t.cfg.Traced {
		sc := tracing.SpanContext(t.wid, "")
		d.Trace = &protocol.TraceContext{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), TraceFlags: int(sc.TraceFlags())}
	}
	return d
}

// modelAttrs name the model a step calls.
func (t *turn) modelAttrs() []attribute.KeyValue {
	provider, m := tracing.ProviderModel(t.cfg.ModelID)
	return []attribute.KeyValue{attribute.String(tracing.AttrProvider, provider), attribute.String(tracing.AttrRequestModel, m)}
}

// traceTurn emits the turn's root span, invoke_agent, when it ends.
func (t *turn) traceTurn(ctx workflow.Context, status string) {
	tr := spanTracer(ctx)
	if tr == nil || workflow.IsReplaying(ctx) {
		return
	}
	now := workflow.Now(ctx)
	if t.stepOpen {
		// A step the turn ended in (cancelled, failed) ends with it.
		t.traceStep(ctx, t.stepIdx, "", protocol.StepUsage{})
	}
	attrs := append([]attribute.KeyValue{
		attribute.String(tracing.AttrAgentName, t.cfg.AgentName),
		attribute.Int(tracing.AttrInputTokens, t.usage.InputTokens),
		attribute.Int(tracing.AttrOutputTokens, t.usage.OutputTokens),
		attribute.String("eve.turn.status", status),
		attribute.Int("eve.turn.steps", t.stepIdx+1),
	}, t.modelAttrs()...)
	if a, ok := tr.ContentJSON(tracing.AttrInputMessages, []genaiMessage{{Role: "user", Parts: []genaiPart{{Type: "text", Content: t.in.Message}}}}); ok {
		attrs = append(attrs, a)
	}
	if t.reply != "" {
		if a, ok := tr.ContentJSON(tracing.AttrOutputMessages, []genaiMessage{{Role: "assistant", Parts: []genaiPart{{Type: "text", Content: t.reply}}}}); ok {
			attrs = append(attrs, a)
		}
	}
	s := tracing.Span{Name: tracing.OpInvokeAgent + " " + t.cfg.AgentName, Start: t.started, End: now, Attrs: attrs, Links: t.traceLinks()}
	if status == "failed" {
		s.ErrorType, s.Message = t.failCode, t.errMsg
	}
	t.emitSpan(ctx, tracing.OpInvokeAgent, s)
}

// traceLinks are the spans a turn's trace follows from, in other traces:
// the root of the session's previous turn, and for a subagent's turn the
// parent's execute_tool span of the call that sent its message. Their ids
// derive from workflow ids, so no lookup is needed.
func (t *turn) traceLinks() []trace.SpanContext {
	var links []trace.SpanContext
	if t.in.PrevTurn != "" {
		links = append(links, tracing.SpanContext(t.in.PrevTurn, ""))
	}
	if c := t.in.CalledBy; c != nil && c.WorkflowID != "" && c.CallID != "" {
		links = append(links, tracing.SpanContext(c.WorkflowID, tracing.ToolKey(c.CallID)))
	}
	return links
}

// traceStep emits a step's agent.step span when it ends.
func (t *turn) traceStep(ctx workflow.Context, i int, finish string, usage protocol.StepUsage) {
	t.stepOpen = false
	attrs := []attribute.KeyValue{attribute.Int("eve.step.index", i)}
	if finish != "" {
		attrs = append(attrs, attribute.StringSlice(tracing.AttrFinishReasons, []string{finish}),
			attribute.Int(tracing.AttrInputTokens, usage.InputTokens),
			attribute.Int(tracing.AttrOutputTokens, usage.OutputTokens))
	}
	t.emitSpan(ctx, "", tracing.Span{Key: tracing.StepKey(i), Name: tracing.SpanStep, Start: t.stepStart, End: workflow.Now(ctx), Attrs: attrs})
}

// traceChat emits a model step's chat span.
// Its end is workflow time, or, when the model's own time says more (a
// local activity runs inside one workflow task), its start plus that.
func (t *turn) traceChat(ctx workflow.Context, i int, start time.Time, res work.ModelStepOutput, err error) {
	resp := res.Response
	end := workflow.Now(ctx)
	if e := start.Add(time.Duration(res.Elapsed) * time.Millisecond); e.After(end) {
		end = e
	}
	defer recordChat(ctx, t.cfg.ModelID, end.Sub(start), resp.Usage, errType(err))
	tr := spanTracer(ctx)
	if tr == nil || workflow.IsReplaying(ctx) {
		return
	}
	_, m := tracing.ProviderModel(t.cfg.ModelID)
	s := tracing.Span{Key: tracing.ChatKey(i), Parent: tracing.StepKey(i), Name: tracing.OpChat + " " + m, Start: start, End: end, Attrs: t.modelAttrs()}
	if err != nil {
		s.ErrorType, s.Message = codeModelError, errorMessage(err)
	} else {
		s.Attrs = append(s.Attrs,
			attribute.StringSlice(tracing.AttrFinishReasons, []string{resp.FinishReason}),
			attribute.Int(tracing.AttrInputTokens, resp.Usage.InputTokens),
			attribute.Int(tracing.AttrOutputTokens, resp.Usage.OutputTokens))
		if a, ok := tr.ContentJSON(tracing.AttrOutputMessages, []genaiMessage{assistantMessage(resp)}); ok {
			s.Attrs = append(s.Attrs, a)
		}
	}
	t.emitSpan(ctx, tracing.OpChat, s)
}

func errType(err error) string {
	if err != nil {
		return codeModelError
	}
	return ""
}

// traceTool emits a call's execute_tool span, and for a delegated call
// the wait on its job (eve.wait task) under it.
func (t *turn) traceTool(ctx workflow.Context, c *pendingCall, start time.Time, step int) {
	tr := spanTracer(ctx)
	end := workflow.Now(ctx)
	errType := ""
	if c.out.Status != protocol.StatusCompleted {
		errType = string(c.out.Status)
		if c.out.Error != nil && c.out.Error.Code != "" {
			errType = c.out.Error.Code
		}
	}
	recordTool(ctx, c.plan.Call.Name, end.Sub(start), errType)
	if tr == nil || workflow.IsReplaying(ctx) {
		return
	}
	id := c.plan.Call.ID
	attrs := []attribute.KeyValue{
		attribute.String(tracing.AttrToolName, c.plan.Call.Name),
		attribute.String(tracing.AttrToolCallID, id),
		attribute.String(tracing.AttrToolType, toolType(c)),
		attribute.String("eve.tool.kind", c.plan.Kind),
		attribute.String("eve.tool.outcome", string(c.out.Status)),
	}
	if c.stub != nil {
		attrs = append(attrs, attribute.String("eve.tool.stub", c.stub.RuleID))
	}
	if a, ok := tr.ContentJSON(tracing.AttrToolArguments, t.toolInput(c).Input); ok {
		attrs = append(attrs, a)
	}
	if a, ok := tr.ContentJSON(tracing.AttrToolResult, c.out.Output); ok && len(c.out.Output) > 0 {
		attrs = append(attrs, a)
	}
	s := tracing.Span{Key: tracing.ToolKey(id), Parent: tracing.StepKey(step), Name: tracing.OpExecuteTool + " " + c.plan.Call.Name, Start: start, End: end, Attrs: attrs}
	if errType != "" {
		s.ErrorType, s.Message = errType, ""
		if c.out.Error != nil {
			s.Message = c.out.Error.Message
		}
	}
	t.emitSpan(ctx, tracing.OpExecuteTool, s)
	if tools.Kind(c.plan.Kind) == tools.KindDelegated && c.stub == nil {
		t.emitSpan(ctx, "", tracing.Span{Key: "task/" + id, Parent: tracing.ToolKey(id), Name: tracing.SpanWait + " task", Start: start, End: end, Attrs: []attribute.KeyValue{
			attribute.String("eve.wait.kind", "task"),
			attribute.String("eve.request.id", signals.ActionID(t.wid, id)),
			attribute.String("eve.wait.outcome", string(c.out.Status)),
			attribute.String(tracing.AttrToolName, c.plan.Call.Name),
			attribute.String(tracing.AttrToolCallID, id),
		}})
	}
}

// traceWait emits the time a call waited on a person (eve.wait approval,
// eve.wait question): from its request to what closed it.
func (t *turn) traceWait(ctx workflow.Context, c *pendingCall) {
	r := c.req
	kind := "approval"
	if c.stage == stageAnswer {
		kind = "question"
	}
	outcome := r.state.String()
	if r.state == reqSettled {
		outcome = r.res.Outcome
	}
	attrs := []attribute.KeyValue{
		attribute.String("eve.wait.kind", kind),
		attribute.String("eve.request.id", r.req.RequestID),
		attribute.String("eve.wait.outcome", outcome),
		attribute.String(tracing.AttrToolName, c.plan.Call.Name),
		attribute.String(tracing.AttrToolCallID, c.plan.Call.ID),
	}
	if r.decider != nil {
		attrs = append(attrs, attribute.String("eve.wait.decided_by", r.decider.ID))
	}
	t.emitSpan(ctx, "", tracing.Span{Key: tracing.WaitKey(r.req.RequestID), Parent: tracing.StepKey(r.stepIdx), Name: tracing.SpanWait + " " + kind, Start: r.opened, End: workflow.Now(ctx), Attrs: attrs})
}

// toolType is gen_ai.tool.type: a delegated tool runs elsewhere (an
// extension, in the conventions' words), an authored one here.
func toolType(c *pendingCall) string {
	if tools.Kind(c.plan.Kind) == tools.KindDelegated {
		return "extension"
	}
	return "function"
}

// genaiMessage is a message as the GenAI conventions record contents
// (gen_ai.input.messages, gen_ai.output.messages).
type genaiMessage struct {
	Role  string      `json:"role"`
	Parts []genaiPart `json:"parts"`
}

type genaiPart struct {
	Type      string `json:"type"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
}

func assistantMessage(resp model.Response) genaiMessage {
	m := genaiMessage{Role: "assistant"}
	if resp.Text != "" {
		m.Parts = append(m.Parts, genaiPart{Type: "text", Content: resp.Text})
	}
	for _, c := range resp.ToolCalls {
		m.Parts = append(m.Parts, genaiPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: c.Input})
	}
	return m
}
