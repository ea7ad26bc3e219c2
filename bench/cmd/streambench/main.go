// Command streambench measures what open streams cost: N follow streams on
// N idle sessions, through one API server, with change notifications (push:
// the in-process bus, as in eve dev; pg: PostgreSQL LISTEN/NOTIFY between
// two API servers and the worker, as EVE_NOTIFY does across processes) or
// polling (no bus: one reader per session). For each it prints the CPU of
// this process (API servers + worker) and of the Temporal dev server while
// the streams idle, the Temporal queries per second they cause, memory, and
// message → stream latency.
//
// The stream clients run in child processes (this binary with -client,
// -per-proc streams each), so the API server holds only its own end of each
// connection. Counts are cumulative: -n 1000,10000 measures 1,000 streams,
// then opens 9,000 more on 9,000 more sessions and measures 10,000.
//
//	go run ./cmd/streambench -n 1000
//	go run ./cmd/streambench -n 1000,10000 -modes push,pg -first-turn=false
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/notify/pgtest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

type options struct {
	counts      []int
	modes       []string
	idle        time.Duration
	samples     int
	perProc     int
	pollMax     int
	pgMax       int
	createConc  int
	firstTurn   bool
	cachedFlows int
	heapProfile string
	pgURL       string
}

func main() {
	clientOf := flag.String("client", "", "internal: run as a stream client of this API server URL (session ids on stdin)")
	counts := flag.String("n", "1000", "open streams (one per idle session); comma-separated counts are measured one after another, cumulatively")
	modes := flag.String("modes", "push,poll", "what to measure, comma-separated: push (change notifications, in-process bus), pg (two API servers and the worker joined by PostgreSQL LISTEN/NOTIFY: messages posted to A, streams on B), poll (no bus)")
	var o options
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "how long the streams idle while CPU and queries are measured")
	flag.IntVar(&o.samples, "samples", 40, "new event → stream latency samples per count")
	flag.IntVar(&o.perProc, "per-proc", 2500, "streams per client process")
	flag.IntVar(&o.pollMax, "poll-max", 1000, "poll mode measures only counts up to this (it costs a query per session per 250 ms)")
	flag.IntVar(&o.pgMax, "pg-max", 1000, "pg mode measures only counts up to this")
	flag.IntVar(&o.createConc, "create-c", 32, "sessions created concurrently")
	flag.BoolVar(&o.firstTurn, "first-turn", true, "give every session one finished turn before its stream opens (false: sessions without a turn, faster to create)")
	flag.IntVar(&o.cachedFlows, "cache", 2000, "worker workflow cache size (eve's default)")
	flag.StringVar(&o.heapProfile, "heapprofile", "", "write this process's heap profile here (and its goroutines to this path + .goroutines) after the last count of the first mode")
	flag.StringVar(&o.pgURL, "pg", "", "PostgreSQL URL for the pg mode (default: start a throwaway cluster, as the tests do)")
	flag.Parse()
	if *clientOf != "" {
		runClient(*clientOf)
		return
	}
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || (len(o.counts) > 0 && n <= o.counts[len(o.counts)-1]) {
			fatal(fmt.Errorf("-n %q: want increasing positive integers", *counts))
		}
		o.counts = append(o.counts, n)
	}
	o.modes = strings.Split(*modes, ",")
	raiseFileLimit()
	if err := run(o); err != nil {
		fatal(err)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return err
	}
	defer srv.Stop()
	if slices.Contains(o.modes, "pg") && o.pgURL == "" {
		url, stop, err := pgtest.Cluster()
		if err != nil {
			// Not every machine has PostgreSQL: measure the rest.
			fmt.Fprintf(os.Stderr, "streambench: pg mode skipped: %v\n", err)
			o.modes = slices.DeleteFunc(o.modes, func(m string) bool { return m == "pg" })
		} else {
			defer stop()
			o.pgURL = url
		}
	}
	worker.SetStickyWorkflowCacheSize(o.cachedFlows)
	var rows []row
	for _, mode := range o.modes {
		r, err := measure(ctx, srv, mode, o)
		rows = append(rows, r...)
		if err != nil {
			printRows(rows)
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	printRows(rows)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\npush: change notifications (in-process bus); pg: two API servers in this process and the worker, joined only\n"+
		"  by PostgreSQL LISTEN/NOTIFY (one connection each), messages posted to A, streams on B; poll: no bus, one reader\n"+
		"  per session polling.\n"+
		"idle: CPU and Temporal queries while every stream idles for %s; eve = this process (API servers + worker);\n"+
		"  the stream clients run in child processes of %d streams (clients CPU: theirs, not eve's).\n"+
		"turns: a message POSTed to one session → its turn.completed on the stream (the turn included); event → stream:\n"+
		"  the turn.completed event's meta.at (the workflow task that recorded it) → its arrival on the stream;\n"+
		"  queries per turn: Temporal queries while those turns ran, per turn (on Temporal Cloud each one is an action).\n"+
		"memory: this process (the worker's workflow cache holds up to %d workflows); heap per new stream: Go heap in use\n"+
		"  after GC with the new streams open, minus before, per new stream. load average: %s",
		o.idle, o.perProc, o.cachedFlows, load)
	return nil
}

type row struct {
	mode                  string
	streams               int
	created               time.Duration // creating this step's new sessions
	newSessions           int
	selfCPU, serverCPU    float64 // % of one core while idle
	clientCPU             float64
	qps                   float64
	qPerTurn              float64 // queries per turn a stream follows
	rss, heap, heapBefore uint64
	p50, p99              time.Duration
	lag50, lag99          time.Duration // event recorded → on the stream
	stacks                uint64
	goroutines            int
	lost                  int64
	openRetries           int // stream opens answered 503 or 429, retried
}

func printRows(rows []row) {
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "idle\tstreams\teve CPU (% of a core)\tTemporal CPU\tqueries/s\tclients CPU\t")
	for _, r := range rows {
		var notes []string
		if r.lost > 0 {
			notes = append(notes, fmt.Sprintf("%d streams lost", r.lost))
		}
		if r.openRetries > 0 {
			notes = append(notes, fmt.Sprintf("%d opens answered 503/429 and retried", r.openRetries))
		}
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%d%s\t%.1f%%\t%.1f%%\t%.1f\t%.1f%%\t\n", r.mode, r.streams, note, r.selfCPU, r.serverCPU, r.qps, r.clientCPU)
	}
	tw.Flush()
	fmt.Println()
	fmt.Fprintln(tw, "turns\tstreams\tmessage → turn.completed p50\tp99\tevent → stream p50\tp99\tqueries per turn\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.1f\t\n", r.mode, r.streams, r.p50, r.p99, r.lag50, r.lag99, r.qPerTurn)
	}
	tw.Flush()
	fmt.Println()
	fmt.Fprintln(tw, "memory\tstreams\teve RSS\theap per new stream\tgoroutine stacks\tgoroutines\tsessions created\t")
	for _, r := range rows {
		per := "-"
		if r.heap > r.heapBefore && r.newSessions > 0 {
			per = fmt.Sprintf("%.1f KiB", float64(r.heap-r.heapBefore)/1024/float64(r.newSessions))
		}
		created := fmt.Sprintf("%d in %s (%.0f/s)", r.newSessions, r.created.Round(time.Second), float64(r.newSessions)/r.created.Seconds())
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t\n", r.mode, r.streams, mib(r.rss), per, mib(r.stacks), r.goroutines, created)
	}
	tw.Flush()
}

const rules = `
rules:
  - match: ".*"
    reply: "ok"
`

// streamSet is the open streams of one mode: the client processes and,
// per session, the delivery ids of the turn.completed events they saw.
// completion is a turn.completed seen on a stream: its delivery id, and how
// long after the event was recorded it arrived (negative: unknown).
type completion struct {
	delivery string
	lag      time.Duration
}

type streamSet struct {
	mu        sync.Mutex
	completed map[string]chan completion
	procs     []*clientProc
	lost      atomic.Int64
}

func (s *streamSet) onLine(kind, session, rest string) {
	switch kind {
	case "done":
		s.mu.Lock()
		ch := s.completed[session]
		s.mu.Unlock()
		dlv, lag, _ := strings.Cut(rest, " ")
		us, err := strconv.ParseInt(lag, 10, 64)
		if err != nil || us < 0 {
			us = -1
		}
		if ch != nil {
			select {
			case ch <- completion{dlv, time.Duration(us) * time.Microsecond}:
			default:
			}
		}
	case "lost":
		if s.lost.Add(1) <= 3 {
			fmt.Fprintf(os.Stderr, "streambench: stream of %s ended: %s\n", session, rest)
		}
	}
}

func (s *streamSet) stop() {
	for _, p := range s.procs {
		p.stop()
	}
}

func measure(ctx context.Context, srv *devserver.Server, mode string, o options) ([]row, error) {
	var queries atomic.Int64
	c, err := srv.Dial(client.Options{Logger: devserver.WarnLogger(), ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(sessions.CountQueries(&queries))}}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tq := "streambench-" + mode
	// The worker's notifier, and the buses of API servers A and B (B only
	// in pg mode: its streams hear the worker through PostgreSQL).
	var workerBus, busA, busB notify.Bus
	switch mode {
	case "push":
		l := notify.NewLocal()
		workerBus, busA = l, l
	case "pg":
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		buses := make([]notify.Bus, 3)
		for i := range buses {
			b, err := notify.OpenPostgres(bctx, o.pgURL, nil)
			if err != nil {
				return nil, fmt.Errorf("PostgreSQL bus: %w", err)
			}
			buses[i] = b
		}
		workerBus, busA, busB = buses[0], buses[1], buses[2]
	case "poll":
	default:
		return nil, fmt.Errorf("unknown mode %q (want push, pg or poll)", mode)
	}
	m, err := scripted.Parse([]byte(rules))
	if err != nil {
		return nil, err
	}
	a := &agent.Agent{Name: "streams", Model: m, Tools: tools.NewRegistry(), LocalModel: true}
	h := agent.Host{Store: srv.PayloadStore(), Client: c}
	if workerBus != nil {
		h.Notifier = workerBus
	}
	// As eve's workers do (internal/workerhost): the SDK's default pollers
	// stall new sessions behind thousands of idle ones.
	w := worker.New(c, tq, worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	})
	if err := agent.Register(w, a, h); err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	// Messages are posted to API server A; streams follow on A, or in pg
	// mode on B.
	serve := func(bus notify.Bus) (*httptest.Server, error) {
		opts := api.Options{Sessions: &sessions.Service{Client: c, TaskQueue: tq}, ServerOptions: api.ServerOptions{MaxStreamsPerPrincipal: -1}, Bus: bus}
		h, err := api.New(opts)
		if err != nil {
			return nil, err
		}
		return httptest.NewServer(h), nil
	}
	hsA, err := serve(busA)
	if err != nil {
		return nil, err
	}
	defer hsA.Close()
	streamURL := hsA.URL
	if mode == "pg" {
		hsB, err := serve(busB)
		if err != nil {
			return nil, err
		}
		defer hsB.Close()
		streamURL = hsB.URL
	}
	svc := &sessions.Service{Client: c, TaskQueue: tq}

	set := &streamSet{completed: map[string]chan completion{}}
	defer set.stop()
	var ids []string
	var rows []row
	for _, n := range o.counts {
		if (mode == "poll" && n > o.pollMax) || (mode == "pg" && n > o.pgMax) {
			break
		}
		// n - len(ids) more sessions, each (with -first-turn) with one
		// finished turn.
		t0 := time.Now()
		more, err := createSessions(ctx, svc, n-len(ids), o.createConc, o.firstTurn)
		if err != nil {
			return rows, fmt.Errorf("create sessions: %w", err)
		}
		r := row{mode: mode, streams: n, newSessions: len(more), created: time.Since(t0)}
		fmt.Fprintf(os.Stderr, "streambench: %s: %d sessions created in %s\n", mode, len(more), r.created.Round(time.Millisecond))
		ids = append(ids, more...)
		set.mu.Lock()
		for _, id := range more {
			set.completed[id] = make(chan completion, 16)
		}
		set.mu.Unlock()
		r.heapBefore = heapInUse()

		// One follow stream per new session, from its tail, in client
		// processes of at most -per-proc streams.
		t1 := time.Now()
		for chunk := range slices.Chunk(more, o.perProc) {
			p, err := startClient(ctx, streamURL, chunk, set.onLine)
			if err != nil {
				return rows, err
			}
			set.procs = append(set.procs, p)
			if err := <-p.ready; err != nil {
				return rows, err
			}
			r.openRetries += p.retries
		}
		fmt.Fprintf(os.Stderr, "streambench: %s: %d streams open (%d opened in %s)\n", mode, n, len(more), time.Since(t1).Round(time.Millisecond))
		// Let the streams settle (their first reads, the fast-poll window).
		time.Sleep(3 * time.Second)

		q0 := queries.Load()
		cpu := benchkit.StartCPU(srv.PID())
		var clients0 time.Duration
		for _, p := range set.procs {
			d, _ := benchkit.CPUTime(p.cmd.Process.Pid)
			clients0 += d
		}
		time.Sleep(o.idle)
		serverCPU, selfCPU, _ := cpu.Delta()
		r.qps = float64(queries.Load()-q0) / o.idle.Seconds()
		var clients time.Duration
		for _, p := range set.procs {
			d, _ := benchkit.CPUTime(p.cmd.Process.Pid)
			clients += d
		}
		pct := func(d time.Duration) float64 { return 100 * d.Seconds() / o.idle.Seconds() }
		r.selfCPU, r.serverCPU, r.clientCPU = pct(selfCPU), pct(serverCPU), pct(clients-clients0)
		r.rss = benchkit.RSS()
		r.heap = heapInUse()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r.stacks, r.goroutines = ms.StackInuse, runtime.NumGoroutine()

		// New event → stream: a message to one session, until its stream
		// shows the turn completed. Sessions spread over all clients.
		var lat, lags []time.Duration
		qTurns := queries.Load()
		for s := range o.samples {
			id := ids[(s*7919)%len(ids)]
			set.mu.Lock()
			ch := set.completed[id]
			set.mu.Unlock()
			start := time.Now()
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			delivery, err := postMessage(sctx, hsA.URL, id, "again")
			if err != nil {
				cancel()
				return rows, err
			}
		wait:
			for {
				select {
				case c := <-ch:
					if c.delivery == delivery {
						if c.lag >= 0 {
							lags = append(lags, c.lag)
						}
						break wait
					}
				case <-sctx.Done():
					cancel()
					return rows, fmt.Errorf("no turn.completed for %s on its stream within a minute", id)
				}
			}
			cancel()
			lat = append(lat, time.Since(start))
		}
		r.qPerTurn = float64(queries.Load()-qTurns) / float64(o.samples)
		slices.Sort(lat)
		slices.Sort(lags)
		r.p50 = benchkit.Percentile(lat, 50).Round(time.Millisecond)
		r.p99 = benchkit.Percentile(lat, 99).Round(time.Millisecond)
		r.lag50 = benchkit.Percentile(lags, 50).Round(100 * time.Microsecond)
		r.lag99 = benchkit.Percentile(lags, 99).Round(100 * time.Microsecond)
		r.lost = set.lost.Load()
		rows = append(rows, r)
		if o.heapProfile != "" && n == o.counts[len(o.counts)-1] && mode == o.modes[0] {
			if err := writeHeapProfile(o.heapProfile); err != nil {
				return rows, err
			}
		}
		fmt.Fprintf(os.Stderr, "streambench: %s %d: eve %.1f%%, Temporal %.1f%%, %.1f queries/s, p50 %s, RSS %s\n",
			mode, n, r.selfCPU, r.serverCPU, r.qps, r.p50, mib(r.rss))
	}
	return rows, nil
}

// postMessage sends a message to a session through an API server and
// returns its delivery id.
func postMessage(ctx context.Context, base, id, text string) (string, error) {
	body, _ := json.Marshal(map[string]string{"message": text})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/eve/v1/session/"+id, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("post a message to %s: %w", id, err)
	}
	defer resp.Body.Close()
	var out struct {
		DeliveryID string `json:"deliveryId"`
		Error      string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode/100 != 2 || out.DeliveryID == "" {
		return "", fmt.Errorf("post a message to %s: %s %s (%v)", id, resp.Status, out.Error, err)
	}
	return out.DeliveryID, nil
}

// createSessions creates n sessions, conc at a time.
func createSessions(ctx context.Context, svc *sessions.Service, n, conc int, firstTurn bool) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				var id string
				var err error
				if firstTurn {
					var res signals.SendResult
					res, err = svc.CreateAndSend(cctx, "", nil, signals.SendRequest{Message: "hello", Wait: true})
					id = res.SessionID
				} else {
					id, err = svc.Create(cctx, "", nil)
				}
				cancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n)) // stop the others
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	return ids, firstErr
}

// heapInUse is the Go heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return err
	}
	g, err := os.Create(path + ".goroutines")
	if err != nil {
		return err
	}
	defer g.Close()
	return pprof.Lookup("goroutine").WriteTo(g, 1)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "streambench:", strings.TrimSpace(err.Error()))
	os.Exit(1)
}
