package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

const killRules = `
rules:
  - match: slow
    steps:
      - calls: [{tool: slow}]
      - reply: "done by {{result.slow.worker}} on attempt {{result.slow.attempt}}"
`

// slowTool blocks (heartbeating) in the worker named "doomed" and returns at
// once elsewhere. It leaves a marker file when it starts.
func slowTool(workerName, markerDir string) *tools.Tool {
	return &tools.Tool{
		Name: "slow", Description: "A long job.",
		InputSchema:      json.RawMessage(`{"type":"object"}`),
		HeartbeatTimeout: 2 * time.Second,
		// Idempotent: the attempt lost with the killed worker runs again
		// (DefaultRetry). A tool that is not would run once and fail.
		Idempotent: true,
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			os.WriteFile(filepath.Join(markerDir, fmt.Sprintf("%s-%d", workerName, ctx.Attempt)), nil, 0o644)
			if workerName == "doomed" {
				for {
					ctx.Heartbeat()
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
			return map[string]any{"worker": workerName, "attempt": ctx.Attempt}, nil
		},
	}
}

func killAgent(workerName, markerDir string) *agent.Agent {
	m, err := scripted.Parse([]byte(killRules))
	if err != nil {
		panic(err)
	}
	reg := tools.NewRegistry()
	reg.MustRegister(slowTool(workerName, markerDir))
	return &agent.Agent{Name: "kill", Model: m, Tools: reg, LocalModel: true}
}

// workerMain runs this test binary as a bare worker process when asked to,
// so a test can SIGKILL it in the middle of a tool.
func workerMain() bool {
	addr := os.Getenv("EVE_E2E_WORKER_ADDR")
	if addr == "" {
		return false
	}
	store, err := payloadstore.FromEnv(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := client.Dial(client.Options{HostPort: addr, ExternalStorage: payloadstore.ExternalStorage(store)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := worker.Options{MaxHeartbeatThrottleInterval: evetest.HeartbeatThrottle} // as the test's own workers
	// Traced as eve's workers are, from EVE_OTEL_EXPORTER (e2e/tracing_test.go).
	tp, err := tracing.FromEnv(context.Background(), workerhost.DefaultServiceName)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if tp != nil {
		opts.Interceptors = []interceptor.WorkerInterceptor{tracing.Interceptor(tp.Tracer)}
	}
	w := worker.New(c, os.Getenv("EVE_E2E_WORKER_TQ"), opts)
	a := killAgent("doomed", os.Getenv("EVE_E2E_WORKER_MARKERS"))
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "race" {
		a = raceAgent("doomed", os.Getenv("EVE_E2E_WORKER_MARKERS"))
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "stubs" {
		a = stubKillAgent("doomed", os.Getenv("EVE_E2E_WORKER_MARKERS"))
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "tasks" {
		a = doomedTaskAgent(os.Getenv("EVE_E2E_WORKER_MARKERS"))
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "connection" {
		a = connectionKillAgent(os.Getenv("EVE_E2E_WORKER_MCP_URL"))
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "nexus" {
		a = nexusAgent(os.Getenv("EVE_E2E_WORKER_ENDPOINT"), time.Minute, approval.Never())
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "workflow" {
		a = provisionWorkerMain(w, os.Getenv("EVE_E2E_WORKER_MARKERS"))
	}
	if os.Getenv("EVE_E2E_WORKER_AGENT") == "subagents" {
		a = subKillAgent("doomed", os.Getenv("EVE_E2E_WORKER_MARKERS"), os.Getenv("EVE_E2E_WORKER_IDEMPOTENT") == "true")
	}
	if err := agent.Register(w, a, agent.Host{Store: store}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Each subagent on a worker of its own, on its task queue, in this
	// process too: a kill takes them all.
	for _, q := range agent.Queues(a, os.Getenv("EVE_E2E_WORKER_TQ"))[1:] {
		sw := worker.New(c, q.TaskQueue, opts)
		if err := agent.Register(sw, q.Agent, agent.Host{Store: store}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := sw.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := w.Run(worker.InterruptCh()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

// A worker killed (SIGKILL) in the middle of an idempotent tool: a new
// worker retries the tool after its heartbeat timeout and finishes the turn.
func TestWorkerKilledMidToolNewWorkerFinishes(t *testing.T) {
	env := evetest.New(t)
	markers := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue, "EVE_E2E_WORKER_MARKERS="+markers, env.Server.PayloadStoreEnv())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	ctx := env.Ctx(60 * time.Second)
	id, err := env.Sessions.Create(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "slow"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(markers, "doomed-1")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool never started in the doomed worker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	env.StartWorker(killAgent("survivor", markers))
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	var reply string
	for _, e := range evetest.Of(evs, protocol.MessageCompleted) {
		var d protocol.MessageCompletedData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		reply = d.Message
	}
	if !strings.HasPrefix(reply, "done by survivor on attempt 2") {
		t.Fatalf("reply = %q", reply)
	}
}
