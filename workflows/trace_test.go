package workflows_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/protocol"
)

// A turn's spans in Temporal's test environment: the tree, the derived
// ids, the wait as long as the person took (test time), data.trace on
// turn.started. e2e/tracing_test.go checks the same against a real Jaeger,
// with replays.
func TestTurnSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p, err := tracing.NewProvider(context.Background(), "wftest", sdktrace.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{tracing.Interceptor(p.Tracer)}})
	wid := turnWorkflowID(0)
	h.at(time.Hour, func() {
		if reqs := h.parkedOn(wid, "input"); len(reqs) == 1 {
			h.respond(wid, protocol.InputResponse{RequestID: reqs[0].RequestID, OptionID: "approve"})
		}
	})
	in := turnInput("refund ch_1 5")
	in.Config.Traced = true
	out := h.runTurn(in)

	names := map[string]string{}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	var tree []string
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != tracing.TraceID(wid) {
			t.Errorf("%s in trace %s", s.Name(), s.SpanContext().TraceID())
		}
		tree = append(tree, s.Name()+" < "+names[s.Parent().SpanID().String()])
	}
	slices.Sort(tree)
	want := []string{
		"agent.step < invoke_agent wftest", "agent.step < invoke_agent wftest",
		"chat wftest < agent.step", "chat wftest < agent.step",
		"eve.wait approval < agent.step",
		"execute_tool refund < agent.step",
		"invoke_agent wftest < ",
	}
	if d := cmp.Diff(want, tree); d != "" {
		t.Fatalf("spans (-want +got):\n%s", d)
	}
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "eve.wait") && s.EndTime().Sub(s.StartTime()) < time.Hour {
			t.Errorf("the wait lasts %v, want at least the hour the person took", s.EndTime().Sub(s.StartTime()))
		}
	}
	var started protocol.TurnStartedData
	decode(t, of(out.Events, protocol.TurnStarted)[0], &started)
	sc := tracing.SpanContext(wid, "")
	if d := cmp.Diff(&protocol.TraceContext{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), TraceFlags: 1}, started.Trace); d != "" {
		t.Errorf("data.trace (-want +got):\n%s", d)
	}
}
