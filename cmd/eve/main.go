// Command eve is eve's CLI: `eve dev` runs the whole stack locally, `eve
// session ...` talks to sessions, and `eve serve` runs the API server.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eve:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "eve",
		Short:         "eve for Go on Temporal: durable AI-agent tools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newDevCommand(),
		newDoctorCommand(),
		newSessionCommand(),
		newServeCommand(),
		newActionCommand(),
		newToolsCommand(),
		newMCPCommand(),
	)
	return root
}
