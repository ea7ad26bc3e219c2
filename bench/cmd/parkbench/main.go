// Command parkbench measures what parked sessions cost a worker: it parks N
// sessions on an approval (each one a session and a turn workflow), then
// reports the worker process's heap, RSS and goroutines with the workflow
// cache bounded, and checks that a parked session still resumes. With
// -anatomy, it shows instead where a park's Temporal CPU goes (anatomy.go).
//
//	go run ./cmd/parkbench -n 1000,10000
//	go run ./cmd/parkbench -anatomy 500
//	go run ./cmd/parkbench -tasks 1000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func main() {
	counts := flag.String("n", "1000,10000", "numbers of parked sessions to measure, comma-separated (cumulative)")
	cache := flag.Int("cache", 2000, "worker workflow cache size (eve's default)")
	conc := flag.Int("c", 32, "sessions parked concurrently")
	flag.BoolVar(&autoscale, "autoscale", true, "autoscaling workflow and activity task pollers, as eve's workers use (false: the SDK's default, 2 each)")
	flag.BoolVar(&dumpEvents, "events", false, "print the history events of one park (session and turn)")
	taskN := flag.Int("tasks", 0, "instead: this many sessions parked on an approval, then as many each with a working task, and what each state costs (tasks.go)")
	idle := flag.Duration("idle", 10*time.Second, "with -tasks: how long idle CPU is measured")
	hb := flag.Duration("task-heartbeat", 10*time.Second, "with -tasks: the working tasks' HeartbeatTimeout (they heartbeat every second, which the SDK throttles to 80% of it); 0: no heartbeats")
	anatomy := flag.Int("anatomy", 0, "instead: park this many raw-SDK workflows of each of the shapes of anatomy.go and show what each piece of a park costs")
	flag.Parse()
	if *taskN > 0 {
		if err := runTasks(*taskN, *cache, *conc, *idle, *hb); err != nil {
			fmt.Fprintln(os.Stderr, "parkbench:", err)
			os.Exit(1)
		}
		return
	}
	if *anatomy > 0 {
		if err := runAnatomy(context.Background(), *anatomy, *conc); err != nil {
			fmt.Fprintln(os.Stderr, "parkbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*counts, *cache, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "parkbench:", err)
		os.Exit(1)
	}
}

var autoscale, dumpEvents bool

// startServer starts a dev server tuned as eve's and dials it; stop ends both.
func startServer(ctx context.Context) (*devserver.Server, client.Client, func(), error) {
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := srv.Dial(client.Options{Logger: devserver.WarnLogger()})
	if err != nil {
		srv.Stop()
		return nil, nil, nil, err
	}
	return srv, c, func() { c.Close(); srv.Stop() }, nil
}

// workerOptions gives workers autoscaling pollers unless -autoscale=false.
func workerOptions() worker.Options {
	var wo worker.Options
	if autoscale {
		wo.WorkflowTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
		wo.ActivityTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
	}
	return wo
}

func run(counts string, cacheSize, conc int) error {
	var targets []int
	for _, s := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-n %q: want positive integers", counts)
		}
		targets = append(targets, n)
	}
	ctx := context.Background()
	srv, c, stop, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer stop()
	m, err := scripted.Parse([]byte("rules:\n  - match: refund\n    steps:\n      - calls: [{tool: refund}]\n      - reply: done\n"))
	if err != nil {
		return err
	}
	reg := tools.NewRegistry()
	reg.MustRegister(&tools.Tool{Name: "refund", Description: "Refund.", InputSchema: json.RawMessage(`{"type":"object"}`), Approval: approval.Always(),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil }})
	worker.SetStickyWorkflowCacheSize(cacheSize)
	tq := fmt.Sprintf("parkbench-%d", time.Now().UnixNano())
	w := worker.New(c, tq, workerOptions())
	if err := agent.Register(w, &agent.Agent{Name: "park", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: srv.PayloadStore(), Client: c}); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	svc := &sessions.Service{Client: c, TaskQueue: tq}

	base := measure()
	fmt.Printf("worker workflow cache: %d workflows (a parked session is 2: session + turn)\n\n", cacheSize)
	fmt.Printf("%-16s %-12s %-12s %-12s %-11s %-20s %s\n", "parked sessions", "heap in use", "RSS", "goroutines", "parked/s", "per session (heap)", "CPU ms per park: server + worker&client")
	fmt.Printf("%-16d %-12s %-12s %-12d %-11s %-20s %s\n", 0, mib(base.heap), mib(base.rss), base.goroutines, "-", "-", "-")
	var ids []string
	var mu sync.Mutex
	parked := 0
	for _, target := range targets {
		start := time.Now()
		cpuMeter := benchkit.StartCPU(srv.PID())
		todo := target - parked
		var next atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for g := 0; g < conc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(todo) {
					var (
						res signals.SendResult
						err error
					)
					// A loaded machine may time a park out; one retry (a
					// new session) keeps the count exact.
					for try := 0; try < 2; try++ {
						cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
						res, err = svc.CreateAndSend(cctx, "", nil, signals.SendRequest{Message: "refund", Wait: true})
						cancel()
						if err == nil {
							break
						}
					}
					if err == nil && (res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting) {
						err = fmt.Errorf("not parked: %+v", res.Outcome)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					ids = append(ids, res.SessionID)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if e := firstErr.Load(); e != nil {
			return e.(error)
		}
		rate := float64(todo) / time.Since(start).Seconds()
		cpu := "-"
		if srvCPU, selfCPU, ok := cpuMeter.Delta(); ok && todo > 0 {
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(todo) }
			cpu = fmt.Sprintf("%.1f + %.1f", ms(srvCPU), ms(selfCPU))
		}
		parked = target
		s := measure()
		per := "-"
		if parked > 0 && s.heap > base.heap {
			per = fmt.Sprintf("%.1f KiB", float64(s.heap-base.heap)/1024/float64(parked))
		}
		fmt.Printf("%-16d %-12s %-12s %-12d %-11.1f %-20s %s\n", parked, mib(s.heap), mib(s.rss), s.goroutines, rate, per, cpu)
	}
	// What one park cost Temporal: the histories of the last session parked
	// (its session and turn workflows, up to the park).
	var each func(string, *historypb.HistoryEvent)
	if dumpEvents {
		fmt.Println("\nevents of one park:")
		each = func(id string, e *historypb.HistoryEvent) {
			fmt.Printf("  %-40s %3d %s%s\n", id, e.GetEventId(), strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_"), eventDetail(e))
		}
	}
	h, err := benchkit.CountHops(ctx, c, []string{ids[len(ids)-1]}, each)
	if err != nil {
		return err
	}
	var kinds []string
	for k, n := range h.ByType {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	fmt.Printf("\none park (a new session's first message, up to parked): %d workflows, %d history events, %d workflow tasks, %d billable actions (%s)\n",
		h.Workflows, h.Events, h.Tasks, h.Actions, strings.Join(kinds, ", "))

	// The oldest session was evicted long ago: it still resumes.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := svc.Respond(cctx, ids[0], signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: "apr_call_1_0", OptionID: "approve"}}, Wait: true})
	if err != nil || res.Outcome == nil || res.Outcome.Reply != "done" {
		return fmt.Errorf("resume the first parked session: %+v %v", res.Outcome, err)
	}
	fmt.Printf("\nthe first session (evicted from the cache) resumed and finished its turn in %s\n", time.Since(t0).Round(time.Millisecond))
	return nil
}

type sample struct {
	heap, rss  uint64
	goroutines int
}

func measure() sample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return sample{heap: ms.HeapInuse, rss: benchkit.RSS(), goroutines: runtime.NumGoroutine()}
}

// eventDetail names what an event is about (activity type, signal, marker).
func eventDetail(e *historypb.HistoryEvent) string {
	switch {
	case e.GetActivityTaskScheduledEventAttributes() != nil:
		return " " + e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	case e.GetMarkerRecordedEventAttributes() != nil:
		return " " + e.GetMarkerRecordedEventAttributes().GetMarkerName()
	case e.GetWorkflowExecutionSignaledEventAttributes() != nil:
		return " " + e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
	case e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil:
		return " " + e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName()
	case e.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
		return " " + e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()
	case e.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil:
		return " " + e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowType().GetName()
	case e.GetWorkflowExecutionStartedEventAttributes() != nil:
		return " " + e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
	}
	return ""
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
