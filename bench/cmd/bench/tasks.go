package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/rawsdk"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A task call (tools.AsTask, docs/tasks.md): the same turn as
// eve-turn/local-model, its get_weather a task. The model calls it (a
// receipt at once, the tool's activity started by the turn and not
// awaited), says it started, the turn holds for the result (turn.waiting
// on tasks), and the model is called a third time with the
// <task_result>. Beside it: eve-turn/local-model (the same turn with a
// regular call) and raw-task/regular (the raw SDK starting the activity,
// calling the model, then awaiting the activity and calling the model).
func init() {
	scenarios = append(scenarios,
		scenario{name: "eve-turn/task", baseline: "raw-task/regular", latency: true, hops: true,
			configs: []string{"fast"}, setup: eveTaskSetup},
		scenario{name: "raw-task/regular", baseline: "raw-turn/regular", latency: true, hops: true,
			configs: []string{"fast"}, setup: rawTaskSetup},
	)
}

const benchTaskRules = `
rules:
  - match: weather
    steps:
      - calls: [{tool: get_weather, input: {city: "Lisbon"}}]
      - reply: "Started."
      - reply: "It is {{task.get_weather.condition}} in {{task.get_weather.city}}."
`

func eveTaskSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	m, err := scripted.Parse([]byte(benchTaskRules))
	if err != nil {
		return nil, nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(tools.AsTask(weatherTool(false, false), tools.Task{})); err != nil {
		return nil, nil, err
	}
	tq := env.Queue("eve-task")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
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
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != "It is cloudy in Lisbon." && res.Outcome.Reply != "It is sunny in Lisbon." {
			return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
		}
		return 0, nil
	}, w.Stop, nil
}

func rawTaskSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-task")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	rawsdk.RegisterWorker(w)
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		var opts []rawsdk.RunOption
		if hopsRequested(ctx) {
			id := rawsdk.NextWorkflowID("hops")
			recordHop(ctx, id)
			opts = append(opts, rawsdk.WithID(id))
		}
		return 0, rawsdk.RunTaskTurn(ctx, env.Client, tq, rawsdk.Regular, opts...)
	}, w.Stop, nil
}
