package tracing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestProviderModel(t *testing.T) {
	for _, c := range []struct{ id, provider, model string }{
		{"anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"openai:gpt-4o", "openai", "gpt-4o"},
		{"scripted:demo", "scripted", "demo"},
		{"openai/gpt-4o", "openai", "gpt-4o"},
		{"bare", "unknown", "bare"},
	} {
		t.Run(c.id, func(t *testing.T) {
			p, m := ProviderModel(c.id)
			if d := cmp.Diff([2]string{c.provider, c.model}, [2]string{p, m}); d != "" {
				t.Error(d)
			}
		})
	}
}

// The same span emitted twice has the same ids; its parent is the turn's
// root, in the turn's trace; other turns have other traces.
func TestEmitNowDerivesIDs(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p, err := NewProvider(context.Background(), "eve-test", sdktrace.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for range 2 {
		p.Tracer.EmitNow("ses_1/turn_0", Span{Key: ToolKey("c1"), Parent: StepKey(0), Name: "execute_tool x", Start: now, End: now.Add(time.Second)})
	}
	p.Tracer.EmitNow("ses_1/turn_0", Span{Name: "invoke_agent a", Start: now, End: now})
	p.Tracer.EmitNow("ses_1/turn_1", Span{Name: "invoke_agent a", Start: now, End: now})
	got := rec.Ended()
	if len(got) != 4 {
		t.Fatalf("%d spans", len(got))
	}
	if !got[0].SpanContext().Equal(got[1].SpanContext()) {
		t.Error("the same span emitted twice has other ids")
	}
	if got[0].SpanContext().TraceID() != TraceID("ses_1/turn_0") || got[0].SpanContext().SpanID() != SpanID("ses_1/turn_0", ToolKey("c1")) {
		t.Errorf("ids %v", got[0].SpanContext())
	}
	if got[0].Parent().SpanID() != SpanID("ses_1/turn_0", StepKey(0)) {
		t.Errorf("parent %v", got[0].Parent())
	}
	if got[2].Parent().IsValid() || got[2].SpanContext().SpanID() != SpanID("ses_1/turn_0", "") {
		t.Errorf("root %v, parent %v", got[2].SpanContext(), got[2].Parent())
	}
	if got[3].SpanContext().TraceID() == got[2].SpanContext().TraceID() {
		t.Error("two turns share a trace")
	}
	if d := got[0].EndTime().Sub(got[0].StartTime()); d != time.Second {
		t.Errorf("duration %v", d)
	}
}

func TestServiceName(t *testing.T) {
	for _, c := range []struct{ env, want string }{{"", "eve-worker"}, {"billing-agent", "billing-agent"}} {
		t.Run(c.want, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", c.env)
			r, err := Resource(context.Background(), "eve-worker")
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range r.Attributes() {
				if kv.Key == "service.name" && kv.Value.AsString() != c.want {
					t.Errorf("service.name %q, want %q", kv.Value.AsString(), c.want)
				}
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct{ exporter, protocol, err string }{
		{"", "", ""},
		{"none", "", ""},
		{"otlp", "grpc", ""},
		{"otlp", "http/json", "eve exports OTLP over HTTP (http/protobuf"},
		{"otlp", "http/protobuf", ""},
		{"zipkin", "", "want none, stdout or otlp"},
	} {
		t.Run(c.exporter+"/"+c.protocol, func(t *testing.T) {
			t.Setenv("EVE_OTEL_EXPORTER", c.exporter)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
			p, err := FromEnv(context.Background(), "eve-worker")
			if p != nil {
				defer p.Shutdown(context.Background())
			}
			if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
			if (p != nil) != (c.err == "" && c.exporter == "otlp") {
				t.Errorf("provider %v", p)
			}
		})
	}
}

func TestContentFromEnv(t *testing.T) {
	t.Setenv(EnvContent, "")
	t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
	if ContentFromEnv() {
		t.Error("contents on by default")
	}
	t.Setenv(EnvContent, "true")
	if !ContentFromEnv() {
		t.Error("EVE_OTEL_RECORD_CONTENT=true ignored")
	}
}
