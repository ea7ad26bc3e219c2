package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/eve-temporal/eve/tools"
)

// DeployInput is deploy's input.
type DeployInput struct {
	Service string `json:"service" jsonschema:"the service to deploy, e.g. web"`
}

// Deployment is deploy's output.
type Deployment struct {
	Service string `json:"service"`
	URL     string `json:"url"`
}

// deploySteps and deployStep are how long the demo's deploy works.
const (
	deploySteps = 3
	deployStep  = time.Second
)

// Deploy is the demo's task tool (tools.AsTask): a call returns a receipt
// at once and the deploy works for a few seconds, reporting progress,
// while the conversation goes on; its result reaches the model in a
// <task_result> message. A stopped deploy (eve__task_cancel, a cancelled
// turn) unwinds at its next progress report.
func Deploy() *tools.Tool {
	t := tools.Func("deploy", "Deploy a service. It runs as a task: the call returns at once and the result arrives later.",
		func(ctx *tools.Context, in DeployInput) (Deployment, error) {
			service := strings.TrimSpace(in.Service)
			for i := range deploySteps {
				ctx.ReportProgress(float64(i), deploySteps, fmt.Sprintf("deploying %s: step %d of %d", service, i+1, deploySteps))
				select {
				case <-ctx.Done():
					return Deployment{}, ctx.Err()
				case <-time.After(deployStep):
				}
			}
			return Deployment{Service: service, URL: "https://" + service + ".demo.eve.dev"}, nil
		})
	t.InputSchema = []byte(`{"type":"object","properties":{"service":{"type":"string","minLength":1,"description":"the service to deploy, e.g. web"}},"required":["service"],"additionalProperties":false}`)
	t.HeartbeatTimeout = 5 * time.Second
	t.Timeout = time.Minute
	return tools.AsTask(t, tools.Task{Deadline: 5 * time.Minute})
}
