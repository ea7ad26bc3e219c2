// Command eve is eve's CLI for the demo agent: `eve dev` runs the whole
// stack locally, `eve session ...` talks to sessions, `eve serve` runs the
// API server and `eve worker` a worker. Your own agent's binary gets the
// same commands from eve.Main.
package main

import (
	"os"
	"path/filepath"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/config"
)

// The demo keeps task queue "eve" (an eve.Main app's default is its
// agent's name, "demo" here), so existing sessions and deployments of
// cmd/eve and cmd/worker keep their queue.
func main() {
	name := filepath.Base(os.Args[0]) // as eve.Main names a binary
	cli.Main(name, cli.NewRootCommand(cli.App{Name: name, Agent: demo.Agent, TaskQueue: config.DefaultTaskQueue}))
}
