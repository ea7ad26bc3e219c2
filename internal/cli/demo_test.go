package cli

import (
	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/demo"
)

// newRootCommand is the demo binary's command tree (cmd/eve's).
func newRootCommand() *cobra.Command {
	return NewRootCommand(App{Name: "eve", Agent: demo.Agent})
}
