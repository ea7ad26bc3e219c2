package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/assemble"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/workerhost"
)

func newWorkerCommand(app App, use string) *cobra.Command {
	var (
		tc          config.Temporal
		limits      workerhost.Limits
		metricsAddr string
		logLevel    string
		actions     config.Actions
		notifyURL   string
		deployment  workerhost.Deployment
	)
	cmd := &cobra.Command{
		Use:           use,
		Short:         "Run eve's Temporal worker (workflows and activities of the agent)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			a, err := app.agent()
			if err != nil {
				return err
			}
			defer closeResolvers(a, logger)
			return RunWorker(cmd.Context(), logger, tc, limits, deployment, actions, metricsAddr, notifyURL, a)
		},
	}
	tc.Bind(cmd.Flags(), app.TaskQueue)
	limits.Bind(cmd.Flags())
	deployment.Bind(cmd.Flags())
	actions.Bind(cmd.Flags(), "http://"+config.Env("EVE_ADDR", config.DefaultEveAddr))
	bindMetricsAddr(cmd.Flags(), &metricsAddr)
	bindNotify(cmd.Flags(), &notifyURL)
	cmd.Flags().StringVar(&logLevel, "log-level", config.Env("EVE_LOG_LEVEL", "info"), "debug, info, warn or error (env EVE_LOG_LEVEL)")
	return cmd
}

// bindMetricsAddr registers --metrics-addr (EVE_METRICS_ADDR, which an
// empty value sets too: it turns metrics off like the flag does).
func bindMetricsAddr(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "metrics-addr", config.EnvOrEmpty("EVE_METRICS_ADDR", config.DefaultMetricsAddr),
		"where the worker's Prometheus /metrics listens, host:port; empty turns metrics off. When the default is taken (another worker on this host), a free loopback port is used and logged (env EVE_METRICS_ADDR)")
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// RunWorker dials Temporal (metrics, tracing, the payload store), serves a
// on a worker until ctx ends, then stops gracefully: in-flight tools get
// limits' stop timeout to finish. notifyURL (EVE_NOTIFY) names the bus
// that tells API servers of new events ("": none). An empty task queue is
// the agent's name. A build id in d opts the worker into Worker
// Versioning (docs/deploy.md).
func RunWorker(ctx context.Context, logger *slog.Logger, tc config.Temporal, limits workerhost.Limits, d workerhost.Deployment, actions config.Actions, metricsAddr, notifyURL string, a *agent.Agent) error {
	w, err := assemble.NewWorker(ctx, a, assemble.WorkerConfig{
		Temporal: tc, Limits: limits, Deployment: d, MetricsAddr: metricsAddr,
		Actions: actions, NotifyURL: notifyURL, ModelFromEnv: true, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer w.Close()
	if w.MetricsURL != "" {
		logger.Info("metrics", "url", w.MetricsURL)
	}
	logger.Info("worker started", append([]any{"address", tc.Address, "namespace", tc.Namespace, "taskQueue", w.TaskQueue, "agent", a.Name, "payloadStore", w.Store.Location()}, deploymentLog(w.Deployment())...)...)
	if err := w.Run(ctx); err != nil {
		return err
	}
	logger.Info("worker stopped")
	return nil
}

// deploymentLog is the log attributes of a versioned worker's build.
func deploymentLog(d workerhost.Deployment) []any {
	if !d.Versioned() {
		return nil
	}
	return []any{"deployment", d.Name, "buildId", d.BuildID, "makeCurrent", d.MakeCurrent}
}
