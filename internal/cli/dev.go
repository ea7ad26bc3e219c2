package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/assemble"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/workerhost"
	"github.com/eve-temporal/eve/payloadstore"
)

func newDevCommand(app App) *cobra.Command {
	var (
		tc          config.Temporal
		limits      workerhost.Limits
		stateDir    string
		uiPort      int
		metricsAddr string
		af          apiFlags
		deployment  workerhost.Deployment
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole stack locally: Temporal dev server (SQLite under .eve/), worker and API server",
		Long: `dev starts the Temporal dev server from ./bin/temporal (or reuses one that
already answers at --address), keeping its state in .eve/temporal.db so sessions
survive a restart, then runs eve's worker with this binary's agent and the eve API
server (--addr, EVE_ADDR, default 127.0.0.1:4111) in this process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			if !cmd.Flags().Changed("public-url") && os.Getenv("EVE_PUBLIC_URL") == "" {
				// Jobs reach this process's API server, wherever --addr puts it.
				af.actions.PublicURL = "http://" + af.Addr
			}
			a, err := app.agent()
			if err != nil {
				return err
			}
			defer closeResolvers(a, logger)
			return runDev(cmd.Context(), cmd.OutOrStdout(), app.name(), logger, tc, limits, deployment, stateDir, uiPort, metricsAddr, af, a)
		},
	}
	tc.Bind(cmd.Flags(), app.TaskQueue)
	limits.Bind(cmd.Flags())
	deployment.Bind(cmd.Flags())
	cmd.Flags().StringVar(&stateDir, "state-dir", ".eve", "where the dev server keeps its SQLite file and, unless EVE_PAYLOAD_STORE or --payload-store names one, the payload store (<dir>/payloads)")
	cmd.Flags().IntVar(&uiPort, "ui-port", 8233, "Temporal Web UI port")
	bindMetricsAddr(cmd.Flags(), &metricsAddr)
	af.Bind(cmd.Flags())
	af.AuthorizeSession = app.AuthorizeSession // the app's hook, not a flag
	return cmd
}

// runDev runs the stack until ctx ends, printing where each part is to out
// and a first command of bin, the binary running it.
func runDev(ctx context.Context, out io.Writer, bin string, logger *slog.Logger, tc config.Temporal, limits workerhost.Limits, d workerhost.Deployment, stateDir string, uiPort int, metricsAddr string, af apiFlags, a *agent.Agent) error {
	// The stack's one worker is the whole deployment: a versioned dev
	// stack makes its build current itself.
	d.MakeCurrent = d.MakeCurrent || d.Versioned()
	cfg, err := assemble.WorkerConfig{
		Temporal: tc, Limits: limits, Deployment: d, MetricsAddr: metricsAddr, Actions: af.actions,
		ModelFromEnv: true, RegisterSearchAttributes: true, Logger: logger,
	}.Check(a.Name)
	if err != nil {
		return err
	}
	if _, err := af.checkOpen(); err != nil {
		return err // before the dev server and the worker start
	}
	if cfg.Temporal.PayloadStore == payloadstore.DefaultSpec && filepath.Clean(stateDir) != ".eve" {
		// The payload store lives beside the dev server's state.
		cfg.Temporal.PayloadStore = "file:" + filepath.Join(stateDir, "payloads")
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	reachable := devserver.Reachable(rctx, cfg.Temporal.Address)
	// A dev server, started here or reused: keep the stack's cancelled
	// requests from wedging its SQLite (internal/devserver/wedge.go).
	cfg.Temporal.DialOptions = append(cfg.Temporal.DialOptions, devserver.ShieldOption())
	cancel()
	if reachable {
		fmt.Fprintf(out, "Temporal     %s (already running; reusing it)\n", cfg.Temporal.Address)
	} else {
		host, port, err := splitHostPort(cfg.Temporal.Address)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(stateDir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", stateDir, err)
		}
		db := filepath.Join(stateDir, "temporal.db")
		srv, err := devserver.Start(ctx, devserver.Options{
			Host: host, Port: port, UI: true, UIPort: uiPort, DBFile: db,
			Namespace: cfg.Temporal.Namespace, Tuning: devserver.TuningFast,
		})
		if err != nil {
			return fmt.Errorf("start the Temporal dev server: %w", err)
		}
		defer srv.Stop()
		fmt.Fprintf(out, "Temporal     %s (dev server, state in %s)\n", srv.Addr, db)
		fmt.Fprintf(out, "Temporal UI  %s\n", srv.UIAddr)
		if af.TemporalUIURL == "" {
			af.TemporalUIURL = srv.UIAddr
		}
	}
	// The local stack keeps its own action secret, so completion URLs
	// survive a restart of eve dev.
	if err := cfg.Actions.LoadOrCreateSecret(stateDir); err != nil {
		return fmt.Errorf("action secret: %w", err)
	}
	af.actions = cfg.Actions
	// The worker tells the API server of new events: in process, or
	// through EVE_NOTIFY when set (then other API servers hear too).
	bus, err := notify.Open(ctx, af.Notify, logger)
	if err != nil {
		return fmt.Errorf("--notify: %w", err)
	}
	if bus == nil {
		bus = notify.NewLocal()
	}
	cfg.Host.Notifier = bus
	w, err := assemble.NewWorker(ctx, a, cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	if w.MetricsURL != "" {
		fmt.Fprintf(out, "Metrics      %s\n", w.MetricsURL)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	fmt.Fprintf(out, "Worker       task queue %q, agent %q%s\n", w.TaskQueue, a.Name, buildNote(w.Deployment()))
	tcAPI := cfg.Temporal
	tcAPI.TaskQueue = w.TaskQueue
	apiURL, stopAPI, err := startAPIServer(ctx, logger, w.Client, tcAPI, af, a, bus)
	if err != nil {
		return err
	}
	defer stopAPI()
	fmt.Fprintf(out, "eve API      %s/eve/v1/\n", apiURL)
	fmt.Fprintf(out, "Console      %s/console/\n", loopbackURL(apiURL))
	msg := `"hello"`
	if a.Name == "demo" {
		msg = `"what's the weather in Paris"`
	}
	// --url when a bare session command would reach another server.
	fmt.Fprintf(out, "Try:         %s session send %s%s\n", bin, msg, urlFlag(loopbackURL(apiURL)))
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return nil
}

// loopbackURL is a server's URL as a client on this host dials it: an
// unspecified host (0.0.0.0, ::) becomes 127.0.0.1.
func loopbackURL(u string) string {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return u
	}
	host, port, err := net.SplitHostPort(rest)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	return u
}

// buildNote names a versioned worker's build.
func buildNote(d workerhost.Deployment) string {
	if !d.Versioned() {
		return ""
	}
	return fmt.Sprintf(", build %q of deployment %q (current)", d.BuildID, d.Name)
}
