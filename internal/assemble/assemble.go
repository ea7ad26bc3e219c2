// Package assemble builds eve's two processes, once: a worker that serves
// an agent, and the HTTP handler of the session protocol, the tools API
// and completion URLs. eve.NewWorker, eve.NewHandler and every command of
// an eve binary (worker, dev, serve) assemble through it, so they cannot
// drift apart; they differ only in where their configuration comes from
// (flags, the environment, or an app's options).
package assemble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/internal/workerhost"
)

// WorkerConfig is what a worker is built from.
type WorkerConfig struct {
	Temporal config.Temporal
	// Limits are checked as given (a command's flags hold the defaults;
	// eve.NewWorker fills in zero fields first).
	Limits     workerhost.Limits
	Deployment workerhost.Deployment
	// MetricsAddr is where /metrics listens ("": off).
	MetricsAddr string
	// Actions sign completion URLs unless the agent has its own Actions.
	// Without a secret delegated tools fail (a warning says so); a secret
	// that cannot work is an error.
	Actions config.Actions
	// NotifyURL opens the bus that tells API servers of new events
	// (EVE_NOTIFY) unless the agent has its own Notifier.
	NotifyURL string
	// ModelFromEnv replaces the agent's model with EVE_MODEL's when set.
	ModelFromEnv bool
	// RegisterSearchAttributes registers eve's search attributes in the
	// namespace first (the dev stack does, so parked sessions show up in
	// the Temporal UI by status).
	RegisterSearchAttributes bool
	Logger                   *slog.Logger
}

// Check validates cfg for the agent named agentName without dialing
// anything, so a command can refuse bad flags before it starts servers.
// It returns cfg with the task queue and the deployment's name filled in.
func (cfg WorkerConfig) Check(agentName string) (WorkerConfig, error) {
	if err := cfg.Temporal.UseAgentTaskQueue(agentName); err != nil {
		return cfg, err
	}
	if err := cfg.Temporal.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Limits.Validate(); err != nil {
		return cfg, err
	}
	cfg.Deployment = cfg.Deployment.ForTaskQueue(cfg.Temporal.TaskQueue)
	if err := cfg.Deployment.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Worker is an assembled worker with its own client.
type Worker struct {
	*workerhost.Worker
	Client     client.Client
	MetricsURL string
	TaskQueue  string
	Limits     workerhost.Limits
	logger     *slog.Logger
	close      func()
}

// NewWorker dials Temporal (TLS or a Cloud API key, metrics, tracing, the
// payload store as the client's External Storage and the agent's Store)
// and registers a on a new worker: the task queue defaults to the agent's
// name, the model may come from EVE_MODEL, completion URLs are signed
// with cfg.Actions, and the bus of cfg.NotifyURL hears new events. Close
// releases the client.
func NewWorker(ctx context.Context, a *agent.Agent, cfg WorkerConfig) (*Worker, error) {
	if a == nil {
		return nil, errors.New("assemble a worker: no agent")
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	cfg, err := cfg.Check(a.Name)
	if err != nil {
		return nil, err
	}
	tc, d := cfg.Temporal, cfg.Deployment
	if a.Notifier == nil {
		bus, err := notify.Open(ctx, cfg.NotifyURL, logger)
		if err != nil {
			return nil, fmt.Errorf("--notify: %w", err)
		}
		if bus != nil {
			a.Notifier = bus
		}
	}
	c, metricsURL, closeClient, err := workerhost.Dial(ctx, logger, tc, cfg.MetricsAddr)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Worker, error) { closeClient(); return nil, err }
	if cfg.RegisterSearchAttributes {
		if err := visibility.Register(ctx, c, tc.Namespace); err != nil {
			logger.Warn("could not register eve's search attributes", "err", err)
		}
	}
	if a.Logger == nil {
		a.Logger = logger
	}
	// The store the client offloads payloads to (tc's copies share it).
	if a.Store, err = tc.Store(ctx); err != nil {
		return fail(err)
	}
	if cfg.ModelFromEnv {
		if err := workerhost.UseModelFromEnv(a); err != nil {
			return fail(err)
		}
	}
	if a.Actions == nil {
		switch actions, err := cfg.Actions.Worker(); {
		case errors.Is(err, config.ErrNoSecret):
			logger.Warn("delegated tools will fail until this is fixed: set EVE_ACTION_SECRET (--action-secret) and EVE_PUBLIC_URL", "err", err)
		case err != nil:
			return fail(err)
		default:
			a.Actions = actions
		}
	}
	w, err := workerhost.New(c, tc.Namespace, tc.TaskQueue, a, cfg.Limits, d)
	if err != nil {
		return fail(err)
	}
	return &Worker{Worker: w, Client: c, MetricsURL: metricsURL, TaskQueue: tc.TaskQueue, Limits: cfg.Limits, logger: logger, close: closeClient}, nil
}

// Run polls until ctx ends, then stops gracefully: in-flight tools get the
// stop timeout to finish.
func (w *Worker) Run(ctx context.Context) error {
	stop := make(chan any)
	go func() {
		<-ctx.Done()
		w.logger.Info("worker stopping: in-flight tools may finish", "stopTimeout", w.Limits.EffectiveStopTimeout())
		close(stop)
	}()
	if err := w.Worker.Run(stop); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// Close closes the worker's client, metrics server and tracing.
func (w *Worker) Close() { w.close() }

// HandlerConfig is what the API handler is built from.
type HandlerConfig struct {
	// TaskQueue of the agent's workers (default the agent's name).
	TaskQueue string
	// Keys map bearer keys to principals (api.LoadKeys); none: open.
	Keys map[string]*auth.Principal
	// Addr is where the handler is served, for the open-server check.
	Addr         string
	InsecureOpen bool
	// ActionSecret verifies completion URLs; empty: they answer 404 (a
	// warning says so).
	ActionSecret           []byte
	CORSOrigins            []string
	MaxStreamsPerPrincipal int
	MaxToolCalls           int
	// AgentName reported by /eve/v1/info (default the agent's).
	AgentName         string
	MaxBodyBytes      int64
	BodyReadTimeout   time.Duration
	LeaseDuration     time.Duration
	HeartbeatInterval time.Duration
	PollInterval      time.Duration
	// Notify, when set, tells streams that sessions changed; else the bus
	// of NotifyURL (EVE_NOTIFY: postgres://…), opened for the life of the
	// process; neither: streams poll.
	Notify           notify.Bus
	NotifyURL        string
	AuthorizeSession func(context.Context, api.SessionAccess) bool
	// TemporalUIWorkflowURL: the console's links to turns' workflows
	// (TemporalUIWorkflowURL builds it); "": none.
	TemporalUIWorkflowURL string
	Logger                *slog.Logger
}

// TemporalUIWorkflowURL is the workflows page of namespace in the Temporal
// Web UI at base (http://localhost:8233), or "" without a base.
func TemporalUIWorkflowURL(base, namespace string) string {
	if base = strings.TrimRight(strings.TrimSpace(base), "/"); base == "" {
		return ""
	}
	return base + "/namespaces/" + url.PathEscape(cmp.Or(namespace, "default")) + "/workflows"
}

// NewHandler serves eve's session protocol under /eve/v1/ for the agent,
// its tools API under /v1/ and delegated tools' completion URLs under
// /eve/v1/actions/. c must offload payloads to the workers' store.
func NewHandler(c client.Client, a *agent.Agent, cfg HandlerConfig) (*api.Server, error) {
	if a == nil {
		return nil, errors.New("assemble the API handler: no agent")
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	tq := cmp.Or(cfg.TaskQueue, a.Name)
	if tq == "" {
		return nil, errors.New("the API handler has no task queue: set EVE_TASK_QUEUE (--task-queue, ServerOptions.TaskQueue), or name the agent (the default)")
	}
	tools, err := toolsapi.New(toolsapi.Options{Client: c, TaskQueue: tq, Agent: a, Logger: logger, Caller: api.Caller, MaxToolCalls: cfg.MaxToolCalls})
	if err != nil {
		return nil, fmt.Errorf("tools API: %w", err)
	}
	var actions *actionsvc.Service
	if len(cfg.ActionSecret) == 0 {
		logger.Warn("delegated tools' completion URLs are not served: set EVE_ACTION_SECRET (--action-secret), the workers' secret")
	} else {
		signer, err := capability.NewSigner(cfg.ActionSecret)
		if err != nil {
			return nil, err
		}
		actions = &actionsvc.Service{Client: c, Signer: signer, Logger: logger}
	}
	bus := cfg.Notify
	if bus == nil && cfg.NotifyURL != "" {
		// The handler serves for the life of the process, as its bus does.
		if bus, err = notify.Open(context.Background(), cfg.NotifyURL, logger); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	info := api.AgentInfo(a)
	info.ModelProvider = ModelProvider(info.ModelID)
	if cfg.AgentName != "" {
		info.AgentName = cfg.AgentName
	}
	opts := api.Options{
		AuthorizeSession:       cfg.AuthorizeSession,
		Sessions:               &sessions.Service{Client: c, TaskQueue: tq},
		Keys:                   cfg.Keys,
		Addr:                   cfg.Addr,
		InsecureOpen:           cfg.InsecureOpen,
		MaxStreamsPerPrincipal: cfg.MaxStreamsPerPrincipal,
		CORSOrigins:            cfg.CORSOrigins,
		Logger:                 logger,
		Info:                   info,
		Tools:                  tools.Handler(),
		MaxBodyBytes:           cfg.MaxBodyBytes,
		BodyReadTimeout:        cfg.BodyReadTimeout,
		LeaseDuration:          cfg.LeaseDuration,
		HeartbeatInterval:      cfg.HeartbeatInterval,
		PollInterval:           cfg.PollInterval,
		Notify:                 bus,
		TemporalUIWorkflowURL:  cfg.TemporalUIWorkflowURL,
		CursorSecret:           cfg.ActionSecret, // one key across the deployment's API servers
	}
	if actions != nil {
		opts.Actions = actions
	}
	return api.New(opts)
}

// ModelProvider is the provider part of a model id ("anthropic:claude-…"
// → "anthropic"); ids without one are scripted models.
func ModelProvider(id string) string {
	if p, _, ok := strings.Cut(id, ":"); ok && (p == "anthropic" || p == "openai") {
		return p
	}
	return "scripted"
}
