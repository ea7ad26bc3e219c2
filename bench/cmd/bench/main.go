// Command bench measures agent turns on local Temporal dev servers and prints
// one table: p50/p99 latency of sequential turns, throughput at a fixed
// concurrency, and each row's p50 relative to its baseline row.
//
//	go run ./cmd/bench                      # every scenario on default, fast, fast-sqlite
//	go run ./cmd/bench -configs fast -scenarios 'turn/(regular|local)$'
//	go run ./cmd/bench -sweep               # the dynamic-config investigation of docs/performance.md
//
// Scenarios live in a slice that files of this package append to in init():
// raw.go (the raw Temporal SDK baseline) and eve.go (eve's own turn and park).
// Each server config gets its own dev server (devserver.Start) on free ports.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/payloadstore"
)

// runFunc runs one measured call. A positive duration it returns is recorded
// instead of the call's wall time (see benchkit.Timed); return 0 to use the
// wall time.
type runFunc func(ctx context.Context, i int) (time.Duration, error)

// scenario is one row per server config in the table.
type scenario struct {
	// name is the row's scenario column, e.g. "raw-turn/regular".
	name string
	// configs limits the server configs (by name) the scenario runs on; nil
	// means all of them.
	configs []string
	// baseline names the row this one's p50 is compared with: "scenario" (same
	// config) or "scenario@config"; "" for none.
	baseline string
	// latency measures -n sequential calls after -warmup; throughput measures
	// -total calls at concurrency -c (wall-time based).
	latency, throughput bool
	// extra scenarios run only when -scenarios names them (or with -sweep
	// when listed in sweepScenarios).
	extra bool
	// hops: after the measurements, one more call is made and the histories
	// of the workflows it names (recordHop) are counted (hops.go).
	hops bool
	// calls, when positive, replaces -n, -warmup, -block and -budget for
	// this scenario's latency: one warm-up call (unless noWarmup), then
	// exactly this many sequential timed calls per config (for calls that
	// take seconds).
	calls    int
	noWarmup bool
	// reportOnly scenarios are left out of the main table (a report prints
	// what they measured); a failure still shows there.
	reportOnly bool
	// setup prepares the scenario on env (typically: start a worker on
	// env.Queue(name)) and returns the measured call and a cleanup.
	setup func(ctx context.Context, env *benchEnv) (run runFunc, cleanup func(), err error)
}

// scenarios is filled by init() functions in this package (raw.go, eve.go).
// The table lists rows in the order of serverConfigs, then of this slice.
var scenarios []scenario

// reports print more tables after the main one (conversation.go's, say).
var reports []func(w io.Writer, t *benchkit.Table)

// benchEnv is what a scenario gets for one server config.
type benchEnv struct {
	// Config is the server config's name ("default", "fast", "fast-sqlite", ...).
	Config string
	// Server is the running dev server; Addr and Namespace are its address
	// and namespace (what TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE would be).
	Server    *devserver.Server
	Addr      string
	Namespace string
	// Client is connected to Server; scenarios may share it or Dial their own.
	Client client.Client
	// Store is the payload store Client (and Server.Dial's clients) offload
	// to; give it to agents. It counts the bytes written.
	Store *payloadstore.Counting
	// TaskQueue is a base name unique to this config and run; use Queue(name)
	// to derive one per scenario.
	TaskQueue string
	// WorkerOptions are the options scenarios should start their workers with
	// (the sweep varies them).
	WorkerOptions worker.Options
	// Sweep is set in -sweep runs.
	Sweep bool
}

// Queue returns a task queue for one scenario in this env.
func (e *benchEnv) Queue(name string) string {
	return e.TaskQueue + "-" + regexp.MustCompile(`[^a-zA-Z0-9_.-]+`).ReplaceAllString(name, "_")
}

// serverConfig is one dev server the scenarios run against.
type serverConfig struct {
	name string
	// tuning and dynamic config (ExtraArgs) for the server.
	tuning    devserver.Tuning
	extraArgs []string
	// sqlite keeps state in a file in a temp dir instead of memory.
	sqlite bool
	// workerOptions for the scenarios' workers; zero = SDK defaults.
	workerOptions worker.Options
	// desc is printed in the legend.
	desc string
}

// eveWorkerOptions poll as eve's workers do (internal/workerhost): with the
// SDK's default pollers, a new session's first workflow task can wait
// behind many cached ones for a long poll (an Update-with-Start timed out
// after 60 s in a throughput run).
var eveWorkerOptions = worker.Options{
	WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
}

// The workers of these configs, raw and eve alike, poll as eve's do.
var defaultConfigs = []serverConfig{
	{name: "default", tuning: devserver.TuningDefault, workerOptions: eveWorkerOptions, desc: "dev server defaults, in memory"},
	{name: "fast", tuning: devserver.TuningFast, workerOptions: eveWorkerOptions, desc: "devserver.TuningFast (eve's default), in memory"},
	{name: "fast-sqlite", tuning: devserver.TuningFast, sqlite: true, workerOptions: eveWorkerOptions, desc: "devserver.TuningFast, SQLite file (WAL, synchronous=normal)"},
	// Not run unless named in -configs:
	{name: "default-sqlite", tuning: devserver.TuningDefault, sqlite: true, workerOptions: eveWorkerOptions, desc: "dev server defaults, SQLite file"},
}

var defaultConfigNames = []string{"default", "fast", "fast-sqlite"}

type flags struct {
	n, warmup, concurrency, total int
	budget, tbudget               time.Duration
	configs                       string
	scenarios                     *regexp.Regexp
	sweep                         bool
	list                          bool
	serverLog                     bool
	cpu                           bool
	bursts                        int
	freshServers                  bool
	interleave                    bool
	block, settle                 int
	dc                            multiFlag
	store                         string
	storeDelay                    time.Duration
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var f flags
	var scen string
	flag.IntVar(&f.n, "n", 200, "sequential calls per latency measurement")
	flag.IntVar(&f.warmup, "warmup", 10, "untimed calls before each latency measurement")
	flag.IntVar(&f.concurrency, "c", 50, "concurrency of the throughput measurement")
	flag.IntVar(&f.total, "total", 300, "calls per throughput measurement")
	flag.DurationVar(&f.budget, "budget", 7*time.Second, "time budget per config for a latency measurement (at least 30 samples are taken)")
	flag.DurationVar(&f.tbudget, "tbudget", 8*time.Second, "time budget per config for a throughput measurement (0: none)")
	flag.StringVar(&f.configs, "configs", strings.Join(defaultConfigNames, ","), "server configs to run, comma-separated (known: "+configNames(defaultConfigs)+")")
	flag.StringVar(&scen, "scenarios", "", "regexp selecting scenarios by name (default: all but extras)")
	flag.BoolVar(&f.sweep, "sweep", false, "run the dynamic-config and worker-option sweep of docs/performance.md instead")
	flag.BoolVar(&f.list, "list", false, "list scenarios and configs and exit")
	flag.BoolVar(&f.serverLog, "server-log", false, "pass the dev servers' stderr through")
	flag.IntVar(&f.block, "block", 10, "sequential calls per config before moving to the next config")
	flag.IntVar(&f.settle, "settle", 3, "untimed calls at the start of each block (see run.go)")
	flag.BoolVar(&f.freshServers, "fresh-servers", true, "start new dev servers for each scenario, so no row runs on what an earlier one left (false: one set of servers for the whole run)")
	flag.IntVar(&f.bursts, "bursts", 1, "split each throughput measurement into this many bursts, alternating between configs")
	flag.BoolVar(&f.interleave, "interleave", false, "set every selected scenario up at once, each on its own servers, and alternate the throughput bursts between scenarios too: the ratio of two rows is then measured under the same load (latency still runs one scenario after another)")
	flag.BoolVar(&f.cpu, "cpu", false, "note CPU time per call (dev server, and this process) during the throughput run (Linux)")
	flag.Var(&f.dc, "dc", "extra dynamic config KEY=VALUE for every server (repeatable)")
	flag.StringVar(&f.store, "store", "file", "payload store of clients and agents: file (eve's default, fsync'ed files) or mem (in this process)")
	flag.DurationVar(&f.storeDelay, "store-delay", 0, "added to each payload-store call (a remote store's round trip)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (workers, clients, in-process API servers) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			fatalf("-cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fatalf("-cpuprofile: %v", err)
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	if scen != "" {
		re, err := regexp.Compile(scen)
		if err != nil {
			fatalf("-scenarios: %v", err)
		}
		f.scenarios = re
	}

	if f.list {
		for _, c := range allConfigs() {
			fmt.Printf("config   %-22s %s\n", c.name, c.desc)
		}
		for _, s := range orderScenarios(scenarios) {
			extra := ""
			if s.extra {
				extra = " (extra)"
			}
			fmt.Printf("scenario %s%s\n", s.name, extra)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	configs, err := pickConfigs(f)
	if err != nil {
		fatalf("%v", err)
	}
	selected := pickScenarios(f)
	if len(selected) == 0 {
		fatalf("no scenario selected")
	}

	fmt.Fprintf(os.Stderr, "bench: %d cores, %s, Temporal CLI %s (dev server v1.29.1), -n %d -warmup %d -c %d -total %d -store %s -store-delay %s\n",
		runtime.NumCPU(), runtime.Version(), devserver.PinnedCLIVersion, f.n, f.warmup, f.concurrency, f.total, f.store, f.storeDelay)
	began := time.Now()
	table := run(ctx, f, configs, selected)

	fmt.Println()
	_ = table.Fprint(os.Stdout)
	for _, report := range reports {
		report(os.Stdout, table)
	}
	fmt.Println()
	fmt.Println("configs:")
	for _, cfg := range configs {
		fmt.Printf("  %-22s %s\n", cfg.name, cfg.desc)
	}
	if !f.sweep {
		fmt.Println("  workers (raw and eve) poll with autoscaling pollers, as eve's workers do")
	}
	fmt.Printf("p50/p99: back-to-back sequential calls, in blocks of %d (after %d untimed) alternating between configs;\n"+
		"  park rows time the Update sent → turn result. turns/s: %d calls (or %s) at concurrency %d, in %d\n"+
		"  alternating bursts per config. vs baseline: ratios of p50 and turns/s to the named row.\n",
		f.block, f.settle, f.total, f.tbudget, f.concurrency, f.bursts)
	fmt.Printf("took %s\n", time.Since(began).Round(time.Second))
}

func allConfigs() []serverConfig { return append(slices.Clone(defaultConfigs), sweepConfigs()...) }

func configNames(cs []serverConfig) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	return strings.Join(names, ",")
}

func pickConfigs(f flags) ([]serverConfig, error) {
	if f.sweep && f.configs == strings.Join(defaultConfigNames, ",") {
		return sweepConfigs(), nil
	}
	all := allConfigs()
	var out []serverConfig
	for _, name := range strings.Split(f.configs, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(c serverConfig) bool { return c.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown config %q (known: %s)", name, configNames(all))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func pickScenarios(f flags) []scenario {
	var out []scenario
	for _, s := range scenarios {
		switch {
		case f.scenarios != nil:
			if !f.scenarios.MatchString(s.name) {
				continue
			}
		case f.sweep:
			if !slices.Contains(sweepScenarios, s.name) {
				continue
			}
		case s.extra:
			continue
		}
		out = append(out, s)
	}
	out = orderScenarios(out)
	if f.sweep {
		// The sweep's configs are not listed in the scenarios' configs.
		for i := range out {
			out[i].configs = nil
		}
	}
	return out
}

// orderScenarios puts the raw-SDK baseline rows ("raw-..." scenarios) first,
// whatever order the init functions of this package ran in, and otherwise
// keeps the order of the scenarios slice.
func orderScenarios(in []scenario) []scenario {
	out := slices.Clone(in)
	raw := func(s scenario) bool { return strings.HasPrefix(s.name, "raw-") }
	slices.SortStableFunc(out, func(a, b scenario) int {
		switch {
		case raw(a) && !raw(b):
			return -1
		case !raw(a) && raw(b):
			return 1
		}
		return 0
	})
	return out
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(2)
}
