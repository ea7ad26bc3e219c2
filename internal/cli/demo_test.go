package cli

import (
	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/config"
)

// newRootCommand is the demo binary's command tree (cmd/eve's).
func newRootCommand() *cobra.Command {
	return NewRootCommand(App{Name: "eve", Agent: demo.Agent, TaskQueue: config.DefaultTaskQueue})
}
