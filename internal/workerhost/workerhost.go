// Package workerhost builds the Temporal worker that serves an agent, with
// the limits an operator sets.
package workerhost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/visibility"
)

// Limits bound what one worker process runs at once. It is eve.Limits;
// LimitsFromEnv reads it and Bind binds the worker command's flags onto it.
type Limits struct {
	Activities      int // EVE_MAX_CONCURRENT_ACTIVITIES, default 200
	LocalActivities int // EVE_MAX_CONCURRENT_LOCAL_ACTIVITIES, default 200
	WorkflowTasks   int // EVE_MAX_CONCURRENT_WORKFLOW_TASKS, default 100
	// CachedWorkflows bounds the sticky workflow cache (process-wide;
	// EVE_MAX_CACHED_WORKFLOWS, default 2000). A parked session costs
	// nothing once evicted; it is replayed on resume.
	CachedWorkflows int
	// StopTimeout is how long a stopping worker (SIGINT/SIGTERM) lets
	// in-flight activities finish before it cancels them (Temporal's
	// WorkerStopTimeout). A tool that finishes in time reports its result,
	// so it does not run again on another worker. 0 means
	// DefaultStopTimeout (EVE_WORKER_STOP_TIMEOUT, 30s). Give the process
	// manager's grace period (e.g. Kubernetes'
	// terminationGracePeriodSeconds) a few seconds more.
	StopTimeout time.Duration
}

// DefaultStopTimeout is the worker stop timeout when none is set.
const DefaultStopTimeout = 30 * time.Second

// The default limits of one worker process, defined once: the worker and
// dev commands' flags, eve.LimitsFromEnv and eve.NewWorker all take them.
const (
	DefaultActivities      = 200
	DefaultLocalActivities = 200
	DefaultWorkflowTasks   = 100
	DefaultCachedWorkflows = 2000
)

// LimitsFromEnv reads the limits from the environment (EVE_MAX_…), with
// the defaults.
func LimitsFromEnv() Limits {
	return Limits{
		Activities:      config.EnvInt("EVE_MAX_CONCURRENT_ACTIVITIES", DefaultActivities),
		LocalActivities: config.EnvInt("EVE_MAX_CONCURRENT_LOCAL_ACTIVITIES", DefaultLocalActivities),
		WorkflowTasks:   config.EnvInt("EVE_MAX_CONCURRENT_WORKFLOW_TASKS", DefaultWorkflowTasks),
		CachedWorkflows: config.EnvInt("EVE_MAX_CACHED_WORKFLOWS", DefaultCachedWorkflows),
		StopTimeout:     envDuration("EVE_WORKER_STOP_TIMEOUT", DefaultStopTimeout),
	}
}

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.Activities, DefaultActivities)
	def(&l.LocalActivities, DefaultLocalActivities)
	def(&l.WorkflowTasks, DefaultWorkflowTasks)
	def(&l.CachedWorkflows, DefaultCachedWorkflows)
	return l
}

// EffectiveStopTimeout is StopTimeout, or DefaultStopTimeout when it is 0.
func (l Limits) EffectiveStopTimeout() time.Duration {
	if l.StopTimeout == 0 {
		return DefaultStopTimeout
	}
	return l.StopTimeout
}

// envDuration returns a duration variable (Go syntax, e.g. "45s"), or def.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// Bind registers the limit flags, defaulting from the environment.
func (l *Limits) Bind(fs *pflag.FlagSet) {
	env := LimitsFromEnv()
	fs.IntVar(&l.Activities, "max-concurrent-activities", env.Activities, "tool and model activities run at once (env EVE_MAX_CONCURRENT_ACTIVITIES)")
	fs.IntVar(&l.LocalActivities, "max-concurrent-local-activities", env.LocalActivities, "local activities run at once (env EVE_MAX_CONCURRENT_LOCAL_ACTIVITIES)")
	fs.IntVar(&l.WorkflowTasks, "max-concurrent-workflow-tasks", env.WorkflowTasks, "workflow tasks run at once (env EVE_MAX_CONCURRENT_WORKFLOW_TASKS)")
	fs.IntVar(&l.CachedWorkflows, "max-cached-workflows", env.CachedWorkflows, "sessions and turns kept in the worker's cache (env EVE_MAX_CACHED_WORKFLOWS)")
	fs.DurationVar(&l.StopTimeout, "stop-timeout", env.StopTimeout, "on SIGINT/SIGTERM, how long in-flight tools may finish before they are cancelled (env EVE_WORKER_STOP_TIMEOUT)")
}

// Validate rejects limits that cannot work.
func (l Limits) Validate() error {
	for name, v := range map[string]int{
		"--max-concurrent-activities": l.Activities, "--max-concurrent-local-activities": l.LocalActivities,
		"--max-concurrent-workflow-tasks": l.WorkflowTasks, "--max-cached-workflows": l.CachedWorkflows,
	} {
		if v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", name, v)
		}
	}
	if l.StopTimeout < 0 {
		return fmt.Errorf("--stop-timeout must not be negative, got %s", l.StopTimeout)
	}
	if l.WorkflowTasks < 2 {
		return fmt.Errorf("--max-concurrent-workflow-tasks must be at least 2 (sticky and normal queues each need a poller), got %d", l.WorkflowTasks)
	}
	return nil
}

// New registers the agent on a new worker, with what h wires in. When the
// namespace has eve's search attributes, new sessions record their status
// in them. A host without a Store gets the payload store of c when Dial
// made c, and one without a Client gets c. A versioned d (a build id) opts
// the worker into Worker Versioning; its Name defaults to the task queue.
func New(c client.Client, namespace, taskQueue string, a *agent.Agent, h agent.Host, l Limits, d Deployment) (*Worker, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if taskQueue == "" {
		return nil, fmt.Errorf("agent %s: no task queue: set EVE_TASK_QUEUE or --task-queue (the commands default to the agent's name)", a.Name)
	}
	d = d.ForTaskQueue(taskQueue)
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if h.Store == nil {
		if h.Store = StoreOf(c); h.Store == nil {
			return nil, fmt.Errorf("agent %s has no payload store: set Host.Store to the store its client offloads to (config.Temporal.Store), or dial with workerhost.Dial", a.Name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	missing, err := visibility.Missing(ctx, c, namespace)
	cancel()
	switch {
	case err != nil:
		slog.Warn("cannot check eve's search attributes; sessions will not record their status (the doctor command checks them)", "err", err)
	case len(missing) > 0 && !onlyInbox(missing):
		slog.Warn("namespace lacks eve's search attributes; sessions will not record their status", "missing", missing, "fix", strings.Join(visibility.Commands(namespace), "; "))
	case len(missing) > 0:
		// A namespace registered before the inbox: status still records.
		h.SearchAttributes = true
		slog.Warn("namespace lacks the inbox's search attributes; parked requests are not listed in the inbox", "missing", missing, "fix", strings.Join(visibility.Commands(namespace), "; "))
	default:
		h.SearchAttributes, h.InboxAttributes = true, true
	}
	if h.Client == nil {
		h.Client = c
	}
	worker.SetStickyWorkflowCacheSize(l.CachedWorkflows)
	w := worker.New(c, taskQueue, Options(l, d))
	if err := agent.Register(w, a, h); err != nil {
		return nil, err
	}
	// Each subagent runs on a worker of its own, on its task queue.
	var subs []worker.Worker
	for _, q := range agent.Queues(a, taskQueue)[1:] {
		sw := worker.New(c, q.TaskQueue, Options(l, d))
		if err := agent.Register(sw, q.Agent, h); err != nil {
			return nil, fmt.Errorf("subagent %s: %w", q.Agent.Name, err)
		}
		subs = append(subs, sw)
	}
	return &Worker{Worker: w, subs: subs, c: c, d: d, h: h, logger: h.Logger}, nil
}

// Options are the SDK worker options of limits l and deployment d (its
// Name filled in).
func Options(l Limits, d Deployment) worker.Options {
	return worker.Options{
		DeploymentOptions:                       d.options(),
		MaxConcurrentActivityExecutionSize:      l.Activities,
		MaxConcurrentLocalActivityExecutionSize: l.LocalActivities,
		MaxConcurrentWorkflowTaskExecutionSize:  l.WorkflowTasks,
		WorkerStopTimeout:                       l.EffectiveStopTimeout(),
		// The SDK's default (2 pollers, "mixed" sticky/normal) sends every
		// poll to the sticky queue while the last sticky answer hinted a
		// backlog: with many parked sessions nothing arrives there, and new
		// sessions' first workflow tasks waited on the normal queue for up to
		// a long poll (stalls of 45 s and more in cmd/parkbench). Autoscaling
		// pollers keep both queues polled (docs/performance.md, Parked sessions).
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	}
}

// makeCurrentTimeout bounds how long a starting worker waits for the
// server to register its version before it gives up making it current.
const makeCurrentTimeout = time.Minute

// Worker is an SDK worker that, when its Deployment says MakeCurrent,
// makes its build current once it polls.
type Worker struct {
	worker.Worker
	// subs serve the agent's subagents, each on its own task queue.
	subs   []worker.Worker
	c      client.Client
	d      Deployment
	h      agent.Host
	logger *slog.Logger
}

// Deployment is the worker's deployment, its Name filled in.
func (w *Worker) Deployment() Deployment { return w.d }

// Host is what the worker wires into its agent, as New completed it (the
// client's store, the namespace's search attributes).
func (w *Worker) Host() agent.Host { return w.h }

// Start starts polling, then makes the build current when asked to.
func (w *Worker) Start() error {
	if err := w.startSubs(); err != nil {
		return err
	}
	if err := w.Worker.Start(); err != nil {
		w.stopSubs()
		return err
	}
	if !w.d.MakeCurrent {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), makeCurrentTimeout)
	defer cancel()
	if err := MakeCurrent(ctx, w.c, w.d, w.logger); err != nil {
		w.Worker.Stop()
		return err
	}
	return nil
}

// Run is Start, then polls until interruptCh (or a fatal error), then
// stops.
func (w *Worker) Run(interruptCh <-chan any) error {
	if err := w.startSubs(); err != nil {
		return err
	}
	defer w.stopSubs()
	if !w.d.MakeCurrent {
		return w.Worker.Run(interruptCh)
	}
	// The SDK's Run starts the pollers; the version is made current beside
	// it, and a failure to do so stops the worker with that error.
	ctx, cancel := context.WithTimeout(context.Background(), makeCurrentTimeout)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- MakeCurrent(ctx, w.c, w.d, w.logger) }()
	stop, done := make(chan any), make(chan struct{})
	var failed error
	go func() {
		defer close(stop)
		select {
		case <-interruptCh:
			return
		case <-done:
			return
		case failed = <-result:
			if failed != nil {
				return
			}
		}
		select {
		case <-interruptCh:
		case <-done:
		}
	}()
	err := w.Worker.Run(stop)
	close(done)
	<-stop
	if err == nil && failed != nil {
		return failed
	}
	return err
}

// Stop stops the agent's worker and its subagents' workers.
func (w *Worker) Stop() {
	w.Worker.Stop()
	w.stopSubs()
}

func (w *Worker) startSubs() error {
	for i, s := range w.subs {
		if err := s.Start(); err != nil {
			for _, started := range w.subs[:i] {
				started.Stop()
			}
			return fmt.Errorf("start a subagent's worker: %w", err)
		}
	}
	return nil
}

func (w *Worker) stopSubs() {
	for _, s := range w.subs {
		s.Stop()
	}
}

// onlyInbox reports whether every missing attribute is one only the inbox
// needs.
func onlyInbox(missing []string) bool {
	for _, m := range missing {
		if !slices.Contains(visibility.InboxAttributes, m) {
			return false
		}
	}
	return true
}
