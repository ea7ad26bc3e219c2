package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/assemble"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// apiFlags configure the API server of `eve serve` and `eve dev`: the
// flags bind onto the handler's one declaration of its settings
// (api.ServerOptions, which eve.ServerOptions is too).
type apiFlags struct {
	api.ServerOptions
	// corsOrigins is --cors-origins, a comma-separated list (or *) that
	// origins() reads into CORSOrigins.
	corsOrigins string
	// actions are the completion URLs' secret (ActionSecret) and, for the
	// dev command's worker, their public URL.
	actions config.Actions
}

// bindNotify registers --notify (EVE_NOTIFY).
func bindNotify(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "notify", config.Env("EVE_NOTIFY", ""), "bus that tells API servers a session has new events, so streams do not poll: postgres://user@host:port/db (PostgreSQL LISTEN/NOTIFY), set alike on workers and API servers; empty: the dev command notifies in process, serve polls (one reader per session) (env EVE_NOTIFY)")
}

func (f *apiFlags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Addr, "addr", config.Env("EVE_ADDR", config.DefaultEveAddr), "where the eve API server listens (env EVE_ADDR)")
	fs.StringVar(&f.APIKey, "eve-api-key", config.Env("EVE_API_KEY", ""), "bearer key callers must send; the principal is \"api-key\" (env EVE_API_KEY)")
	fs.StringVar(&f.KeysFile, "keys-file", config.Env("EVE_API_KEYS_FILE", ""), "JSON or YAML file mapping bearer keys to principals (env EVE_API_KEYS_FILE; see docs/http-api.md)")
	fs.DurationVar(&f.LeaseDuration, "stream-lease", envDuration("EVE_STREAM_LEASE", api.DefaultLeaseDuration), "how long one stream response lasts before the client reconnects (env EVE_STREAM_LEASE)")
	fs.DurationVar(&f.HeartbeatInterval, "stream-heartbeat", envDuration("EVE_STREAM_HEARTBEAT", api.DefaultHeartbeatInterval), "blank-line heartbeat interval of idle streams (env EVE_STREAM_HEARTBEAT)")
	fs.DurationVar(&f.PollInterval, "stream-poll", envDuration("EVE_STREAM_POLL", api.DefaultPollInterval), "how often a stream reads a running turn's new events (env EVE_STREAM_POLL)")
	fs.Int64Var(&f.MaxBodyBytes, "max-body-bytes", int64(config.EnvInt("EVE_MAX_BODY_BYTES", api.DefaultMaxBodyBytes)), "largest request body accepted (env EVE_MAX_BODY_BYTES)")
	fs.StringVar(&f.corsOrigins, "cors-origins", config.Env("EVE_CORS_ORIGINS", "*"), "comma-separated origins browsers may call from, or * (env EVE_CORS_ORIGINS)")
	fs.BoolVar(&f.InsecureOpen, "insecure-open", envBool("EVE_INSECURE_OPEN"), "serve without API keys beyond loopback (any address, any Host header); never on a network others reach (env EVE_INSECURE_OPEN=1)")
	fs.IntVar(&f.MaxStreamsPerPrincipal, "max-streams-per-principal", config.EnvInt("EVE_MAX_STREAMS_PER_PRINCIPAL", api.DefaultMaxStreamsPerPrincipal), "open streams one principal may hold; beyond it a stream answers 429 (env EVE_MAX_STREAMS_PER_PRINCIPAL; negative: no bound)")
	fs.IntVar(&f.MaxToolCalls, "max-tool-calls", config.EnvInt("EVE_MAX_TOOL_CALLS", toolsapi.DefaultMaxToolCalls), "tool calls one executeToolCalls request of the tools API may start; beyond it the request answers 400 too_many_calls (env EVE_MAX_TOOL_CALLS; negative: no bound)")
	bindNotify(fs, &f.Notify)
	fs.StringVar(&f.TemporalUIURL, "temporal-ui-url", config.Env("EVE_TEMPORAL_UI_URL", ""), "the Temporal Web UI's base URL (e.g. http://localhost:8233): the console at /console/ links each turn to its workflow there (env EVE_TEMPORAL_UI_URL; the dev command: its dev server's UI)")
	f.actions.Bind(fs, "http://"+config.Env("EVE_ADDR", config.DefaultEveAddr))
	fs.StringVar(&f.AgentName, "agent-name", config.Env("EVE_AGENT_NAME", ""), "agent name reported by /eve/v1/info (default: the agent's)")
}

// origins reads --cors-origins: "*" (or nothing) is the default, any.
func (f *apiFlags) origins() []string {
	var out []string
	for _, o := range strings.Split(f.corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" && o != "*" {
			out = append(out, o)
		}
	}
	return out
}

// envBool reads a boolean variable (1, true, yes, on); unset or anything else is false.
func envBool(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// checkOpen refuses, before anything starts, an API server without keys
// on a non-loopback address unless --insecure-open says so. It returns the
// keys.
func (f *apiFlags) checkOpen() (map[string]*auth.Principal, error) {
	keys, err := api.LoadKeys(f.APIKey, f.KeysFile)
	if err != nil {
		return nil, err
	}
	if _, err := api.New(api.Options{ServerOptions: api.ServerOptions{Addr: f.Addr, InsecureOpen: f.InsecureOpen}, Sessions: &sessions.Service{}, Keys: keys}); err != nil {
		return nil, err
	}
	return keys, nil
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func newServeCommand(app App) *cobra.Command {
	var (
		tc       config.Temporal
		af       apiFlags
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the eve API server (the session protocol eve's client speaks) against a Temporal cluster",
		Long: `{bin} serve serves eve's session protocol under /eve/v1/ on --addr (EVE_ADDR,
default 127.0.0.1:4111). Sessions run as Temporal workflows on the workers of
--task-queue; run at least one worker ({bin} worker, or {bin} dev) beside it.

Callers must send Authorization: Bearer <key> when EVE_API_KEY or a keys file
(EVE_API_KEYS_FILE) is configured. Without either the server is open: it
then listens only on a loopback address and answers only loopback Host
headers, unless --insecure-open (EVE_INSECURE_OPEN=1) says otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			if _, err := af.checkOpen(); err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			a, err := app.agent()
			if err != nil {
				return err
			}
			defer closeResolvers(a, logger)
			if err := tc.UseAgentTaskQueue(a.Name); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := tc.Dial(ctx, logger, nil)
			if err != nil {
				return err
			}
			defer c.Close()
			bus, err := notify.Open(ctx, af.Notify, logger)
			if err != nil {
				return fmt.Errorf("--notify: %w", err)
			}
			url, stop, err := startAPIServer(ctx, logger, c, tc, af, a, bus)
			if err != nil {
				return err
			}
			fmt.Printf("eve API      %s (Temporal %s, namespace %q, task queue %q)\n", url, tc.Address, tc.Namespace, tc.TaskQueue)
			<-ctx.Done()
			stop()
			return nil
		},
	}
	tc.Bind(cmd.Flags(), app.TaskQueue)
	af.Bind(cmd.Flags())
	af.AuthorizeSession = app.AuthorizeSession // the app's hook, not a flag
	cmd.Flags().StringVar(&logLevel, "log-level", config.Env("EVE_LOG_LEVEL", "info"), "debug, info, warn or error (env EVE_LOG_LEVEL)")
	return cmd
}

// startAPIServer listens on af.Addr and serves the session protocol (and
// a's tools API) until stop is called. It returns the server's base URL.
// bus, when set, tells streams that sessions changed (nil: they poll).
func startAPIServer(ctx context.Context, logger *slog.Logger, c client.Client, tc config.Temporal, af apiFlags, a *agent.Agent, bus notify.Bus) (string, func(), error) {
	keys, err := af.checkOpen()
	if err != nil {
		return "", nil, err
	}
	opts := af.ServerOptions
	opts.TaskQueue, opts.TemporalNamespace = tc.TaskQueue, tc.Namespace
	opts.CORSOrigins = af.origins()
	opts.ActionSecret = af.actions.Secret
	opts.Logger = logger
	srv, err := assemble.NewHandler(c, a, opts, bus)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", af.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("eve API server: listen on %s: %w (set EVE_ADDR or --addr to another host:port)", af.Addr, err)
	}
	switch {
	case srv.Open() && af.InsecureOpen:
		logger.Warn("eve API server is open beyond loopback (--insecure-open): no API keys are configured (EVE_API_KEY, EVE_API_KEYS_FILE), so anyone who reaches " + af.Addr + " drives every session as the anonymous principal")
	case srv.Open():
		logger.Warn("eve API server is open on loopback: no API keys are configured (EVE_API_KEY, EVE_API_KEYS_FILE), so every local caller is the anonymous principal; only loopback Host headers are answered")
	default:
		logger.Info("eve API server requires bearer keys", "keys", len(keys))
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Streams end when ctx does (they never end by themselves).
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("eve API server stopped", "err", err)
		}
	}()
	url := "http://" + ln.Addr().String()
	logger.Info("eve API server listening", "url", url)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		<-done
		srv.Close()
	}
	return url, stop, nil
}
