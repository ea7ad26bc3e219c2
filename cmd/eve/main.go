// Command eve is eve's CLI for the demo agent: `eve dev` runs the whole
// stack locally, `eve session ...` talks to sessions, `eve serve` runs the
// API server and `eve worker` a worker. Your own agent's binary gets the
// same commands from eve.Main.
package main

import (
	"github.com/eve-temporal/eve"
	"github.com/eve-temporal/eve/demo"
)

func main() { eve.Main(demo.Agent) }
