// Command worker runs eve's workflows and activities for the demo agent
// against a Temporal cluster. Operators run one or more of these.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/workerhost"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "eve worker:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		tc          config.Temporal
		limits      workerhost.Limits
		metricsAddr string
		logLevel    string
		actions     config.Actions
	)
	cmd := &cobra.Command{
		Use:           "worker",
		Short:         "Run eve's Temporal worker (workflows and activities of the demo agent)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, logger, tc, limits, actions, metricsAddr)
		},
	}
	tc.Bind(cmd.Flags())
	limits.Bind(cmd.Flags())
	actions.Bind(cmd.Flags(), "http://"+config.Env("EVE_ADDR", config.DefaultEveAddr))
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", config.Env("EVE_METRICS_ADDR", "127.0.0.1:9464"), "where /metrics listens; empty disables it (env EVE_METRICS_ADDR)")
	cmd.Flags().StringVar(&logLevel, "log-level", config.Env("EVE_LOG_LEVEL", "info"), "debug, info, warn or error (env EVE_LOG_LEVEL)")
	return cmd
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func run(ctx context.Context, logger *slog.Logger, tc config.Temporal, limits workerhost.Limits, actions config.Actions, metricsAddr string) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	c, metricsURL, closeClient, err := workerhost.Dial(ctx, logger, tc, metricsAddr)
	if err != nil {
		return err
	}
	defer closeClient()
	if metricsURL != "" {
		logger.Info("metrics", "url", metricsURL)
	}
	a, err := demo.Agent()
	if err != nil {
		return err
	}
	a.Logger = logger
	// The store the client offloads payloads to (tc's copies share it).
	if a.Store, err = tc.Store(ctx); err != nil {
		return err
	}
	if err := workerhost.UseModelFromEnv(a); err != nil {
		return err
	}
	if a.Actions, err = actions.Worker(); err != nil {
		logger.Warn("delegated tools will fail until this is fixed", "err", err)
	}
	w, err := workerhost.New(c, tc.Namespace, tc.TaskQueue, a, limits)
	if err != nil {
		return err
	}
	logger.Info("worker started", "address", tc.Address, "namespace", tc.Namespace, "taskQueue", tc.TaskQueue, "agent", a.Name, "payloadStore", a.Store.Location())
	stopCh := make(chan any)
	go func() {
		<-ctx.Done()
		logger.Info("worker stopping: in-flight tools may finish", "stopTimeout", limits.EffectiveStopTimeout())
		close(stopCh)
	}()
	if err := w.Run(stopCh); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	logger.Info("worker stopped")
	return nil
}
