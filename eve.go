// Package eve is the public entry point for running your own agent on
// Temporal.
//
// The shortest app is a main package that hands its agent to Main:
//
//	func main() { eve.Main(shop.Agent) }
//
// Its binary then has eve's subcommands — dev (the whole stack locally),
// worker, serve, mcp, doctor, session, tools, action and replay (the
// deploy gate: saved workflow histories against this build) — with eve's flags
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
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/assemble"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/config"
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
// worker, serve, mcp). The agent is what the app declares; the commands
// wire in what runs it (agent.Host: the Temporal client and payload store
// from their flags and environment, completion URLs from
// EVE_ACTION_SECRET and EVE_PUBLIC_URL). EVE_MODEL, when set, replaces
// its Model. opts adjust what the commands serve (WithAuthorizeSession).
func Main(newAgent func() (*agent.Agent, error), opts ...Option) {
	name := filepath.Base(os.Args[0])
	cli.Main(name, Command(name, newAgent, opts...))
}

// Option adjusts the commands Main and Command run.
type Option func(*mainOptions)

type mainOptions struct {
	authorize func(ctx context.Context, a SessionAccess) bool
}

// WithAuthorizeSession gives the API server of the serve and dev commands
// the hook ServerOptions.AuthorizeSession gives NewHandler: it decides
// whether a caller other than a session's owner (its initiator, a service
// whose keys-file canActFor names the owner, or a reviewer whose
// keys-file reviews grant covers it) may act on the session.
func WithAuthorizeSession(fn func(ctx context.Context, a SessionAccess) bool) Option {
	return func(o *mainOptions) { o.authorize = fn }
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
func Command(name string, newAgent func() (*agent.Agent, error), opts ...Option) *cobra.Command {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	return cli.NewRootCommand(cli.App{Name: name, Agent: newAgent, AuthorizeSession: o.authorize})
}

// Temporal is how to reach the Temporal cluster, which task queue the
// agent's workers poll, and where large payloads and conversations live
// (Address, Namespace, APIKey, TLSCert, TLSKey, TLSCA, TLSServerName,
// TaskQueue, PayloadStore). Every worker, API server and CLI of a
// deployment must use the same PayloadStore. It is the struct the
// commands bind their flags onto; empty Address and Namespace take eve's
// defaults (127.0.0.1:7233, "default").
type Temporal = config.Temporal

// TemporalFromEnv reads Temporal from the environment, with eve's defaults.
func TemporalFromEnv() Temporal { return config.TemporalFromEnv() }

// Dial connects to Temporal (TLS and API key as configured) with payloads
// of 64 KiB and more offloaded to the payload store, which it returns too:
// give it to the worker's host (agent.Host.Store) and close the client
// when done.
func Dial(ctx context.Context, t Temporal, logger *slog.Logger) (client.Client, payloadstore.Store, error) {
	tc := t.WithDefaults()
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

// Limits bound what one worker process runs at once (Activities,
// LocalActivities, WorkflowTasks, CachedWorkflows, StopTimeout). Zero
// fields take the defaults of the worker command. It is the struct the
// worker command binds its flags onto.
type Limits = workerhost.Limits

// LimitsFromEnv reads Limits from the environment, with the defaults.
func LimitsFromEnv() Limits { return workerhost.LimitsFromEnv() }

// Deployment opts a worker into Temporal Worker Versioning: it serves one
// build of a worker deployment (Name, BuildID, MakeCurrent). A build's
// turns and tool executions stay pinned to it until they finish, while
// sessions move to the deployment's current build (docs/deploy.md,
// Deploying a new build). The zero value is an unversioned worker.
type Deployment = workerhost.Deployment

// DeploymentFromEnv reads Deployment from the environment
// (EVE_DEPLOYMENT_NAME, EVE_BUILD_ID, EVE_MAKE_CURRENT).
func DeploymentFromEnv() Deployment { return workerhost.DeploymentFromEnv() }

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
	// delegated tools fail.
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
	w *assemble.Worker
}

// NewWorker dials Temporal and registers the agent on a new worker, as the
// worker command does (both go through one assembly): TLS or a Cloud API
// key, the payload store (the host's Store and the client's External
// Storage), Prometheus metrics, tracing (EVE_OTEL_EXPORTER), limits,
// Worker Versioning, completion URLs of delegated tools (ActionSecret,
// PublicURL), and a check of eve's search attributes. Run it, or Start and Stop it; Close releases
// the client.
func NewWorker(ctx context.Context, a *agent.Agent, opts WorkerOptions) (*Worker, error) {
	if a == nil {
		return nil, errors.New("eve.NewWorker: no agent")
	}
	w, err := assemble.NewWorker(ctx, a, assemble.WorkerConfig{
		Temporal:     opts.Temporal.WithDefaults(),
		Limits:       opts.Limits.WithDefaults(),
		Deployment:   opts.Deployment,
		MetricsAddr:  opts.MetricsAddr,
		Actions:      config.Actions{Secret: opts.ActionSecret, PublicURL: opts.PublicURL},
		ModelFromEnv: opts.ModelFromEnv,
		Logger:       opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Worker{w: w}, nil
}

// Client is the worker's Temporal client (its payloads go to the store).
func (w *Worker) Client() client.Client { return w.w.Client }

// MetricsURL is where /metrics is served, or "".
func (w *Worker) MetricsURL() string { return w.w.MetricsURL }

// Start starts polling; Stop stops (in-flight tools get the stop timeout).
func (w *Worker) Start() error { return w.w.Start() }

// Stop stops the worker, letting in-flight tools finish within the stop
// timeout.
func (w *Worker) Stop() { w.w.Stop() }

// Run polls until ctx ends, then stops gracefully.
func (w *Worker) Run(ctx context.Context) error { return w.w.Run(ctx) }

// Close closes the worker's client, metrics server and tracing.
func (w *Worker) Close() { w.w.Close() }

// ServerOptions configure NewHandler (TaskQueue, APIKey, KeysFile,
// InsecureOpen, Addr, ActionSecret, CORSOrigins, MaxStreamsPerPrincipal,
// MaxToolCalls, AgentName, MaxBodyBytes, BodyReadTimeout, LeaseDuration,
// HeartbeatInterval, PollInterval, Notify, Logger, AuthorizeSession,
// TemporalUIURL, TemporalNamespace; each field says what it does and its
// default). It is the struct the serve and dev commands bind their flags
// onto.
type ServerOptions = api.ServerOptions

// SessionAccess is what ServerOptions.AuthorizeSession decides on: a caller
// who is not the session's owner (and holds no keys-file grant for it)
// asks to act on it (SessionID, Action — one of the Action constants,
// ActionDecisions to read its decision record —, Owner and Caller, and the
// Message or the Requests and Responses of the request). The listings ask
// too: the inbox asks ActionRespond with the one request it would list,
// the sessions list ActionStream, the jobs list ActionCancel and the
// decisions export ActionDecisions.
type SessionAccess = api.SessionAccess

// The actions of a SessionAccess.
const (
	ActionSend      = api.ActionSend      // send a message
	ActionRespond   = api.ActionRespond   // answer open requests
	ActionStream    = api.ActionStream    // read the event stream
	ActionCancel    = api.ActionCancel    // cancel the running turn
	ActionClear     = api.ActionClear     // clear the conversation
	ActionCompact   = api.ActionCompact   // compact the conversation
	ActionReset     = api.ActionReset     // reset the session
	ActionDecisions = api.ActionDecisions // read the decision record
	ActionStubs     = api.ActionStubs     // read which tool stubs matched (evals)
)

// NewHandler serves eve's session protocol under /eve/v1/ for the agent
// (whose workers poll opts.TaskQueue), its tools API under /v1/ and
// delegated tools' completion URLs under /eve/v1/actions/. c must offload
// payloads to the workers' payload store (use Dial).
func NewHandler(c client.Client, a *agent.Agent, opts ServerOptions) (http.Handler, error) {
	if a == nil {
		return nil, errors.New("eve.NewHandler: no agent")
	}
	srv, err := assemble.NewHandler(c, a, opts, nil)
	if err != nil {
		return nil, err // not a typed nil *api.Server
	}
	return srv, nil
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
