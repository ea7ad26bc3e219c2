// Package eve is the public entry point for running your own agent on
// Temporal.
//
// The shortest app is a main package that hands its agent to Main:
//
//	func main() { eve.Main(shop.Agent) }
//
// Its binary then has eve's subcommands — dev (the whole stack locally),
// worker, serve, mcp, doctor, session, tools and action — with eve's flags
// and environment (TEMPORAL_ADDRESS, EVE_TASK_QUEUE, EVE_PAYLOAD_STORE,
// EVE_ACTION_SECRET, EVE_PUBLIC_URL, ...; see the README's Configuration).
// Its workers and API servers meet on a task queue named after the agent
// (EVE_TASK_QUEUE sets another), so apps on one cluster, and the demo's
// "eve", do not share workers.
//
// Apps that compose their own process use the pieces instead: NewWorker
// (a Temporal worker serving the agent, with the operator features of the
// worker command), NewHandler (the session protocol, the tools API and
// completion URLs on one http.Handler), ToolsHandler and ActionsHandler.
package eve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/payloadstore"
)

// Main runs the binary's command line for the agent newAgent builds and
// exits: 0 on success, 1 (with "<binary>: <error>" on stderr) otherwise,
// usage errors included. SIGINT and SIGTERM stop the running command
// gracefully (see Command). The binary's name, in usage lines and hints,
// is the base name of os.Args[0].
//
// newAgent is called once by each command that serves the agent (dev,
// worker, serve, mcp). Leave the agent's Store, Client and Logger unset:
// the commands set them from their flags and environment, and set Actions
// from EVE_ACTION_SECRET and EVE_PUBLIC_URL unless the agent has its own.
// EVE_MODEL, when set, replaces its Model.
func Main(newAgent func() (*agent.Agent, error)) {
	name := filepath.Base(os.Args[0])
	cli.Main(name, Command(name, newAgent))
}

// Command returns the command tree Main runs, named name (the binary's
// name in usage lines and in the commands its hints suggest), for apps
// that add their own commands or run it with their own arguments.
//
// The tree leaves process handling to its caller. Main runs it with a
// context that SIGINT and SIGTERM cancel: worker then stops polling and
// lets in-flight tools finish within EVE_WORKER_STOP_TIMEOUT (30s) before
// cancelling them; dev, serve and mcp shut down; each returns nil, so the
// process exits 0 after a stop by signal. A command waiting on a turn
// (session send, approve, respond) returns the context's error instead,
// and exits 1. While a command stops, further signals are ignored (a
// worker's wait is bounded by the stop timeout; SIGKILL ends it at once).
// Main prints a returned error as "<name>: <error>" on stderr and exits 1;
// the tree itself prints neither errors nor usage (cobra's SilenceErrors
// and SilenceUsage). A caller of Command does all of that itself:
//
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
//	err := eve.Command("shop", shop.Agent).ExecuteContext(ctx)
//	stop()
//	if err != nil {
//		fmt.Fprintln(os.Stderr, "shop:", err)
//		os.Exit(1)
//	}
func Command(name string, newAgent func() (*agent.Agent, error)) *cobra.Command {
	return cli.NewRootCommand(cli.App{Name: name, Agent: newAgent})
}

// Temporal is how to reach the Temporal cluster, which task queue the
// agent's workers poll, and where large payloads and conversations live.
// Every worker, API server and CLI of a deployment must use the same
// PayloadStore.
type Temporal struct {
	Address       string // TEMPORAL_ADDRESS, default 127.0.0.1:7233
	Namespace     string // TEMPORAL_NAMESPACE, default "default"
	APIKey        string // TEMPORAL_API_KEY: Temporal Cloud API key (implies TLS)
	TLSCert       string // TEMPORAL_TLS_CERT: mTLS client certificate (PEM file)
	TLSKey        string // TEMPORAL_TLS_KEY: its key
	TLSCA         string // TEMPORAL_TLS_CA: CA bundle to verify the server
	TLSServerName string // TEMPORAL_TLS_SERVER_NAME
	TaskQueue     string // EVE_TASK_QUEUE; empty: the agent's name
	// PayloadStore is payloadstore.Open's spec (EVE_PAYLOAD_STORE, default
	// file:.eve/payloads): file:<dir> or s3://bucket/prefix.
	PayloadStore string
}

// TemporalFromEnv reads Temporal from the environment, with eve's defaults.
func TemporalFromEnv() Temporal {
	return Temporal{
		Address:       config.Env("TEMPORAL_ADDRESS", config.DefaultAddress),
		Namespace:     config.Env("TEMPORAL_NAMESPACE", config.DefaultNamespace),
		APIKey:        config.Env("TEMPORAL_API_KEY", ""),
		TLSCert:       config.Env("TEMPORAL_TLS_CERT", ""),
		TLSKey:        config.Env("TEMPORAL_TLS_KEY", ""),
		TLSCA:         config.Env("TEMPORAL_TLS_CA", ""),
		TLSServerName: config.Env("TEMPORAL_TLS_SERVER_NAME", ""),
		TaskQueue:     config.Env("EVE_TASK_QUEUE", ""), // empty: the agent's name
		PayloadStore:  config.Env(payloadstore.EnvVar, payloadstore.DefaultSpec),
	}
}

func (t Temporal) internal() config.Temporal {
	tc := config.Temporal{
		Address: t.Address, Namespace: t.Namespace, APIKey: t.APIKey,
		TLSCert: t.TLSCert, TLSKey: t.TLSKey, TLSCA: t.TLSCA, TLSServerName: t.TLSServerName,
		TaskQueue: t.TaskQueue, PayloadStore: t.PayloadStore,
	}
	if tc.Address == "" {
		tc.Address = config.DefaultAddress
	}
	if tc.Namespace == "" {
		tc.Namespace = config.DefaultNamespace
	}
	return tc
}

// Dial connects to Temporal (TLS and API key as configured) with payloads
// of 64 KiB and more offloaded to the payload store, which it returns too:
// give it to agents (Agent.Store) and close the client when done.
func Dial(ctx context.Context, t Temporal, logger *slog.Logger) (client.Client, payloadstore.Store, error) {
	tc := t.internal()
	store, err := tc.Store(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := tc.Dial(ctx, logger, nil)
	if err != nil {
		return nil, nil, err
	}
	return c, store, nil
}

// Limits bound what one worker process runs at once. Zero fields take the
// defaults of the worker command.
type Limits struct {
	Activities      int           // EVE_MAX_CONCURRENT_ACTIVITIES, default 200
	LocalActivities int           // EVE_MAX_CONCURRENT_LOCAL_ACTIVITIES, default 200
	WorkflowTasks   int           // EVE_MAX_CONCURRENT_WORKFLOW_TASKS, default 100
	CachedWorkflows int           // EVE_MAX_CACHED_WORKFLOWS, default 2000 (process-wide)
	StopTimeout     time.Duration // EVE_WORKER_STOP_TIMEOUT, default 30s: in-flight tools' time to finish on stop
}

// LimitsFromEnv reads Limits from the environment, with the defaults.
func LimitsFromEnv() Limits {
	l := workerhost.LimitsFromEnv()
	return Limits{Activities: l.Activities, LocalActivities: l.LocalActivities, WorkflowTasks: l.WorkflowTasks,
		CachedWorkflows: l.CachedWorkflows, StopTimeout: l.StopTimeout}
}

func (l Limits) internal() workerhost.Limits {
	return workerhost.Limits{
		Activities: l.Activities, LocalActivities: l.LocalActivities,
		WorkflowTasks: l.WorkflowTasks, CachedWorkflows: l.CachedWorkflows,
		StopTimeout: l.StopTimeout,
	}.WithDefaults()
}

// Deployment opts a worker into Temporal Worker Versioning: it serves one
// build of a worker deployment. A build's turns and tool executions stay
// pinned to it until they finish, while sessions move to the deployment's
// current build (docs/deploy.md, Deploying a new build). The zero value is
// an unversioned worker.
type Deployment struct {
	// Name of the worker deployment (EVE_DEPLOYMENT_NAME); empty: the
	// worker's task queue.
	Name string
	// BuildID names this build (EVE_BUILD_ID); empty: unversioned.
	BuildID string
	// MakeCurrent makes the build current once the worker polls
	// (EVE_MAKE_CURRENT=true), as `temporal worker deployment
	// set-current-version` does: for one worker or a first deploy.
	MakeCurrent bool
}

// DeploymentFromEnv reads Deployment from the environment.
func DeploymentFromEnv() Deployment {
	d := workerhost.DeploymentFromEnv()
	return Deployment{Name: d.Name, BuildID: d.BuildID, MakeCurrent: d.MakeCurrent}
}

func (d Deployment) internal() workerhost.Deployment {
	return workerhost.Deployment{Name: d.Name, BuildID: d.BuildID, MakeCurrent: d.MakeCurrent}
}

// WorkerOptions configure NewWorker. WorkerOptionsFromEnv reads them all
// from the worker command's environment variables.
type WorkerOptions struct {
	Temporal Temporal
	Limits   Limits
	// Deployment is the worker's build for Worker Versioning (zero:
	// unversioned).
	Deployment Deployment
	// MetricsAddr is where Prometheus /metrics (the SDK's and eve's own)
	// listens (EVE_METRICS_ADDR, default 127.0.0.1:9464); empty disables
	// it. When it is the default and another process holds that port (a
	// second worker on the host), the worker serves on a free loopback
	// port instead, logs it and reports it in MetricsURL.
	MetricsAddr string
	// ActionSecret signs delegated tools' completion URLs
	// (EVE_ACTION_SECRET, at least 16 bytes, the same on the API servers);
	// PublicURL is the API server as external jobs reach it
	// (EVE_PUBLIC_URL, default http://$EVE_ADDR). Without a secret,
	// delegated tools fail (unless the agent has its own Actions).
	ActionSecret string
	PublicURL    string
	// ModelFromEnv replaces the agent's model with EVE_MODEL's when set
	// (anthropic:<model>, openai:<model>, scripted:<file>).
	ModelFromEnv bool
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// WorkerOptionsFromEnv reads WorkerOptions from the environment, as the
// worker command does (ModelFromEnv is true). Tracing is configured by
// EVE_OTEL_EXPORTER in every case.
func WorkerOptionsFromEnv() WorkerOptions {
	return WorkerOptions{
		Temporal:     TemporalFromEnv(),
		Limits:       LimitsFromEnv(),
		Deployment:   DeploymentFromEnv(),
		MetricsAddr:  config.EnvOrEmpty("EVE_METRICS_ADDR", config.DefaultMetricsAddr), // set but empty: off
		ActionSecret: config.Env("EVE_ACTION_SECRET", ""),
		PublicURL:    config.Env("EVE_PUBLIC_URL", "http://"+config.Env("EVE_ADDR", config.DefaultEveAddr)),
		ModelFromEnv: true,
	}
}

// Worker is a Temporal worker serving one agent, with its own client.
type Worker struct {
	w          *workerhost.Worker
	c          client.Client
	close      func()
	limits     workerhost.Limits
	logger     *slog.Logger
	metricsURL string
	agent      *agent.Agent
}

// NewWorker dials Temporal and registers the agent on a new worker, as the
// worker command does: TLS or a Cloud API key, the payload store (set as
// the agent's Store and the client's External Storage), Prometheus
// metrics, tracing (EVE_OTEL_EXPORTER), limits, completion URLs of
// delegated tools (ActionSecret, PublicURL; the agent's own Actions win),
// and a check of eve's search attributes. Run it, or Start and Stop it;
// Close releases the client.
func NewWorker(ctx context.Context, a *agent.Agent, opts WorkerOptions) (*Worker, error) {
	if a == nil {
		return nil, errors.New("eve.NewWorker: no agent")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	tc := opts.Temporal.internal()
	if err := tc.UseAgentTaskQueue(a.Name); err != nil {
		return nil, err
	}
	limits := opts.Limits.internal()
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	c, metricsURL, closeClient, err := workerhost.Dial(ctx, logger, tc, opts.MetricsAddr)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Worker, error) { closeClient(); return nil, err }
	if a.Logger == nil {
		a.Logger = logger
	}
	if a.Store, err = tc.Store(ctx); err != nil {
		return fail(err)
	}
	if opts.ModelFromEnv {
		if err := workerhost.UseModelFromEnv(a); err != nil {
			return fail(err)
		}
	}
	if a.Actions == nil && opts.ActionSecret != "" {
		a.Actions = &agent.Actions{Secret: []byte(opts.ActionSecret), PublicURL: opts.PublicURL}
	}
	if a.Actions == nil {
		logger.Warn("delegated tools will fail: set EVE_ACTION_SECRET (WorkerOptions.ActionSecret) and EVE_PUBLIC_URL")
	}
	w, err := workerhost.New(c, tc.Namespace, tc.TaskQueue, a, limits, opts.Deployment.internal())
	if err != nil {
		return fail(err)
	}
	return &Worker{w: w, c: c, close: closeClient, limits: limits, logger: logger, metricsURL: metricsURL, agent: a}, nil
}

// Client is the worker's Temporal client (its payloads go to the store).
func (w *Worker) Client() client.Client { return w.c }

// MetricsURL is where /metrics is served, or "".
func (w *Worker) MetricsURL() string { return w.metricsURL }

// Start starts polling; Stop stops (in-flight tools get the stop timeout).
func (w *Worker) Start() error { return w.w.Start() }

// Stop stops the worker, letting in-flight tools finish within the stop
// timeout.
func (w *Worker) Stop() { w.w.Stop() }

// Run polls until ctx ends, then stops gracefully.
func (w *Worker) Run(ctx context.Context) error {
	stop := make(chan any)
	go func() {
		<-ctx.Done()
		w.logger.Info("worker stopping: in-flight tools may finish", "stopTimeout", w.limits.EffectiveStopTimeout())
		close(stop)
	}()
	if err := w.w.Run(stop); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// Close closes the worker's client, metrics server and tracing.
func (w *Worker) Close() { w.close() }

// ServerOptions configure NewHandler.
type ServerOptions struct {
	// TaskQueue of the agent's workers (default the agent's name, as
	// NewWorker's and the commands').
	TaskQueue string
	// APIKey is a bearer key callers must send (EVE_API_KEY); KeysFile maps
	// keys to principals (EVE_API_KEYS_FILE, docs/http-api.md). With
	// neither the server is open: it answers loopback Host headers only,
	// unless InsecureOpen.
	APIKey       string
	KeysFile     string
	InsecureOpen bool
	// Addr is where the handler is served (host:port), for the open-server
	// check: an open server beyond loopback is refused unless InsecureOpen.
	Addr string
	// ActionSecret verifies completion URLs (EVE_ACTION_SECRET, the
	// workers' secret); empty: completion URLs answer 404.
	ActionSecret string
	// CORSOrigins browsers may call from (default: see docs/http-api.md).
	CORSOrigins []string
	// MaxStreamsPerPrincipal (default 100; negative: no bound).
	MaxStreamsPerPrincipal int
	// MaxToolCalls bounds the calls of one executeToolCalls request of the
	// tools API (default 32; negative: no bound): a request with more is
	// refused (400 too_many_calls) before any starts.
	MaxToolCalls int
	// AgentName reported by /eve/v1/info (default the agent's name).
	AgentName string
	// MaxBodyBytes bounds request bodies (default 1 MiB, as `serve`'s
	// --max-body-bytes); BodyReadTimeout how long a body may take to
	// arrive (default 10 s; past it 408, docs/http-api.md "Security").
	MaxBodyBytes    int64
	BodyReadTimeout time.Duration
	// LeaseDuration ends each stream response for clients that asked for
	// stream control (default 60 s); HeartbeatInterval is an idle stream's
	// blank line (default 10 s); PollInterval how often a session's reader
	// polls a running turn (default 10 ms: this handler has no notification
	// bus, so its streams poll; `serve` with EVE_NOTIFY pushes).
	LeaseDuration     time.Duration
	HeartbeatInterval time.Duration
	PollInterval      time.Duration
	Logger            *slog.Logger
	// AuthorizeSession lets a caller other than a session's owner (its
	// initiator) act on it: return true to allow. Nil: owners only (and
	// services whose keys-file entry can act for the owner).
	AuthorizeSession func(ctx context.Context, a SessionAccess) bool
}

// SessionAccess is what ServerOptions.AuthorizeSession decides on: a caller
// who is not the session's owner asks to act on it (SessionID, Action —
// "send", "respond", "stream", "cancel", "clear", "compact" or "reset" —,
// Owner and Caller, and the Message or the Requests and Responses of the
// request).
type SessionAccess = api.SessionAccess

// NewHandler serves eve's session protocol under /eve/v1/ for the agent
// (whose workers poll opts.TaskQueue), its tools API under /v1/ and
// delegated tools' completion URLs under /eve/v1/actions/. c must offload
// payloads to the workers' payload store (use Dial).
func NewHandler(c client.Client, a *agent.Agent, opts ServerOptions) (http.Handler, error) {
	if a == nil {
		return nil, errors.New("eve.NewHandler: no agent")
	}
	keys, err := api.LoadKeys(opts.APIKey, opts.KeysFile)
	if err != nil {
		return nil, err
	}
	tq := cmp.Or(opts.TaskQueue, a.Name)
	if tq == "" {
		return nil, errors.New("eve.NewHandler: no task queue: set ServerOptions.TaskQueue, or the agent's Name (the default)")
	}
	tools, err := toolsapi.New(toolsapi.Options{Client: c, TaskQueue: tq, Agent: a, Logger: opts.Logger, Caller: api.Caller, MaxToolCalls: opts.MaxToolCalls})
	if err != nil {
		return nil, fmt.Errorf("tools API: %w", err)
	}
	var actions http.Handler
	if opts.ActionSecret != "" {
		if actions, err = ActionsHandler(c, []byte(opts.ActionSecret), opts.Logger); err != nil {
			return nil, err
		}
	}
	info := api.AgentInfo(a)
	info.ModelProvider = "scripted"
	if p, _, ok := strings.Cut(info.ModelID, ":"); ok && (p == "anthropic" || p == "openai") {
		info.ModelProvider = p
	}
	if opts.AgentName != "" {
		info.AgentName = opts.AgentName
	}
	return api.New(api.Options{
		AuthorizeSession: opts.AuthorizeSession,
		Sessions:         &sessions.Service{Client: c, TaskQueue: tq}, Keys: keys,
		Addr: opts.Addr, InsecureOpen: opts.InsecureOpen, MaxStreamsPerPrincipal: opts.MaxStreamsPerPrincipal,
		CORSOrigins: opts.CORSOrigins, Logger: opts.Logger, Info: info,
		Actions: actions, Tools: tools.Handler(),
		MaxBodyBytes: opts.MaxBodyBytes, BodyReadTimeout: opts.BodyReadTimeout,
		LeaseDuration: opts.LeaseDuration, HeartbeatInterval: opts.HeartbeatInterval, PollInterval: opts.PollInterval,
	})
}

// ToolsHandler serves the agent's tools API (GET /v1/tools, POST
// /v1/tools/search, POST /v1/tools/{name}/execute, GET /v1/executions/{id};
// docs/tools-api.md) without authentication of its own: executions run on
// the workers of taskQueue (empty: the agent's name), for the user a
// request names.
func ToolsHandler(c client.Client, a *agent.Agent, taskQueue string, logger *slog.Logger) (http.Handler, error) {
	if a == nil {
		return nil, errors.New("eve.ToolsHandler: no agent")
	}
	if taskQueue = cmp.Or(taskQueue, a.Name); taskQueue == "" {
		return nil, errors.New("eve.ToolsHandler: no task queue: pass one, or name the agent (the default)")
	}
	svc, err := toolsapi.New(toolsapi.Options{Client: c, TaskQueue: taskQueue, Agent: a, Logger: logger})
	if err != nil {
		return nil, err
	}
	return svc.Handler(), nil
}

// ActionsHandler serves delegated tools' completion URLs: mount it at
// signals.ActionsPath (/eve/v1/actions/) on the server EVE_PUBLIC_URL
// names. secret is the workers' EVE_ACTION_SECRET.
func ActionsHandler(c client.Client, secret []byte, logger *slog.Logger) (http.Handler, error) {
	signer, err := capability.NewSigner(secret)
	if err != nil {
		return nil, err
	}
	return &actionsvc.Service{Client: c, Signer: signer, Logger: logger}, nil
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
