// Package cli holds the commands of an eve binary — dev, worker, serve,
// mcp, doctor, session, tools, action and replay — for any agent. Package eve
// (eve.Main) and cmd/eve, cmd/worker use it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/api"
)

// App is the agent an eve binary serves.
type App struct {
	// Name is the binary's name in usage lines, errors and hints (default
	// "eve").
	Name string
	// TaskQueue is the default task queue when neither --task-queue nor
	// EVE_TASK_QUEUE names one; empty: the agent's name, so an app's
	// binary never joins another app's queue (or the demo's, "eve").
	TaskQueue string
	// Agent returns a new agent definition. Each command that serves the
	// agent (dev, worker, serve, mcp) calls it once; the commands wire in
	// its host (agent.Host: the client, payload store, logger and
	// completion URLs), and EVE_MODEL replaces its Model.
	Agent func() (*agent.Agent, error)
	// AuthorizeSession is the API server's hook (api.Options.AuthorizeSession)
	// of the serve and dev commands; nil: none.
	AuthorizeSession func(context.Context, api.SessionAccess) bool
}

func (a App) name() string {
	if a.Name == "" {
		return "eve"
	}
	return a.Name
}

// text puts the binary's name for {bin} in a help text or hint, so each
// names the commands of the binary that prints it.
func (a App) text(s string) string { return strings.ReplaceAll(s, "{bin}", a.name()) }

func (a App) agent() (*agent.Agent, error) {
	if a.Agent == nil {
		return nil, errors.New("this binary has no agent: pass one to eve.Main")
	}
	ag, err := a.Agent()
	if err != nil {
		return nil, fmt.Errorf("build the agent: %w", err)
	}
	if ag == nil {
		return nil, errors.New("build the agent: it returned no agent")
	}
	return ag, nil
}

// closeResolvers releases what the agent's resolvers hold (a connection
// set's stdio servers, tools.Resolver.Close) once a command that served
// the agent is done with it.
func closeResolvers(a *agent.Agent, logger *slog.Logger) {
	for _, r := range a.Resolvers {
		if r.Close == nil {
			continue
		}
		if err := r.Close(); err != nil {
			logger.Warn("close a resolver", "resolver", r.Name, "err", err)
		}
	}
}

// Main runs cmd with SIGINT/SIGTERM cancelling its context, and exits 1
// with "<name>: <error>" when it fails.
func Main(name string, cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// NewRootCommand returns the binary's command tree.
func NewRootCommand(app App) *cobra.Command {
	root := &cobra.Command{
		Use:           app.name(),
		Short:         "eve for Go on Temporal: durable AI-agent tools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newDevCommand(app),
		newWorkerCommand(app, "worker"),
		newDoctorCommand(app),
		newSessionCommand(app),
		newInboxCommand(app),
		newDecisionsCommand(app),
		newServeCommand(app),
		newActionCommand(app),
		newToolsCommand(app),
		newMCPCommand(app),
		newReplayCommand(app),
	)
	app.nameCommands(root)
	return root
}

// NewWorkerCommand returns the worker command alone, for a binary that is
// only a worker (cmd/worker): its flags are the binary's.
func NewWorkerCommand(app App) *cobra.Command {
	cmd := newWorkerCommand(app, app.name())
	app.nameCommands(cmd)
	return cmd
}

// nameCommands puts the binary's name for {bin} in the help texts (and
// flag usages) of cmd and its subcommands.
func (a App) nameCommands(cmd *cobra.Command) {
	cmd.Short, cmd.Long, cmd.Example = a.text(cmd.Short), a.text(cmd.Long), a.text(cmd.Example)
	name := func(f *pflag.Flag) { f.Usage = a.text(f.Usage) }
	cmd.Flags().VisitAll(name)
	cmd.PersistentFlags().VisitAll(name)
	for _, c := range cmd.Commands() {
		a.nameCommands(c)
	}
}
