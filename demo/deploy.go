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

// ResearchInput is research's input (the model adds taskId to continue a
// task: tools.Task.Resumable).
type ResearchInput struct {
	Topic string `json:"topic,omitempty" jsonschema:"the topic to research, for a new task"`
}

// Finding is what one research call reports.
type Finding struct {
	TaskID  string `json:"taskId"`
	Topic   string `json:"topic"`
	Round   int    `json:"round"`
	Finding string `json:"finding"`
}

// researchState is what a research task keeps between calls.
type researchState struct {
	Topic  string `json:"topic"`
	Rounds int    `json:"rounds"`
}

// Research is the demo's resumable task (tools.Task{Resumable: true}):
// "research <topic>" starts a task; "more <taskId>", in the same turn or
// any later one, calls it again, and it digs one round deeper from the
// state its last call saved.
func Research() *tools.Tool {
	t := tools.Func("research", "Research a topic, one round of findings per call.",
		func(ctx *tools.Context, in ResearchInput) (Finding, error) {
			var st researchState
			ctx.TaskState(&st)
			if topic := strings.TrimSpace(in.Topic); topic != "" {
				st.Topic = topic
			}
			st.Rounds++
			ctx.ReportProgress(0, 1, "researching "+st.Topic)
			select {
			case <-ctx.Done():
				return Finding{}, ctx.Err()
			case <-time.After(deployStep):
			}
			if err := ctx.SaveTaskState(st); err != nil {
				return Finding{}, err
			}
			return Finding{TaskID: ctx.TaskID, Topic: st.Topic, Round: st.Rounds,
				Finding: fmt.Sprintf("round %d on %s: %d sources agree", st.Rounds, st.Topic, 2*st.Rounds+1)}, nil
		})
	t.HeartbeatTimeout = 5 * time.Second
	t.Timeout = time.Minute
	return tools.AsTask(t, tools.Task{Resumable: true})
}
