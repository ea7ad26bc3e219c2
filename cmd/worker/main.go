// Command worker runs eve's workflows and activities for the demo agent
// against a Temporal cluster: `eve worker` as a binary of its own, with the
// same flags. Operators run one or more of these.
package main

import (
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/config"
)

func main() {
	// The demo's queue, as cmd/eve's (see there).
	cli.Main("eve worker", cli.NewWorkerCommand(cli.App{Name: "worker", Agent: demo.Agent, TaskQueue: config.DefaultTaskQueue}))
}
