// Command shop is an example agent built on eve: its binary has eve's
// commands (dev, worker, serve, mcp, doctor, session, tools, action) for
// its own tools.
//
//	go run . dev                       # Temporal dev server, worker and API server
//	go run . session send "price of mug"
package main

import "github.com/eve-temporal/eve"

func main() { eve.Main(Agent) }
