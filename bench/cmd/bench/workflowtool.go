package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A workflow tool (tools.DefineWorkflow): the same turn as eve-turn, its
// get_weather a workflow of the app's own that runs the weather lookup as
// one regular activity, started by the turn as a child workflow. Beside it:
// eve-turn/local-model (the same turn with get_weather an activity tool)
// and raw-child/regular (the raw SDK's ExecuteChildWorkflow doing the same
// shape).
func init() {
	scenarios = append(scenarios, scenario{
		name: "eve-turn/workflow-tool", baseline: "raw-child/regular", latency: true, hops: true,
		configs: []string{"fast"}, setup: eveWorkflowToolSetup,
	})
}

const (
	benchToolWorkflow = "bench.WeatherWorkflow"
	benchToolActivity = "bench.Weather"
)

type wfWeatherIn struct {
	City string `json:"city"`
}

func benchWeatherWorkflow(ctx workflow.Context, in wfWeatherIn) (map[string]any, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, DisableEagerExecution: true})
	var out map[string]any
	err := workflow.ExecuteActivity(actx, benchToolActivity, in).Get(actx, &out)
	return out, err
}

func benchWeather(ctx context.Context, in wfWeatherIn) (map[string]any, error) {
	return map[string]any{"city": in.City, "condition": "sunny"}, nil
}

func eveWorkflowToolSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	m, err := scripted.Parse([]byte(benchRules))
	if err != nil {
		return nil, nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(tools.DefineWorkflow("get_weather", "Weather for a city.",
		json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), nil,
		tools.Workflow{Type: benchToolWorkflow, ExecutionTimeout: time.Minute})); err != nil {
		return nil, nil, err
	}
	tq := env.Queue("eve-workflow-tool")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	a := &agent.Agent{Name: "bench", Model: m, Tools: reg, LocalModel: true,
		RegisterWorker: func(r worker.Registry) {
			r.RegisterWorkflowWithOptions(benchWeatherWorkflow, workflow.RegisterOptions{Name: benchToolWorkflow})
			r.RegisterActivityWithOptions(benchWeather, activity.RegisterOptions{Name: benchToolActivity})
		}}
	if err := agent.Register(w, a, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
	return func(ctx context.Context, i int) (time.Duration, error) {
		res, err := svc.CreateAndSend(ctx, hopSession(ctx), nil, signals.SendRequest{Message: "weather", Wait: true})
		if err != nil {
			return 0, err
		}
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != "It is sunny in Lisbon." {
			return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
		}
		return 0, nil
	}, w.Stop, nil
}
