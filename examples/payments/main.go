// Command payments is an example agent whose tool is a Nexus operation:
// refund runs the payments team's refund operation behind the Nexus
// endpoint "payments". The operation is served by a second worker in
// another namespace ("payments", task queue "refunds"); the agent's
// namespace reaches it only through the endpoint (docs/workflow-tools.md).
//
//	temporal server start-dev --namespace payments
//	temporal operator nexus endpoint create --name payments \
//	  --target-namespace payments --target-task-queue refunds
//	go run . handler                          # the payments team's worker
//	go run . dev --address localhost:7233     # the agent, in namespace default
//	go run . session send "refund ch_1001"
//
// See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/eve-temporal/eve"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "handler" {
		if err := runHandler(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "payments handler:", err)
			os.Exit(1)
		}
		return
	}
	eve.Main(Agent)
}
