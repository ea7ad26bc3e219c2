// Command tracebench measures what tracing costs a turn: the demo's weather
// turn (two model steps, one tool call) sent and awaited sequentially on a
// worker that traces (OTLP/HTTP to a real Jaeger, bin/jaeger) and on one
// that does not, in alternating blocks against one dev server
// (docs/performance.md, "Tracing"; docs/observability.md).
//
//	cd bench && go run ./cmd/tracebench -n 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/jaegertest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/signals"
)

// counter counts the spans the traced worker ends.
type counter struct{ n atomic.Int64 }

func (c *counter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *counter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *counter) Shutdown(context.Context) error                  { return nil }
func (c *counter) ForceFlush(context.Context) error                { return nil }

type mode struct {
	name  string
	queue string
	svc   *sessions.Service
	id    string
	lat   []time.Duration
	cpu   time.Duration
}

func main() {
	n := flag.Int("n", 200, "turns per mode")
	block := flag.Int("block", 20, "turns per block before switching modes")
	warmup := flag.Int("warmup", 10, "untimed turns per mode first")
	flag.Parse()
	if err := run(*n, *block, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "tracebench:", err)
		os.Exit(1)
	}
}

func run(n, block, warmup int) error {
	ctx := context.Background()
	bin, err := jaegertest.Find()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tracebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	j, stopJaeger, err := jaegertest.Run(bin, dir)
	if err != nil {
		return err
	}
	defer stopJaeger()
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := srv.Dial(client.Options{Logger: devserver.WarnLogger()})
	if err != nil {
		return err
	}
	defer c.Close()

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPEndpoint+"/v1/traces"))
	if err != nil {
		return err
	}
	var spans counter
	p, err := tracing.NewProvider(ctx, "tracebench", sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(&spans))
	if err != nil {
		return err
	}
	defer p.Shutdown(ctx)

	a, err := demo.Agent()
	if err != nil {
		return err
	}
	modes := []*mode{{name: "off", queue: "tracebench-off"}, {name: "on (OTLP/HTTP to Jaeger)", queue: "tracebench-on"}}
	for i, m := range modes {
		opts := worker.Options{}
		if i == 1 {
			opts.Interceptors = []interceptor.WorkerInterceptor{tracing.Interceptor(p.Tracer)}
		}
		w := worker.New(c, m.queue, opts)
		if err := agent.Register(w, a, agent.Host{Store: srv.PayloadStore(), Client: c}); err != nil {
			return err
		}
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
		m.svc = &sessions.Service{Client: c, TaskQueue: m.queue}
		if m.id, err = m.svc.Create(ctx, "", nil); err != nil {
			return err
		}
	}
	turn := func(m *mode) (time.Duration, error) {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		res, err := m.svc.Send(tctx, m.id, signals.SendRequest{Message: "what's the weather in Oslo", Wait: true})
		if err == nil && (res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted) {
			err = fmt.Errorf("outcome %+v", res.Outcome)
		}
		return time.Since(start), err
	}
	for _, m := range modes {
		for range warmup {
			if _, err := turn(m); err != nil {
				return err
			}
		}
	}
	spans.n.Store(0)
	for done := 0; done < n; done += block {
		for _, m := range modes {
			cpu0, _ := benchkit.CPUTime(0)
			for range min(block, n-done) {
				d, err := turn(m)
				if err != nil {
					return err
				}
				m.lat = append(m.lat, d)
			}
			cpu1, _ := benchkit.CPUTime(0)
			m.cpu += cpu1 - cpu0
		}
	}
	if err := p.ForceFlush(ctx); err != nil {
		return fmt.Errorf("export to Jaeger: %w", err)
	}
	fmt.Printf("tracebench: %d weather turns per mode (2 model steps, 1 tool), sequential, in alternating blocks of %d; one dev server (fast), worker and client in this process\n", n, block)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tracing\tturn p50\tp90\tp99\tprocess CPU per turn\tspans per turn\t")
	for i, m := range modes {
		st := benchkit.Summarize(m.lat, 0)
		sorted := slices.Sorted(slices.Values(m.lat))
		per := "0"
		if i == 1 {
			per = fmt.Sprintf("%.1f", float64(spans.n.Load())/float64(len(m.lat)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", m.name, benchkit.FormatDuration(st.P50), benchkit.FormatDuration(benchkit.Percentile(sorted, 90)), benchkit.FormatDuration(st.P99),
			benchkit.FormatDuration(m.cpu/time.Duration(len(m.lat))), per)
	}
	return tw.Flush()
}
