package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/rawsdk"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Approval throughput (issue 42): -approvals sessions parked on an approval
// (untimed), then every one answered at concurrency -approvals-c: eve
// through its HTTP API (POST /eve/v1/session/{id} with inputResponses, an
// in-process API server that created them over HTTP; "-cold": one that did
// not, as after a restart, so it first asks each session for its turn),
// the raw SDK by its park variant's "respond" Update. Timed from the first
// answer until every resumed turn has finished; printed in the creation
// burst table (its "created/s" column is answers per second there).
var (
	approvalsTotal = flag.Int("approvals", 100, "parked sessions answered per approval burst (eve-approve/http, raw-approve/update)")
	approvalsConc  = flag.Int("approvals-c", 8, "concurrency of the approval burst")
)

func init() {
	fastOnly := []string{"fast"}
	scenarios = append(scenarios,
		scenario{name: "raw-approve/update", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: rawApproveSetup},
		scenario{name: "eve-approve/http", baseline: "raw-approve/update", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: eveApproveSetup(false)},
		scenario{name: "eve-approve/http-cold", baseline: "raw-approve/update", latency: true, calls: 1, noWarmup: true, reportOnly: true, configs: fastOnly, setup: eveApproveSetup(true)},
	)
}

// parkAll runs park n times at concurrency 8 (untimed).
func parkAll(ctx context.Context, n int, park func(ctx context.Context) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan struct{}, n)
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				if err := park(ctx); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func rawApproveSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-approve")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	rawsdk.RegisterWorker(w)
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		var mu sync.Mutex
		var runs []client.WorkflowRun
		if err := parkAll(ctx, *approvalsTotal, func(ctx context.Context) error {
			run, err := rawsdk.StartParked(ctx, env.Client, tq, rawsdk.Regular)
			mu.Lock()
			if run != nil {
				runs = append(runs, run)
			}
			mu.Unlock()
			return err
		}); err != nil {
			return 0, err
		}
		queue := make(chan client.WorkflowRun, len(runs))
		for _, r := range runs {
			queue <- r
		}
		close(queue)
		r := burst(ctx, len(runs), *approvalsConc, func(ctx context.Context) (int, bool, error) {
			if err := rawsdk.Answer(ctx, env.Client, <-queue); err != nil {
				return 0, false, err
			}
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
		recordBurst(ctx, "raw-approve/update@"+env.Config, r)
		if r.ok == 0 {
			return 0, fmt.Errorf("no approval answered: %s", r.firstErr)
		}
		return r.wall + r.drained, nil
	}, w.Stop, nil
}

func eveApproveSetup(cold bool) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) { return eveApprove(ctx, env, cold) }
}

func eveApprove(ctx context.Context, env *benchEnv, cold bool) (runFunc, func(), error) {
	name := "eve-approve/http"
	if cold {
		name += "-cold"
	}
	sm, err := scripted.Parse([]byte(benchRules))
	if err != nil {
		return nil, nil, err
	}
	m := &countingModel{Model: sm}
	reg := tools.NewRegistry()
	if err := reg.Register(weatherTool(false, true)); err != nil {
		return nil, nil, err
	}
	tq := env.Queue(strings.ReplaceAll(name, "/", "-"))
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
	h, err := api.New(api.Options{Sessions: &sessions.Service{Client: env.Client, TaskQueue: tq}})
	if err != nil {
		w.Stop()
		return nil, nil, err
	}
	hs := httptest.NewServer(h)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *approvalsConc}}
	cleanup := func() { hs.Close(); w.Stop() }
	return func(ctx context.Context, i int) (time.Duration, error) {
		var mu sync.Mutex
		var ids []string
		if err := parkAll(ctx, *approvalsTotal, func(ctx context.Context) error {
			id := ""
			if cold {
				res, err := svc.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "weather", Wait: true})
				if err != nil {
					return err
				}
				if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
					return fmt.Errorf("park outcome %+v", res.Outcome)
				}
				id = res.SessionID
			} else {
				var err error
				if id, err = httpCreate(ctx, hc, hs.URL); err != nil {
					return err
				}
				if err := waitEvent(ctx, svc, id, protocol.TurnWaiting); err != nil {
					return err
				}
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return nil
		}); err != nil {
			return 0, err
		}
		queue := make(chan string, len(ids))
		for _, id := range ids {
			queue <- id
		}
		close(queue)
		steps0 := m.steps.Load()
		r := burst(ctx, len(ids), *approvalsConc, func(ctx context.Context) (int, bool, error) {
			body := `{"inputResponses":[{"requestId":"apr_call_1_0","optionId":"approve"}]}`
			req, err := http.NewRequestWithContext(ctx, "POST", hs.URL+"/eve/v1/session/"+<-queue, strings.NewReader(body))
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
		// Every answered turn runs its tool and one more model step.
		t0 := time.Now()
		for m.steps.Load()-steps0 < int64(r.ok) {
			if ctx.Err() != nil || time.Since(t0) > 5*time.Minute {
				r.drainErr = fmt.Sprintf("%d of %d turns finished", m.steps.Load()-steps0, r.ok)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		r.drained = time.Since(t0)
		recordBurst(ctx, name+"@"+env.Config, r)
		if r.ok == 0 {
			return 0, errors.New("no approval answered: " + r.firstErr)
		}
		return r.wall + r.drained, nil
	}, cleanup, nil
}

// httpCreate creates a session with its first message over HTTP.
func httpCreate(ctx context.Context, hc *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/eve/v1/session", strings.NewReader(`{"message":"weather"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var acc protocol.Accepted
	if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("create: %d %v", resp.StatusCode, err)
	}
	return acc.SessionID, nil
}

// waitEvent waits (bounded) until a session's last event is of type typ.
func waitEvent(ctx context.Context, svc *sessions.Service, id, typ string) error {
	return waitEventEvery(ctx, svc, id, typ, 50*time.Millisecond)
}
