package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// runTasks (-tasks N) measures sessions that each hold a working task
// (tools.AsTask, docs/tasks.md) beside sessions parked on an approval, in
// one process on one dev server: N sessions park on an approval, then N
// more each start a task whose work runs (an activity on this worker that
// heartbeats every second, HeartbeatTimeout hb, until released) while
// the turn is held for it (turn.waiting on tasks). After each phase it
// reports the worker's heap, RSS and goroutines, and the CPU the dev
// server and this process spend over idle seconds (nothing sent, the
// tasks working). Then it releases every task and times until all N
// turns have ended.
func runTasks(n, cacheSize, conc int, idle, hb time.Duration) error {
	ctx := context.Background()
	srv, c, stop, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer stop()
	m, err := scripted.Parse([]byte(`rules:
  - match: refund
    steps:
      - calls: [{tool: refund}]
      - reply: done
  - match: work
    steps:
      - calls: [{tool: work}]
      - reply: started
      - reply: "{{task.work.ok}}"
`))
	if err != nil {
		return err
	}
	release := make(chan struct{})
	var started, finished atomic.Int64
	work := &tools.Tool{Name: "work", Description: "Work until released.", InputSchema: json.RawMessage(`{"type":"object"}`),
		HeartbeatTimeout: hb, Timeout: time.Hour,
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			started.Add(1)
			defer finished.Add(1)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				if hb > 0 {
					ctx.Heartbeat()
				}
				select {
				case <-release:
					return map[string]bool{"ok": true}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-tick.C:
				}
			}
		}}
	reg := tools.NewRegistry()
	reg.MustRegister(&tools.Tool{Name: "refund", Description: "Refund.", InputSchema: json.RawMessage(`{"type":"object"}`), Approval: approval.Always(),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil }},
		tools.AsTask(work, tools.Task{}))
	worker.SetStickyWorkflowCacheSize(cacheSize)
	tq := fmt.Sprintf("parkbench-tasks-%d", time.Now().UnixNano())
	wo := workerOptions()
	wo.MaxConcurrentActivityExecutionSize = n + 100 // every task's work runs at once
	w := worker.New(c, tq, wo)
	if err := agent.Register(w, &agent.Agent{Name: "park", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: srv.PayloadStore(), Client: c}); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	svc := &sessions.Service{Client: c, TaskQueue: tq}

	idleCPU := func() string {
		m := benchkit.StartCPU(srv.PID())
		time.Sleep(idle)
		s, me, ok := m.Delta()
		if !ok {
			return "-"
		}
		pct := func(d time.Duration) float64 { return 100 * d.Seconds() / idle.Seconds() }
		return fmt.Sprintf("%.1f%% + %.1f%%", pct(s), pct(me))
	}
	fmt.Printf("worker workflow cache: %d workflows; idle CPU measured over %s (one core = 100%%); task heartbeat timeout %s (0: no heartbeats)\n\n", cacheSize, idle, hb)
	fmt.Printf("%-44s %-12s %-12s %-11s %-20s %s\n", "state", "heap in use", "RSS", "goroutines", "per session (heap)", "idle CPU: server + worker&client")
	base := measure()
	fmt.Printf("%-44s %-12s %-12s %-11d %-20s %s\n", "nothing", mib(base.heap), mib(base.rss), base.goroutines, "-", idleCPU())

	each := func(send func(ctx context.Context) (string, error)) ([]string, error) {
		var (
			ids      []string
			mu       sync.Mutex
			next     atomic.Int64
			firstErr atomic.Value
			wg       sync.WaitGroup
		)
		for g := 0; g < conc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
					id, err := send(cctx)
					cancel()
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if e := firstErr.Load(); e != nil {
			return nil, e.(error)
		}
		return ids, nil
	}

	// Phase 1: N sessions parked on an approval.
	if _, err := each(func(ctx context.Context) (string, error) {
		res, err := svc.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "refund", Wait: true})
		if err == nil && (res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting) {
			err = fmt.Errorf("not parked: %+v", res.Outcome)
		}
		return res.SessionID, err
	}); err != nil {
		return err
	}
	parked := measure()
	fmt.Printf("%-44s %-12s %-12s %-11d %-20s %s\n", fmt.Sprintf("%d parked on an approval", n), mib(parked.heap), mib(parked.rss), parked.goroutines,
		perSession(parked.heap, base.heap, n), idleCPU())

	// Phase 2: N more sessions, each turn held for its working task.
	t0 := time.Now()
	ids, err := each(func(ctx context.Context) (string, error) {
		res, err := svc.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "work"})
		return res.SessionID, err
	})
	if err != nil {
		return err
	}
	for started.Load() < int64(n) {
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("only %d of %d tasks started", started.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every turn has said "started" and is held (turn.waiting on tasks):
	// check the last one started, then let the rest settle.
	if err := waitEvent(ctx, svc, ids[len(ids)-1], protocol.TurnWaiting); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	working := measure()
	fmt.Printf("%-44s %-12s %-12s %-11d %-20s %s\n", fmt.Sprintf("+ %d each with a working task (turn held)", n), mib(working.heap), mib(working.rss), working.goroutines,
		perSession(working.heap, parked.heap, n), idleCPU())

	// Release: every task completes, every held turn reads its result and ends.
	t1 := time.Now()
	close(release)
	for _, id := range ids {
		if err := waitEvent(ctx, svc, id, protocol.TurnCompleted); err != nil {
			return err
		}
	}
	fmt.Printf("\nreleased: all %d tasks settled and their %d turns ended in %s (%d task runs finished)\n", n, n, time.Since(t1).Round(time.Millisecond), finished.Load())
	return nil
}

func perSession(now, before uint64, n int) string {
	if now <= before {
		return "-"
	}
	return fmt.Sprintf("%.1f KiB", float64(now-before)/1024/float64(n))
}

// waitEvent waits (bounded) until the session has recorded an event of type typ.
func waitEvent(ctx context.Context, svc *sessions.Service, id, typ string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		evs, err := svc.Events(ctx, id, 0)
		if err == nil {
			for _, e := range evs {
				if e.Type == typ {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: no %s within 3m (%v)", id, typ, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
