package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/bench/rawsdk"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// A burst of session creations: -burst creates at concurrency -burst-c,
// each a new session with its first message, through eve's HTTP API (POST
// /eve/v1/session, an in-process API server with the worker in this
// process), next to the raw SDK starting as many workflows (an all-local
// raw turn each, so each start also brings work for the worker). eve must
// answer only 2xx, 429 or 503 (the latter two with Retry-After): never
// another 5xx, however saturated the worker is. Each burst then waits
// (untimed) until every started turn has finished, so the next scenario
// starts on an idle server. reportCreates prints the results.
var (
	burstTotal = flag.Int("burst", 1000, "session creations per burst (eve-create/http, raw-start/workflow)")
	burstConc  = flag.Int("burst-c", 100, "concurrency of the creation burst")
)

func init() {
	fastOnly := []string{"fast"}
	scenarios = append(scenarios,
		scenario{name: "raw-start/workflow", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: rawStartSetup},
		scenario{name: "eve-create/http", baseline: "raw-start/workflow", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: eveCreateSetup("eve-create/http", false, false)},
		scenario{name: "eve-create/http-update", baseline: "raw-start/workflow", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: eveCreateSetup("eve-create/http-update", true, false)},
		// No worker polls its task queue: what the creates cost alone,
		// without the turns they start competing for the server.
		scenario{name: "eve-create/http-noworker", baseline: "raw-start/workflow", latency: true, calls: 1, noWarmup: true, reportOnly: true, extra: true, configs: fastOnly, setup: eveCreateSetup("eve-create/http-noworker", false, true)},
	)
	reports = append(reports, reportCreates)
}

// burstResult is one timed burst.
type burstResult struct {
	total, conc int
	wall        time.Duration
	ok          int         // 2xx answers (raw: starts without error)
	statuses    map[int]int // HTTP status → count (eve); 0 is a transport error
	noRetry     int         // 429/503 without Retry-After
	answers     []time.Duration
	drained     time.Duration // waiting for the started turns to finish
	drainErr    string
	firstErr    string
}

var (
	burstMu      sync.Mutex
	burstResults = map[string]*burstResult{} // "scenario@config" → the last timed burst
)

// burst runs total calls of fn at concurrency conc; fn reports the HTTP
// status (0 for a transport error; raw: 200 or 0) and whether a 429 or 503
// carried Retry-After.
func burst(ctx context.Context, total, conc int, fn func(ctx context.Context) (status int, retryAfter bool, err error)) *burstResult {
	r := &burstResult{total: total, conc: conc, statuses: map[int]int{}}
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				t0 := time.Now()
				status, retryAfter, err := fn(ctx)
				d := time.Since(t0)
				mu.Lock()
				r.statuses[status]++
				r.answers = append(r.answers, d)
				if status >= 200 && status < 300 {
					r.ok++
				}
				if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && !retryAfter {
					r.noRetry++
				}
				if err != nil && r.firstErr == "" {
					r.firstErr = err.Error()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	slices.Sort(r.answers)
	return r
}

func recordBurst(ctx context.Context, key string, r *burstResult) {
	if hopsRequested(ctx) {
		return // the counted call of -hops is not a burst
	}
	burstMu.Lock()
	burstResults[key] = r
	burstMu.Unlock()
}

func rawStartSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-start")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	rawsdk.RegisterWorker(w)
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		var mu sync.Mutex
		var runs []client.WorkflowRun
		r := burst(ctx, *burstTotal, *burstConc, func(ctx context.Context) (int, bool, error) {
			run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: rawsdk.NextWorkflowID("start"), TaskQueue: tq},
				rawsdk.WorkflowName, rawsdk.TurnInput{Variant: rawsdk.Local, City: "Lisbon"})
			if err != nil {
				return 0, false, err
			}
			mu.Lock()
			runs = append(runs, run)
			mu.Unlock()
			return http.StatusOK, false, nil
		})
		t0 := time.Now()
		for _, run := range runs {
			if err := run.Get(ctx, nil); err != nil {
				r.drainErr = err.Error()
				break
			}
		}
		r.drained = time.Since(t0)
		recordBurst(ctx, "raw-start/workflow@"+env.Config, r)
		if r.ok == 0 {
			return 0, fmt.Errorf("no workflow started: %s", r.firstErr)
		}
		return r.wall, nil
	}, w.Stop, nil
}

// countingModel counts finished steps (one per turn here), so a burst can
// wait for its turns.
type countingModel struct {
	model.Model
	steps atomic.Int64
}

func (m *countingModel) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	res, err := m.Model.Step(ctx, req, stream)
	m.steps.Add(1)
	return res, err
}

// eveCreateSetup: update, the first message by Update-with-Start (an
// API host whose workers may predate eve-first-message); else in the
// start request (sessions.Service.StartWithMessage, as eve's own hosts).
// noWorker: no worker polls (the sessions never run; nothing is drained).
func eveCreateSetup(name string, update, noWorker bool) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		return eveCreate(ctx, env, name, update, noWorker)
	}
}

func eveCreate(ctx context.Context, env *benchEnv, name string, update, noWorker bool) (runFunc, func(), error) {
	sm, err := scripted.Parse([]byte("rules:\n  - match: \".*\"\n    reply: \"ok\"\n"))
	if err != nil {
		return nil, nil, err
	}
	m := &countingModel{Model: sm}
	tq := env.Queue(strings.ReplaceAll(name, "/", "-"))
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: tools.NewRegistry(), LocalModel: true}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
		return nil, nil, err
	}
	if noWorker {
		w = nopWorker{}
	} else if err := w.Start(); err != nil {
		return nil, nil, err
	}
	h, err := api.New(api.Options{Sessions: &sessions.Service{Client: env.Client, TaskQueue: tq, StartWithMessage: !update}})
	if err != nil {
		w.Stop()
		return nil, nil, err
	}
	hs := httptest.NewServer(h)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *burstConc}}
	cleanup := func() { hs.Close(); w.Stop() }
	return func(ctx context.Context, i int) (time.Duration, error) {
		steps0 := m.steps.Load()
		r := burst(ctx, *burstTotal, *burstConc, func(ctx context.Context) (int, bool, error) {
			req, err := http.NewRequestWithContext(ctx, "POST", hs.URL+"/eve/v1/session", strings.NewReader(`{"message":"hello"}`))
			if err != nil {
				return 0, false, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return 0, false, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("Retry-After") != "", nil
		})
		// Every accepted message runs a turn of one model step.
		t0 := time.Now()
		for !noWorker && m.steps.Load()-steps0 < int64(r.ok) {
			if ctx.Err() != nil || time.Since(t0) > 5*time.Minute {
				r.drainErr = fmt.Sprintf("%d of %d turns finished", m.steps.Load()-steps0, r.ok)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		r.drained = time.Since(t0)
		recordBurst(ctx, name+"@"+env.Config, r)
		if r.ok == 0 {
			return 0, errors.New("no session created: " + r.firstErr)
		}
		return r.wall, nil
	}, cleanup, nil
}

// nopWorker stands in for a worker that never started.
type nopWorker struct{ worker.Worker }

func (nopWorker) Stop() {}

// burstBaseline is the raw row a burst row is compared with.
func burstBaseline(scen string) string {
	if strings.Contains(scen, "approve") {
		return "raw-approve/update"
	}
	return "raw-start/workflow"
}

// reportCreates prints the bursts: sessions (or starts) per second and the
// answers' statuses.
func reportCreates(w io.Writer, _ *benchkit.Table) {
	burstMu.Lock()
	defer burstMu.Unlock()
	if len(burstResults) == 0 {
		return
	}
	keys := make([]string, 0, len(burstResults))
	for k := range burstResults {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // raw first, then by config
		ri, rj := strings.HasPrefix(keys[i], "raw-"), strings.HasPrefix(keys[j], "raw-")
		if ri != rj {
			return ri
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "creation burst\tconfig\tcalls\tconcurrency\tcreated/s\tvs raw\tanswer p50\tp99\tmax\tstatuses\tturns drained in\t\n")
	for _, k := range keys {
		r := burstResults[k]
		scen, cfg, _ := strings.Cut(k, "@")
		rate := float64(r.ok) / r.wall.Seconds()
		ratio := ""
		if b, ok := burstResults[burstBaseline(scen)+"@"+cfg]; ok && !strings.HasPrefix(scen, "raw-") && b.ok > 0 {
			ratio = fmt.Sprintf("%.2fx", rate/(float64(b.ok)/b.wall.Seconds()))
			if strings.Contains(scen, "approve/http") {
				ratio += fmt.Sprintf(" (all done %.2fx)", (r.wall+r.drained).Seconds()/(b.wall+b.drained).Seconds())
			}
		}
		var st []string
		codes := make([]int, 0, len(r.statuses))
		for c := range r.statuses {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		for _, c := range codes {
			name := fmt.Sprint(c)
			if c == 0 {
				name = "error"
			}
			if scen == "raw-start/workflow" && c == http.StatusOK {
				name = "started"
			}
			st = append(st, fmt.Sprintf("%s×%d", name, r.statuses[c]))
		}
		if r.noRetry > 0 {
			st = append(st, fmt.Sprintf("(%d without Retry-After)", r.noRetry))
		}
		if r.firstErr != "" {
			st = append(st, "first error: "+r.firstErr)
		}
		drained := benchkit.FormatDuration(r.drained)
		if r.drainErr != "" {
			drained += " (" + r.drainErr + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", scen, cfg, r.total, r.conc, rate, ratio,
			benchkit.FormatDuration(benchkit.Percentile(r.answers, 50)), benchkit.FormatDuration(benchkit.Percentile(r.answers, 99)),
			benchkit.FormatDuration(r.answers[len(r.answers)-1]), strings.Join(st, " "), drained)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "approval burst (eve-approve/http, raw-approve/update): -approvals parked sessions answered at -approvals-c; created/s\n"+
		"  is answers per second (eve: 202 to POST /eve/v1/session/{id} with inputResponses; raw: the respond Update accepted),\n"+
		"  turns drained in: from the last answer until every resumed turn finished; all done: answers + drain against raw.")
	fmt.Fprintln(w, "creation burst: each call a new session with its first message (eve: POST /eve/v1/session through HTTP, answered\n"+
		"  202 once the start with the message is recorded; http-update: by Update-with-Start, once the session's first workflow\n"+
		"  task accepted it; http-noworker: no worker polls; raw: ExecuteWorkflow of an all-local raw turn). created/s counts\n"+
		"  2xx answers (raw: starts) over the burst's wall time. eve must answer only 2xx, 429 or 503 with Retry-After.")
}
