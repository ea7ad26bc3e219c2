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
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/payloadstore"
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
	// Actions sign completion URLs unless Host has its own Actions.
	// Without a secret delegated tools fail (a warning says so); a secret
	// that cannot work is an error.
	Actions config.Actions
	// NotifyURL opens the bus that tells API servers of new events
	// (EVE_NOTIFY) unless Host has its own Notifier.
	NotifyURL string
	// Host is what the caller wires in itself (the dev command: its
	// in-process bus); NewWorker fills in the rest: the client it dials,
	// the payload store, the logger, completion URLs (Actions), the bus of
	// NotifyURL and the namespace's search attributes.
	Host agent.Host
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
	// Store is the payload store the worker's conversations live in.
	Store  payloadstore.Store
	Limits workerhost.Limits
	logger *slog.Logger
	close  func()
}

// NewWorker dials Temporal (TLS or a Cloud API key, metrics, tracing, the
// payload store as the client's External Storage and the host's Store)
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
	tc, d, h := cfg.Temporal, cfg.Deployment, cfg.Host
	if h.Notifier == nil {
		bus, err := notify.Open(ctx, cfg.NotifyURL, logger)
		if err != nil {
			return nil, fmt.Errorf("--notify: %w", err)
		}
		if bus != nil {
			h.Notifier = bus
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
	if h.Logger == nil {
		h.Logger = logger
	}
	// The store the client offloads payloads to (tc's copies share it).
	if h.Store, err = tc.Store(ctx); err != nil {
		return fail(err)
	}
	if v := config.Env("EVE_CONVERSATION_FORMAT", ""); v != "" {
		if h.ConversationFormat, err = conversation.ParseFormat(v); err != nil {
			return fail(fmt.Errorf("EVE_CONVERSATION_FORMAT: %w", err))
		}
	}
	if cfg.ModelFromEnv {
		if err := workerhost.UseModelFromEnv(a); err != nil {
			return fail(err)
		}
	}
	if h.Actions == nil {
		switch actions, err := cfg.Actions.Worker(); {
		case errors.Is(err, config.ErrNoSecret):
			logger.Warn("delegated tools will fail until this is fixed: set EVE_ACTION_SECRET (--action-secret) and EVE_PUBLIC_URL", "err", err)
		case err != nil:
			return fail(err)
		default:
			h.Actions = actions
		}
	}
	w, err := workerhost.New(c, tc.Namespace, tc.TaskQueue, a, h, cfg.Limits, d)
	if err != nil {
		return fail(err)
	}
	return &Worker{Worker: w, Client: c, MetricsURL: metricsURL, TaskQueue: tc.TaskQueue, Store: h.Store, Limits: cfg.Limits, logger: logger, close: closeClient}, nil
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

// NewHandler serves eve's session protocol under /eve/v1/ for the agent,
// its tools API under /v1/ and delegated tools' completion URLs under
// /eve/v1/actions/, as opts say (eve.ServerOptions, or the serve and dev
// commands' flags). c must offload payloads to the workers' store. bus,
// when set, tells streams that sessions changed; else the bus of
// opts.Notify (EVE_NOTIFY: postgres://…) is opened for the life of the
// process; neither: streams poll.
func NewHandler(c client.Client, a *agent.Agent, opts api.ServerOptions, bus notify.Bus) (*api.Server, error) {
	if a == nil {
		return nil, errors.New("assemble the API handler: no agent")
	}
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	logger := opts.Logger
	tq := cmp.Or(opts.TaskQueue, a.Name)
	if tq == "" {
		return nil, errors.New("the API handler has no task queue: set EVE_TASK_QUEUE (--task-queue, ServerOptions.TaskQueue), or name the agent (the default)")
	}
	tools, err := toolsapi.New(toolsapi.Options{Client: c, TaskQueue: tq, Agent: a, Logger: logger, Caller: api.Caller, MaxToolCalls: opts.MaxToolCalls})
	if err != nil {
		return nil, fmt.Errorf("tools API: %w", err)
	}
	var actions *actionsvc.Service
	if opts.ActionSecret == "" {
		logger.Warn("delegated tools' completion URLs are not served: set EVE_ACTION_SECRET (--action-secret), the workers' secret")
	} else {
		signer, err := capability.NewSigner([]byte(opts.ActionSecret))
		if err != nil {
			return nil, err
		}
		actions = &actionsvc.Service{Client: c, Signer: signer, Logger: logger}
	}
	if bus == nil && opts.Notify != "" {
		// The handler serves for the life of the process, as its bus does.
		if bus, err = notify.Open(context.Background(), opts.Notify, logger); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	// The API server's spans (eve.send) go to the workers' backend, as
	// their own service (docs/observability.md).
	tp, err := tracing.FromEnv(context.Background(), DefaultAPIServiceName)
	if err != nil {
		return nil, err
	}
	info := api.AgentInfo(a)
	info.ModelProvider = ModelProvider(info.ModelID)
	srv := api.Options{
		ServerOptions: opts,
		// StartWithMessage: the workers of tq run this build's workflows
		// (docs/deploy.md, "Rolling a deploy": workers before API hosts).
		Sessions: &sessions.Service{Client: c, TaskQueue: tq, StartWithMessage: true, SearchAttributes: hasSearchAttributes(c, opts.TemporalNamespace, logger)},
		Info:     info,
		Tools:    tools.Handler(),
		Bus:      bus,
		Tracing:  tp,
	}
	if actions != nil {
		srv.Actions = actions
	}
	h, err := api.New(srv)
	if err != nil && tp != nil {
		tp.Shutdown(context.Background())
	}
	return h, err
}

// hasSearchAttributes reports whether the workers' namespace (named: an
// unnamed one is not guessed) has every one of eve's search attributes, so
// that sessions start with their status set (one upsert less per session;
// sessions.Service.SearchAttributes). A check that fails says no.
func hasSearchAttributes(c client.Client, namespace string, logger *slog.Logger) bool {
	if namespace == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	missing, err := visibility.Missing(ctx, c, namespace)
	if err != nil {
		logger.Debug("cannot check eve's search attributes; sessions start without them", "err", err)
		return false
	}
	return len(missing) == 0
}

// DefaultAPIServiceName names the API server's traces unless
// OTEL_SERVICE_NAME does.
const DefaultAPIServiceName = "eve-api"

// ModelProvider is the provider part of a model id ("anthropic:claude-…"
// → "anthropic"); ids without one are scripted models.
func ModelProvider(id string) string {
	if p, _, ok := strings.Cut(id, ":"); ok && (p == "anthropic" || p == "openai") {
		return p
	}
	return "scripted"
}
