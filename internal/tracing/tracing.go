// Package tracing emits eve's OpenTelemetry spans by the GenAI semantic
// conventions (docs/observability.md): one trace per turn, rooted at
// `invoke_agent <agent>`, with `agent.step`, `chat <model>`,
// `execute_tool <tool>` and `eve.wait <kind>` (time parked on a person or a
// job) under it.
//
// The spans are replay-safe: workflow code emits each span once, when the
// thing it describes has ended, from a workflow task that is not replaying
// (Emit), with the start and end times the workflow recorded, and with ids
// derived from the turn's workflow id and the span's key (TraceID,
// SpanID). A replay (sticky cache evicted, worker restarted, a query on a
// closed turn) emits nothing; a workflow task that fails after it emitted
// and runs again emits the same span, with the same ids, once more.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// Span names and attribute keys (OpenTelemetry GenAI semantic conventions,
// and eve's own under eve.*).
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	SpanStep      = "agent.step"
	SpanWait      = "eve.wait"

	AttrOperation      = "gen_ai.operation.name"
	AttrConversation   = "gen_ai.conversation.id"
	AttrAgentName      = "gen_ai.agent.name"
	AttrProvider       = "gen_ai.provider.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrFinishReasons  = "gen_ai.response.finish_reasons"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrToolType       = "gen_ai.tool.type"
	AttrToolArguments  = "gen_ai.tool.call.arguments"
	AttrToolResult     = "gen_ai.tool.call.result"
	AttrInputMessages  = "gen_ai.input.messages"
	AttrOutputMessages = "gen_ai.output.messages"
	AttrErrorType      = "error.type"
)

// EnvContent is the operator's opt-in to record message and tool contents
// on spans ("true" or "1"); OpenTelemetry's
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is read too.
const EnvContent = "EVE_OTEL_RECORD_CONTENT"

// Tracer emits eve's spans. A nil *Tracer emits nothing.
type Tracer struct {
	t trace.Tracer
	// Content: message and tool contents go on spans (EnvContent).
	Content bool
}

// New returns a tracer over tp. Only a provider NewProvider built keeps
// the derived span ids; another gives the spans its own.
func New(tp trace.TracerProvider, content bool) *Tracer {
	return &Tracer{t: tp.Tracer("github.com/eve-temporal/eve"), Content: content}
}

// ContentFromEnv reports whether the operator opted in to contents.
func ContentFromEnv() bool {
	for _, k := range []string{EnvContent, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} {
		if b, err := strconv.ParseBool(os.Getenv(k)); err == nil && b {
			return true
		}
	}
	return false
}

// Provider is a tracer provider and the tracer eve emits through.
type Provider struct {
	*sdktrace.TracerProvider
	Tracer *Tracer
}

// FromEnv builds a tracer provider from EVE_OTEL_EXPORTER: "" or "none"
// (off: returns nil), "stdout", or "otlp" (OTLP over HTTP/protobuf, or
// gRPC when OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL is "grpc"; the standard
// OTEL_EXPORTER_OTLP_* variables configure it). The service is
// named service unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES)
// names it.
func FromEnv(ctx context.Context, service string) (*Provider, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch v := os.Getenv("EVE_OTEL_EXPORTER"); v {
	case "", "none":
		return nil, nil
	case "stdout":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	case "otlp":
		// The standard variables choose the protocol, the traces' own first.
		p, name := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		if p == "" {
			p, name = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
		}
		switch p {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			return nil, fmt.Errorf("%s=%q: eve exports OTLP over HTTP (http/protobuf, the default; the backend's port 4318) or gRPC (grpc; port 4317)", name, p)
		}
	default:
		return nil, fmt.Errorf("EVE_OTEL_EXPORTER=%q: want none, stdout or otlp", v)
	}
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	return NewProvider(ctx, service, sdktrace.WithBatcher(exp))
}

// NewProvider builds eve's tracer provider: the derived span ids, a
// service name (service unless the environment names one), and opts (an
// exporter or span processor).
func NewProvider(ctx context.Context, service string, opts ...sdktrace.TracerProviderOption) (*Provider, error) {
	res, err := Resource(ctx, service)
	if err != nil {
		return nil, err
	}
	opts = append([]sdktrace.TracerProviderOption{sdktrace.WithIDGenerator(ids{}), sdktrace.WithResource(res)}, opts...)
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{TracerProvider: tp, Tracer: New(tp, ContentFromEnv())}, nil
}

// Resource names the service: OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES'
// service.name when set, else service.
func Resource(ctx context.Context, service string) (*resource.Resource, error) {
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	def := resource.NewSchemaless(attribute.String("service.name", service))
	return resource.Merge(def, env)
}

// Interceptor hands t to workflow code (FromWorkflow) on a worker built
// from a client that has it.
func Interceptor(t *Tracer) interceptor.Interceptor {
	return &workerInterceptor{t: t}
}

type workerInterceptor struct {
	interceptor.InterceptorBase
	t *Tracer
}

func (w *workerInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, t: w.t}
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	t *Tracer
}

type tracerKey struct{}

func (w *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return w.Next.ExecuteWorkflow(workflow.WithValue(ctx, tracerKey{}, w.t), in)
}

// FromWorkflow is the tracer the worker's interceptor gave the workflow,
// or nil (no tracing: its Emit does nothing).
func FromWorkflow(ctx workflow.Context) *Tracer {
	t, _ := ctx.Value(tracerKey{}).(*Tracer)
	return t
}

// Span is one span workflow code emits: its key (unique in its turn;
// "" is the turn's root), its parent's key, times, and attributes.
type Span struct {
	Key, Parent string
	Name        string
	Start, End  time.Time
	Attrs       []attribute.KeyValue
	// ErrorType, when set, marks the span failed (error.type and an error
	// status); Message says why.
	ErrorType, Message string
	// Links are spans of other traces this one follows from.
	Links []trace.SpanContext
}

// Emit emits s in the trace of the workflow turnID, unless the workflow
// is replaying (it was emitted when the task first ran) or t is nil.
func (t *Tracer) Emit(ctx workflow.Context, turnID string, s Span) {
	if t == nil || workflow.IsReplaying(ctx) {
		return
	}
	t.EmitNow(turnID, s)
}

// EmitNow emits s in the trace of turnID, now (code outside workflows:
// the API server, tests).
func (t *Tracer) EmitNow(turnID string, s Span) {
	if t == nil {
		return
	}
	ctx := context.Background()
	if s.Key != "" {
		ctx = trace.ContextWithRemoteSpanContext(ctx, SpanContext(turnID, s.Parent))
	}
	ctx = context.WithValue(ctx, fixedKey{}, fixed{TraceID(turnID), SpanID(turnID, s.Key)})
	links := make([]trace.Link, len(s.Links))
	for i, l := range s.Links {
		links[i] = trace.Link{SpanContext: l}
	}
	_, span := t.t.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithAttributes(s.Attrs...),
		trace.WithLinks(links...), trace.WithSpanKind(kindOf(s.Name)))
	if s.ErrorType != "" {
		span.SetAttributes(attribute.String(AttrErrorType, s.ErrorType))
		span.SetStatus(codes.Error, s.Message)
	}
	end := s.End
	if end.Before(s.Start) {
		end = s.Start
	}
	span.End(trace.WithTimestamp(end))
}

func kindOf(name string) trace.SpanKind {
	if strings.HasPrefix(name, OpChat+" ") {
		return trace.SpanKindClient
	}
	return trace.SpanKindInternal
}

// TraceID is the trace of the turn whose workflow id is turnID.
func TraceID(turnID string) trace.TraceID {
	h := sha256.Sum256([]byte("eve/trace/" + turnID))
	var id trace.TraceID
	copy(id[:], h[:])
	return id
}

// SpanID is the span key names in the turn's trace ("" is the root,
// invoke_agent).
func SpanID(turnID, key string) trace.SpanID {
	h := sha256.Sum256([]byte("eve/span/" + turnID + "/" + key))
	var id trace.SpanID
	copy(id[:], h[:])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// SpanContext is the span key names in the turn's trace, sampled.
func SpanContext(turnID, key string) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: TraceID(turnID), SpanID: SpanID(turnID, key), TraceFlags: trace.FlagsSampled, Remote: true,
	})
}

// Keys of a turn's spans.
func StepKey(step int) string         { return "step/" + strconv.Itoa(step) }
func ChatKey(step int) string         { return "chat/" + strconv.Itoa(step) }
func ToolKey(callID string) string    { return "tool/" + callID }
func WaitKey(requestID string) string { return "wait/" + requestID }

// ContentJSON returns v as a span attribute's JSON text when contents are
// recorded, and false otherwise.
func (t *Tracer) ContentJSON(key string, v any) (attribute.KeyValue, bool) {
	if t == nil || !t.Content {
		return attribute.KeyValue{}, false
	}
	if raw, ok := v.(json.RawMessage); ok {
		return attribute.String(key, string(raw)), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return attribute.KeyValue{}, false
	}
	return attribute.String(key, string(b)), true
}

// ProviderModel splits a model id ("openai:gpt-4o", eve's models' IDs)
// into the provider (gen_ai.provider.name) and the model.
func ProviderModel(modelID string) (provider, model string) {
	for _, sep := range []string{":", "/"} {
		if p, m, ok := strings.Cut(modelID, sep); ok {
			return p, m
		}
	}
	return "unknown", modelID
}

// ids gives spans the ids their context fixes (EmitNow), or random ones.
type ids struct{}

type fixedKey struct{}

type fixed struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(fixedKey{}).(fixed); ok {
		return f.trace, f.span
	}
	var t trace.TraceID
	var s trace.SpanID
	for !t.IsValid() {
		putUint64(t[:8], rand.Uint64())
		putUint64(t[8:], rand.Uint64())
	}
	for !s.IsValid() {
		putUint64(s[:], rand.Uint64())
	}
	return t, s
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(fixedKey{}).(fixed); ok {
		return f.span
	}
	var s trace.SpanID
	for !s.IsValid() {
		putUint64(s[:], rand.Uint64())
	}
	return s
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
