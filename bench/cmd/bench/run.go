package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/payloadstore"
)

// The bench runs every server config at once and interleaves the
// measurements: sequential latency calls go in blocks (-block) round-robin
// over the configs, and throughput runs in alternating bursts (-bursts). On a
// shared or noisy machine, load changes then hit all configs alike, so the
// rows stay comparable.
//
// Sequential calls measure the back-to-back steady state: the history
// service's queue readers are rate limited by token buckets (burst = rate), so
// a server that sat idle answers its first few calls faster. Each block
// therefore starts with -settle untimed calls. -block 1 -settle 0 measures
// the opposite, "after idle" case (every call finds the buckets full).

// target is one server config, running.
type target struct {
	cfg  serverConfig
	env  *benchEnv
	err  error // the server did not start
	stop func()
}

// active is one scenario set up on one target.
type active struct {
	t       *target
	s       scenario
	run     runFunc
	cleanup func()
	row     benchkit.Row
	lat     []time.Duration
	failed  bool
	// throughput accumulators
	n                  int     // calls completed
	rated              float64 // calls completed within the measured windows
	wall               time.Duration
	cpuServer, cpuSelf time.Duration
	cpuOK              bool
}

func run(ctx context.Context, f flags, configs []serverConfig, selected []scenario) *benchkit.Table {
	if f.interleave {
		return runInterleaved(ctx, f, configs, selected)
	}
	var targets []*target
	stopAll := func() { // stop all servers at once
		var wg sync.WaitGroup
		for _, t := range targets {
			if t.stop != nil {
				wg.Go(t.stop)
			}
		}
		wg.Wait()
		targets = nil
	}
	defer stopAll()
	rows := map[string]map[string]benchkit.Row{} // config → scenario → row
	start := func() {
		for _, cfg := range configs {
			t := startTarget(ctx, f, cfg)
			targets = append(targets, t)
			if rows[cfg.name] == nil {
				rows[cfg.name] = map[string]benchkit.Row{}
			}
			if t.err != nil {
				rows[cfg.name]["(server)"] = benchkit.Row{Scenario: "(server)", Config: cfg.name, Note: t.err.Error()}
			}
		}
	}
	start()
	for i, s := range selected {
		if ctx.Err() != nil {
			break
		}
		if f.freshServers && i > 0 {
			// A scenario leaves its sessions running and its rows in the
			// server's stores; a later one on the same server would pay
			// for them (a +sa row ran 0.8x as fast after two others).
			stopAll()
			start()
		}
		for _, a := range runScenario(ctx, f, s, targets) {
			if s.reportOnly && !a.failed {
				continue
			}
			rows[a.t.cfg.name][s.name] = a.row
		}
	}

	table := &benchkit.Table{}
	for _, t := range targets {
		if r, ok := rows[t.cfg.name]["(server)"]; ok {
			table.Add(r)
		}
		for _, s := range selected {
			if r, ok := rows[t.cfg.name][s.name]; ok {
				table.Add(r)
			}
		}
	}
	return table
}

func startTarget(ctx context.Context, f flags, cfg serverConfig) *target {
	t := &target{cfg: cfg}
	opts := devserver.Options{Tuning: cfg.tuning, ExtraArgs: slices.Clone(cfg.extraArgs)}
	for _, kv := range f.dc {
		opts.ExtraArgs = append(opts.ExtraArgs, "--dynamic-config-value", kv)
	}
	if f.serverLog {
		opts.Stderr = os.Stderr
	}
	dir, err := os.MkdirTemp("", "eve-bench-")
	if err != nil {
		t.err = err
		return t
	}
	if cfg.sqlite {
		opts.DBFile = filepath.Join(dir, "temporal.db")
	}
	// Every client and agent of this target offloads to one counting store.
	base, err := openStore(ctx, f, filepath.Join(dir, "payloads"))
	if err != nil {
		os.RemoveAll(dir)
		t.err = err
		return t
	}
	store := payloadstore.NewCounting(base)
	opts.PayloadStore = store
	t0 := time.Now()
	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		t.err = err
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "bench: config %s: %v\n", cfg.name, err)
		return t
	}
	// Errors only: stopping a scenario's worker logs poll warnings by design.
	c, err := srv.Dial(client.Options{Logger: tlog.NewStructuredLogger(
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))})
	if err != nil {
		_ = srv.Stop()
		t.err = err
		return t
	}
	t.stop = func() {
		c.Close()
		_ = srv.Stop()
		os.RemoveAll(dir)
	}
	t.env = &benchEnv{
		Config:        cfg.name,
		Server:        srv,
		Addr:          srv.Addr,
		Namespace:     srv.Namespace,
		Client:        c,
		Store:         store,
		TaskQueue:     fmt.Sprintf("bench-%s-%d", cfg.name, time.Now().UnixNano()),
		WorkerOptions: cfg.workerOptions,
		Sweep:         f.sweep,
	}
	fmt.Fprintf(os.Stderr, "bench: config %-20s server %s up in %s\n", cfg.name, srv.Addr, time.Since(t0).Round(time.Millisecond))
	return t
}

func runScenario(ctx context.Context, f flags, s scenario, targets []*target) []*active {
	as := setupScenario(ctx, s, targets)
	defer cleanupScenario(as)
	measureLatency(ctx, f, s, as)
	if s.throughput {
		bursts := max(f.bursts, 1)
		next := 1 << 20
		for b := 0; b < bursts && ctx.Err() == nil; b++ {
			for _, a := range as {
				throughputBurst(ctx, f, a, b, &next)
			}
		}
		throughputRows(f, as)
	}
	reportScenario(ctx, s, as)
	return as
}

// runInterleaved is run with -interleave: every scenario is set up at
// once, each on its own servers, and the throughput bursts alternate
// between the scenarios as well as the configs. A ratio between two rows
// (eve-turn/regular against raw-session/regular) is then measured under
// the same load, which moves on a shared machine from one minute to the
// next. Latency runs scenario by scenario, the others idle meanwhile.
func runInterleaved(ctx context.Context, f flags, configs []serverConfig, selected []scenario) *benchkit.Table {
	type group struct {
		s       scenario
		targets []*target
		as      []*active
	}
	var groups []*group
	defer func() {
		var wg sync.WaitGroup
		for _, g := range groups {
			cleanupScenario(g.as)
			for _, t := range g.targets {
				if t.stop != nil {
					wg.Go(t.stop)
				}
			}
		}
		wg.Wait()
	}()
	table := &benchkit.Table{}
	for _, s := range selected {
		if ctx.Err() != nil {
			break
		}
		g := &group{s: s}
		for _, cfg := range configs {
			t := startTarget(ctx, f, cfg)
			g.targets = append(g.targets, t)
			if t.err != nil {
				table.Add(benchkit.Row{Scenario: "(server)", Config: cfg.name, Note: t.err.Error()})
			}
		}
		g.as = setupScenario(ctx, s, g.targets)
		groups = append(groups, g)
	}
	for _, g := range groups {
		measureLatency(ctx, f, g.s, g.as)
	}
	bursts := max(f.bursts, 1)
	next := 1 << 20
	for b := 0; b < bursts && ctx.Err() == nil; b++ {
		for _, g := range groups {
			if !g.s.throughput {
				continue
			}
			for _, a := range g.as {
				throughputBurst(ctx, f, a, b, &next)
			}
		}
	}
	for _, g := range groups {
		if g.s.throughput {
			throughputRows(f, g.as)
		}
	}
	for _, cfg := range configs {
		for _, g := range groups {
			for _, a := range g.as {
				if a.t.cfg.name == cfg.name && (!g.s.reportOnly || a.failed) {
					table.Add(a.row)
				}
			}
		}
	}
	for _, g := range groups {
		reportScenario(ctx, g.s, g.as)
	}
	return table
}

// setupScenario sets s up on each of its targets.
func setupScenario(ctx context.Context, s scenario, targets []*target) []*active {
	var as []*active
	for _, t := range targets {
		if t.err != nil || (s.configs != nil && !slices.Contains(s.configs, t.cfg.name)) {
			continue
		}
		a := &active{t: t, row: benchkit.Row{Scenario: s.name, Config: t.cfg.name, Baseline: s.baseline}, s: s}
		run, cleanup, err := s.setup(ctx, t.env)
		if err != nil {
			a.row.Note = "setup: " + err.Error()
			a.failed = true
		}
		a.run, a.cleanup = run, cleanup
		as = append(as, a)
	}
	return as
}

// cleanupScenario stops a scenario's workers.
func cleanupScenario(as []*active) {
	for _, a := range as {
		if a.cleanup != nil {
			a.cleanup()
			a.cleanup = nil
		}
	}
	// The SDK's sticky cache is one per process: without this, the
	// next scenario's workers would share it with every session this
	// one left running, and pay their GC and eviction work.
	worker.PurgeStickyWorkflowCache()
}

// call makes one call of a's scenario.
func (a *active) call(ctx context.Context, i int) (time.Duration, error) {
	timeout := 60 * time.Second
	if a.s.calls > 0 {
		timeout = 10 * time.Minute // a call may be a whole burst
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	d, err := a.run(cctx, i)
	if d <= 0 {
		d = time.Since(t0)
	}
	return d, err
}

func (a *active) fail(what string, err error) {
	a.failed = true
	a.row.Note = strings.TrimSpace(a.row.Note + " " + what + ": " + err.Error())
}

// measureLatency times s's sequential calls on each of its targets.
func measureLatency(ctx context.Context, f flags, s scenario, as []*active) {
	if s.latency && s.calls > 0 {
		// Fixed count: one warm-up, then the calls, one config after another.
		for _, a := range as {
			first := 0
			if s.noWarmup {
				first = 1
			}
			for i := first; i <= s.calls && !a.failed; i++ {
				d, err := a.call(ctx, i)
				if err != nil {
					a.fail("latency", err)
					break
				}
				if i > 0 {
					a.lat = append(a.lat, d)
				}
			}
			a.row.Latency = benchkit.Summarize(a.lat, 0)
		}
	}
	if s.latency && s.calls <= 0 {
		for _, a := range as {
			for i := 0; i < f.warmup && !a.failed; i++ {
				if _, err := a.call(ctx, i); err != nil {
					a.fail("warm-up", err)
				}
			}
		}
		live := 0
		for _, a := range as {
			if !a.failed {
				live++
			}
		}
		// Rounds of blocks: per config, -settle untimed calls (so a block
		// starts in the back-to-back steady state, not with rate-limit
		// tokens saved up while the other configs ran), then -block timed
		// calls; then the next config.
		budget := f.budget * time.Duration(max(live, 1))
		block := max(f.block, 1)
		start := time.Now()
		i := f.warmup
		for done := 0; done < f.n && ctx.Err() == nil; done += block {
			if done >= 30 && time.Since(start) > budget {
				break
			}
			for _, a := range as {
				for k := 0; k < f.settle && !a.failed; k++ {
					if _, err := a.call(ctx, i); err != nil {
						a.fail("latency", err)
					}
					i++
				}
				for k := 0; k < min(block, f.n-done) && !a.failed; k++ {
					d, err := a.call(ctx, i)
					i++
					if err != nil {
						a.fail("latency", err)
						break
					}
					a.lat = append(a.lat, d)
				}
			}
		}
		for _, a := range as {
			a.row.Latency = benchkit.Summarize(a.lat, 0)
			if !a.failed && len(a.lat) < f.n {
				a.row.Note = strings.TrimSpace(a.row.Note + fmt.Sprintf(" n=%d (budget)", len(a.lat)))
			}
		}
	}
}

// throughputBurst runs burst b of a's throughput measurement: its share of
// -total calls at -c, within its share of -tbudget. next numbers the calls.
func throughputBurst(ctx context.Context, f flags, a *active, b int, next *int) {
	if a.failed || ctx.Err() != nil {
		return
	}
	bursts := max(f.bursts, 1)
	per := f.total / bursts
	if b == bursts-1 {
		per = f.total - per*(bursts-1)
	}
	cpu := benchkit.StartCPU(a.t.env.Server.PID())
	base := *next
	st, err := benchkit.ThroughputFor(ctx, f.concurrency, per, f.tbudget/time.Duration(bursts), func(ctx context.Context, i int) error {
		_, err := a.call(ctx, base+i)
		return err
	})
	*next += per
	if err != nil {
		a.fail("throughput", err)
		return
	}
	a.n += st.N
	a.wall += st.Wall
	a.rated += st.PerSec * st.Wall.Seconds()
	srv, self, ok := cpu.Delta()
	a.cpuServer += srv
	a.cpuSelf += self
	a.cpuOK = ok && (b == 0 || a.cpuOK)
}

// throughputRows writes the bursts' totals into the rows.
func throughputRows(f flags, as []*active) {
	for _, a := range as {
		if a.n > 0 && a.wall > 0 {
			a.row.Throughput = benchkit.Stats{N: a.n, PerSec: a.rated / a.wall.Seconds(), Wall: a.wall}
			if a.n < f.total && !a.failed {
				a.row.Note = strings.TrimSpace(a.row.Note + fmt.Sprintf(" turns/s from %d calls (budget)", a.n))
			}
			if f.cpu && a.cpuOK && !a.failed {
				ms := func(d time.Duration) string {
					return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)/float64(a.n))
				}
				a.row.Note = strings.TrimSpace(a.row.Note + " cpu ms/turn: server " + ms(a.cpuServer) + " + worker&client " + ms(a.cpuSelf))
			}
		}
	}
}

// reportScenario counts one call's history (hops) and prints the rows.
func reportScenario(ctx context.Context, s scenario, as []*active) {
	for _, a := range as {
		measureHops(ctx, a, s)
	}
	for _, a := range as {
		l := a.row.Latency
		fmt.Fprintf(os.Stderr, "bench: %-30s %-20s n=%d p50=%s p99=%s | %.1f/s %s\n", s.name, a.t.cfg.name,
			l.N, benchkit.FormatDuration(l.P50), benchkit.FormatDuration(l.P99), a.row.Throughput.PerSec, a.row.Note)
	}
}
