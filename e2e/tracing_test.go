package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/tracing"
)

// One trace per turn, across the turn workflow and its activities.
func TestOneTracePerTurn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	ic, err := tracing.Interceptor(tp.Tracer("eve-test"))
	if err != nil {
		t.Fatal(err)
	}
	srv := devtest.Shared(t)
	c, err := srv.Dial(client.Options{Interceptors: []interceptor.ClientInterceptor{ic}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := evetest.NewOn(t, srv)
	env.Client = c
	env.Sessions = &sessions.Service{Client: c, TaskQueue: env.TaskQueue}
	a, _ := demo.Agent()
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Second)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	env.SendAndWait(ctx, id, "what's the weather in Oslo")
	env.SendAndWait(ctx, id, "what's the weather in Rome")

	turnTraces := map[string]bool{}
	toolTraces := map[string]bool{}
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == "RunWorkflow:eve.Turn":
			turnTraces[s.SpanContext.TraceID().String()] = true
		case strings.HasSuffix(s.Name, ":eve.ExecuteTool") && strings.HasPrefix(s.Name, "RunActivity"):
			toolTraces[s.SpanContext.TraceID().String()] = true
		}
	}
	if len(turnTraces) != 2 {
		t.Fatalf("%d distinct turn traces, want 2 (one per turn)", len(turnTraces))
	}
	for tr := range toolTraces {
		if !turnTraces[tr] {
			t.Fatalf("a tool activity span is not in a turn's trace")
		}
	}
	if len(toolTraces) != 2 {
		t.Fatalf("tool activity spans in %d traces, want 2", len(toolTraces))
	}
}
