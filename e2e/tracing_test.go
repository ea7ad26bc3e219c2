package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver/jaegertest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// tracedEnv is a demo worker whose spans go to a real Jaeger over OTLP/HTTP.
type tracedEnv struct {
	*evetest.Env
	j *jaegertest.Jaeger
	p *tracing.Provider
	// emitted records every span the worker emits, as Jaeger does not
	// show a span twice that was emitted twice with the same ids.
	emitted *tracetest.SpanRecorder
	service string
	stop    func()
	// mk and host are the worker's agent and host (nil mk: the demo's).
	mk   func() *agent.Agent
	host agent.Host
}

func newTracedEnv(t *testing.T, j *jaegertest.Jaeger, content bool) *tracedEnv {
	t.Helper()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPEndpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	service := fmt.Sprintf("eve-test-%d", time.Now().UnixNano())
	rec := tracetest.NewSpanRecorder()
	p, err := tracing.NewProvider(ctx, service, sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	p.Tracer.Content = content
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return &tracedEnv{Env: evetest.New(t), j: j, p: p, service: service, emitted: rec}
}

func (te *tracedEnv) startWorker() {
	var a *agent.Agent
	if te.mk != nil {
		a = te.mk()
	} else {
		var err error
		if a, err = demo.Agent(); err != nil {
			te.T.Fatal(err)
		}
	}
	te.stop = te.StartWorkerHostWith(a, te.host, worker.Options{Interceptors: []interceptor.WorkerInterceptor{tracing.Interceptor(te.p.Tracer)}})
}

// trace flushes the worker's spans and reads the turn's trace from Jaeger
// once it has at least want spans (a sentinel emitted after everything
// else says all that was exported has been stored).
func (te *tracedEnv) trace(t *testing.T, turnWID string, sentinel string) jaegertest.Trace {
	t.Helper()
	now := time.Now()
	te.p.Tracer.EmitNow(turnWID, tracing.Span{Key: sentinel, Name: "sentinel", Start: now, End: now})
	ctx := te.Ctx(30 * time.Second)
	if err := te.p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	want := tracing.SpanID(turnWID, sentinel).String()
	for {
		tr, ok, err := te.j.Trace(ctx, tracing.TraceID(turnWID).String())
		if err != nil {
			t.Fatal(err)
		}
		if ok && slices.ContainsFunc(tr.Spans, func(s jaegertest.Span) bool { return s.SpanID == want }) {
			tr.Spans = slices.DeleteFunc(tr.Spans, func(s jaegertest.Span) bool { return s.OperationName == "sentinel" })
			// Jaeger shows a span emitted twice with the same ids once: count
			// what the worker emitted in this trace.
			emitted := 0
			for _, s := range te.emitted.Ended() {
				if s.SpanContext().TraceID() == tracing.TraceID(turnWID) && s.Name() != "sentinel" {
					emitted++
				}
			}
			stored := 0 // of this process's workers (not a subprocess's)
			for _, s := range tr.Spans {
				if tr.Processes[s.ProcessID].ServiceName == te.service {
					stored++
				}
			}
			if emitted != stored {
				t.Fatalf("the worker emitted %d spans in the turn's trace, Jaeger has %d: some twice", emitted, stored)
			}
			return tr
		}
		select {
		case <-ctx.Done():
			t.Fatalf("trace %s: the sentinel span never reached Jaeger", turnWID)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shape is a span's name and its parent's name, for cmp.
type shape struct{ Name, Parent string }

func shapes(tr jaegertest.Trace) []shape {
	names := map[string]string{}
	for _, s := range tr.Spans {
		names[s.SpanID] = s.OperationName
	}
	var out []shape
	for _, s := range tr.Spans {
		out = append(out, shape{s.OperationName, names[s.Parent()]})
	}
	slices.SortFunc(out, func(a, b shape) int { return strings.Compare(a.Name+"<"+a.Parent, b.Name+"<"+b.Parent) })
	return out
}

func spansNamed(tr jaegertest.Trace, name string) []jaegertest.Span {
	var out []jaegertest.Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

func spanByID(tr jaegertest.Trace, id interface{ String() string }) jaegertest.Span {
	for _, s := range tr.Spans {
		if s.SpanID == id.String() {
			return s
		}
	}
	return jaegertest.Span{}
}

func checkTags(t *testing.T, s jaegertest.Span, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for k := range want {
		if v, ok := s.Tag(k); ok {
			got[k] = v
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: tags (-want +got):\n%s", s.OperationName, d)
	}
}

// forceReplay queries the closed turn: its worker replays the whole
// history (a closed workflow is not in the cache).
func (te *tracedEnv) forceReplay(t *testing.T, turnWID string) {
	t.Helper()
	v, err := te.Client.QueryWorkflow(te.Ctx(30*time.Second), turnWID, "", signals.QueryTurnEvents, 0)
	if err != nil {
		t.Fatalf("query %s: %v", turnWID, err)
	}
	var evs []protocol.Event
	if err := v.Get(&evs); err != nil || len(evs) == 0 {
		t.Fatalf("query %s: %d events, %v", turnWID, len(evs), err)
	}
}

// checkReplay replays the closed turn on the worker and checks that it
// emitted nothing: Jaeger still has n spans, and the worker emitted none
// since.
func (te *tracedEnv) checkReplay(t *testing.T, wid string, n int) {
	t.Helper()
	before := len(te.emitted.Ended())
	te.forceReplay(t, wid)
	if got := len(te.trace(t, wid, "s2").Spans); got != n {
		t.Fatalf("%d spans in Jaeger after a replay, want %d", got, n)
	}
	if got := len(te.emitted.Ended()) - before; got != 1 { // the sentinel
		t.Fatalf("a replay emitted %d spans", got-1)
	}
}

// A weather turn, an approval that waits and a replay, in a real Jaeger:
// the GenAI span tree with its attributes, the wait as a span of its own,
// nothing emitted twice, contents only on request.
func TestTracesInJaeger(t *testing.T) {
	j := jaegertest.Start(t)

	t.Run("weather", func(t *testing.T) {
		te := newTracedEnv(t, j, false)
		te.startWorker()
		ctx := te.Ctx(30 * time.Second)
		id, err := te.Sessions.Create(ctx, "", alice)
		if err != nil {
			t.Fatal(err)
		}
		res := te.SendAndWait(ctx, id, "what's the weather in Oslo")
		wid := signals.TurnWorkflowID(id, res.TurnID)
		tr := te.trace(t, wid, "s1")
		want := []shape{
			{"agent.step", "invoke_agent demo"}, {"agent.step", "invoke_agent demo"},
			{"chat demo", "agent.step"}, {"chat demo", "agent.step"},
			{"execute_tool get_weather", "agent.step"},
			{"invoke_agent demo", ""},
		}
		if d := cmp.Diff(want, shapes(tr)); d != "" {
			t.Fatalf("span tree (-want +got):\n%s", d)
		}
		root := spansNamed(tr, "invoke_agent demo")[0]
		// turn.started carries the trace, as eve's data.trace.
		var started protocol.TurnStartedData
		evetest.Of(te.Events(ctx, id), protocol.TurnStarted)[0].Decode(&started)
		if d := cmp.Diff(&protocol.TraceContext{TraceID: tr.TraceID, SpanID: root.SpanID, TraceFlags: 1}, started.Trace); d != "" {
			t.Errorf("turn.started data.trace (-want +got):\n%s", d)
		}
		if svc := tr.Processes[root.ProcessID].ServiceName; svc != te.service {
			t.Errorf("service %q, want %q", svc, te.service)
		}
		checkTags(t, root, map[string]string{
			"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "demo", "gen_ai.conversation.id": id,
			"eve.turn.status": "completed",
		})
		chat := spanByID(tr, tracing.SpanID(wid, tracing.ChatKey(0))) // the step that called the tool
		checkTags(t, chat, map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.conversation.id": id, "gen_ai.provider.name": "scripted", "gen_ai.request.model": "demo",
			"gen_ai.response.finish_reasons": `["tool-calls"]`,
		})
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if _, ok := chat.Tag(k); !ok {
				t.Errorf("chat span has no %s", k)
			}
		}
		tool := spansNamed(tr, "execute_tool get_weather")[0]
		checkTags(t, tool, map[string]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.conversation.id": id,
			"eve.tool.outcome": "completed",
		})
		if _, ok := tool.Tag("gen_ai.tool.call.id"); !ok {
			t.Error("execute_tool has no gen_ai.tool.call.id")
		}
		for _, s := range tr.Spans {
			for _, k := range []string{"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages", "gen_ai.output.messages"} {
				if _, ok := s.Tag(k); ok {
					t.Errorf("%s records %s without the opt-in", s.OperationName, k)
				}
			}
			if v, ok := s.Tag("error"); ok && v == "true" {
				t.Errorf("%s is marked as an error on a normal path", s.OperationName)
			}
		}

		// A replay of the whole turn on the worker emits nothing.
		te.checkReplay(t, wid, len(tr.Spans))
	})

	t.Run("approval waits", func(t *testing.T) {
		te := newTracedEnv(t, j, false)
		te.startWorker()
		id, d := startParked(t, te.Env, "refund ch_42 for 25")
		r := d.Requests[0]
		const wait = 2 * time.Second
		time.Sleep(wait)
		// A fresh worker takes the turn: it replays the history so far.
		te.stop()
		te.startWorker()
		res := respond(t, te.Env, id, protocol.InputResponse{RequestID: r.RequestID, OptionID: "approve"})
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
			t.Fatalf("outcome %+v", res.Outcome)
		}
		wid := signals.TurnWorkflowID(id, d.TurnID)
		tr := te.trace(t, wid, "s1")
		want := []shape{
			{"agent.step", "invoke_agent demo"}, {"agent.step", "invoke_agent demo"},
			{"chat demo", "agent.step"}, {"chat demo", "agent.step"},
			{"eve.wait approval", "agent.step"},
			{"execute_tool refund_charge", "agent.step"},
			{"invoke_agent demo", ""},
		}
		if d := cmp.Diff(want, shapes(tr)); d != "" {
			t.Fatalf("span tree (-want +got):\n%s", d)
		}
		w := spansNamed(tr, "eve.wait approval")[0]
		checkTags(t, w, map[string]string{
			"eve.wait.kind": "approval", "eve.request.id": r.RequestID, "eve.wait.outcome": "approved",
			"eve.wait.decided_by": "alice", "gen_ai.tool.name": "refund_charge", "gen_ai.conversation.id": id,
		})
		if w.Duration < wait.Microseconds() {
			t.Errorf("the wait span lasts %v, want at least %v", time.Duration(w.Duration)*time.Microsecond, wait)
		}
		te.checkReplay(t, wid, len(tr.Spans))
	})

	t.Run("delegated", func(t *testing.T) {
		te := newTracedEnv(t, j, false)
		d := newDelegatedEnv(t, te.Env, time.Hour, false)
		te.mk, te.host = d.mk, d.host
		te.startWorker()
		id, jb := d.start(t)
		const wait = time.Second
		time.Sleep(wait)
		if err := actions.Complete(te.Ctx(20*time.Second), jb.Action.Completion, map[string]string{"status": "succeeded", "detail": "done"}); err != nil {
			t.Fatal(err)
		}
		if got := d.reply(t, id); got != "succeeded: done" {
			t.Fatalf("reply = %q", got)
		}
		wid := signals.TurnWorkflowID(id, signals.TurnID(0))
		tr := te.trace(t, wid, "s1")
		want := []shape{
			{"agent.step", "invoke_agent test"}, {"agent.step", "invoke_agent test"},
			{"chat default", "agent.step"}, {"chat default", "agent.step"},
			{"eve.wait task", "execute_tool run_report"},
			{"execute_tool run_report", "agent.step"},
			{"invoke_agent test", ""},
		}
		if d := cmp.Diff(want, shapes(tr)); d != "" {
			t.Fatalf("span tree (-want +got):\n%s", d)
		}
		w := spansNamed(tr, "eve.wait task")[0]
		checkTags(t, w, map[string]string{"eve.wait.kind": "task", "eve.wait.outcome": "completed", "gen_ai.tool.name": "run_report"})
		if w.Duration < wait.Microseconds() {
			t.Errorf("the job's wait lasts %v, want at least %v", time.Duration(w.Duration)*time.Microsecond, wait)
		}
		for _, s := range tr.Spans {
			if v, ok := s.Tag("error"); ok && v == "true" {
				t.Errorf("%s is marked as an error on a normal path", s.OperationName)
			}
		}
		te.checkReplay(t, wid, len(tr.Spans))
	})

	t.Run("worker killed mid-tool", func(t *testing.T) {
		te := newTracedEnv(t, j, false)
		markers := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+te.Server.Addr, "EVE_E2E_WORKER_TQ="+te.TaskQueue, "EVE_E2E_WORKER_MARKERS="+markers, te.Server.PayloadStoreEnv(),
			"EVE_OTEL_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint, "OTEL_SERVICE_NAME=", "OTEL_BSP_SCHEDULE_DELAY=100")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ctx := te.Ctx(60 * time.Second)
		id, err := te.Sessions.Create(ctx, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := te.Sessions.Send(ctx, id, signals.SendRequest{Message: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		wid := signals.TurnWorkflowID(id, res.TurnID)
		// The doomed worker's first model step has reached Jaeger and its
		// tool runs: kill it there.
		chat0 := tracing.SpanID(wid, tracing.ChatKey(0)).String()
		for {
			tr, ok, err := j.Trace(ctx, tracing.TraceID(wid).String())
			if err != nil {
				t.Fatal(err)
			}
			_, serr := os.Stat(filepath.Join(markers, "doomed-1"))
			if ok && serr == nil && slices.ContainsFunc(tr.Spans, func(s jaegertest.Span) bool { return s.SpanID == chat0 }) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the doomed worker never ran the tool, or its model step never reached Jaeger")
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		te.mk = func() *agent.Agent { return killAgent("survivor", markers) }
		te.startWorker()
		waitFor(t, te.Env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
		tr := te.trace(t, wid, "s1")
		want := []shape{
			{"agent.step", "invoke_agent kill"}, {"agent.step", "invoke_agent kill"},
			{"chat default", "agent.step"}, {"chat default", "agent.step"},
			{"execute_tool slow", "agent.step"},
			{"invoke_agent kill", ""},
		}
		if d := cmp.Diff(want, shapes(tr)); d != "" {
			t.Fatalf("one trace across the kill (-want +got):\n%s", d)
		}
		// The doomed worker emitted the first step's chat, as eve-worker
		// by default; the survivor the rest.
		for _, s := range tr.Spans {
			want := te.service
			if s.SpanID == chat0 {
				want = "eve-worker"
			}
			if got := tr.Processes[s.ProcessID].ServiceName; got != want {
				t.Errorf("%s from %q, want %q", s.OperationName, got, want)
			}
		}
		tool := spansNamed(tr, "execute_tool slow")[0]
		checkTags(t, tool, map[string]string{"eve.tool.outcome": "completed"})
		if v, ok := tool.Tag("error"); ok && v == "true" {
			t.Error("the retried tool's span is an error")
		}
	})

	t.Run("the send in the turn's trace", func(t *testing.T) {
		te := newTracedEnv(t, j, false)
		te.startWorker()
		ae := newAPIEnv(t, te.Env, func(o *api.Options) { o.Tracing = te.p })
		resp, err := http.Post(ae.URL+"/eve/v1/session", "application/json", strings.NewReader(`{"message":"what's the weather in Oslo"}`))
		if err != nil {
			t.Fatal(err)
		}
		var acc protocol.Accepted
		err = json.NewDecoder(resp.Body).Decode(&acc)
		resp.Body.Close()
		if err != nil || acc.TurnID == "" {
			t.Fatalf("accepted %+v, %v", acc, err)
		}
		te.WaitIdle(acc.SessionID)
		tr := te.trace(t, signals.TurnWorkflowID(acc.SessionID, acc.TurnID), "s1")
		send := spansNamed(tr, "eve.send")
		if len(send) != 1 || send[0].Parent() != spansNamed(tr, "invoke_agent demo")[0].SpanID {
			t.Fatalf("eve.send %+v in %v", send, shapes(tr))
		}
		checkTags(t, send[0], map[string]string{"gen_ai.conversation.id": acc.SessionID, "eve.delivery.id": acc.DeliveryID})
	})

	t.Run("contents on request", func(t *testing.T) {
		te := newTracedEnv(t, j, true)
		te.startWorker()
		ctx := te.Ctx(30 * time.Second)
		id, err := te.Sessions.Create(ctx, "", alice)
		if err != nil {
			t.Fatal(err)
		}
		res := te.SendAndWait(ctx, id, "what's the weather in Oslo")
		tr := te.trace(t, signals.TurnWorkflowID(id, res.TurnID), "s1")
		tool := spansNamed(tr, "execute_tool get_weather")
		if len(tool) != 1 {
			t.Fatalf("spans: %v", shapes(tr))
		}
		args, ok := tool[0].Tag("gen_ai.tool.call.arguments")
		if !ok || !strings.Contains(args, "Oslo") {
			t.Errorf("arguments %q, %v: want the tool's input", args, ok)
		}
		if out, ok := tool[0].Tag("gen_ai.tool.call.result"); !ok || out == "" {
			t.Errorf("no tool result")
		}
		root := spansNamed(tr, "invoke_agent demo")[0]
		if in, ok := root.Tag("gen_ai.input.messages"); !ok || !strings.Contains(in, "weather in Oslo") {
			t.Errorf("input messages %q, %v", in, ok)
		}
	})
}

// An operator may export over OTLP/gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)
// as well as HTTP: a span from a provider built from those variables
// reaches Jaeger's gRPC receiver, under the service the variables name.
func TestTracesOverGRPC(t *testing.T) {
	j := jaegertest.Start(t)
	service := fmt.Sprintf("eve-grpc-%d", time.Now().UnixNano())
	t.Setenv("EVE_OTEL_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPGRPCEndpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_SERVICE_NAME", service)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := tracing.FromEnv(ctx, "eve-worker")
	if err != nil || p == nil {
		t.Fatalf("provider %v, err %v", p, err)
	}
	defer p.Shutdown(context.Background())
	const turnWID = "grpc-session/turn_0"
	now := time.Now()
	p.Tracer.EmitNow(turnWID, tracing.Span{Key: "grpc", Name: "sentinel", Start: now, End: now})
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		tr, ok, err := j.Trace(ctx, tracing.TraceID(turnWID).String())
		if err != nil {
			t.Fatal(err)
		}
		if ok && len(tr.Spans) == 1 {
			if got := tr.Processes[tr.Spans[0].ProcessID].ServiceName; got != service {
				t.Errorf("service %q, want %q", got, service)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the span sent over gRPC never reached Jaeger")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
