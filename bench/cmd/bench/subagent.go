package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A delegation (agent.Agent.Subagents, docs/subagents.md): the same answer
// as eve-turn/local-model, but the root delegates to a subagent that has
// get_weather. The root's call is a task of kind agent: its first call
// starts the child session (a child workflow of the turn), signals it the
// message; the child runs a turn of its own (the tool call and two model
// steps), signals the reply back, and the root's model reads it as the
// task's result. Beside it: eve-turn/local-model (the root calling
// get_weather itself). Hops count the child session and its turn too.
func init() {
	scenarios = append(scenarios, scenario{
		name: "eve-turn/subagent", baseline: "eve-turn/local-model", latency: true, hops: true,
		configs: []string{"fast"}, setup: eveSubagentSetup,
	})
}

const benchDelegateRules = `
rules:
  - match: weather
    steps:
      - calls: [{tool: forecaster, input: {message: "weather in Lisbon"}}]
      - reply: "Asked."
      - reply: "{{task.forecaster}}"
`

// benchForecasterRules: the child's first message is eve's subagent
// prompt, ending with the caller's message.
const benchForecasterRules = `
rules:
  - match: 'Caller message:\s*weather'
    steps:
      - calls: [{tool: get_weather, input: {city: "Lisbon"}}]
      - reply: "It is {{result.get_weather.condition}} in {{result.get_weather.city}}."
`

func eveSubagentSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	root, err := scripted.Parse([]byte(benchDelegateRules))
	if err != nil {
		return nil, nil, err
	}
	fm, err := scripted.Parse([]byte(benchForecasterRules))
	if err != nil {
		return nil, nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(weatherTool(false, false)); err != nil {
		return nil, nil, err
	}
	forecaster := &agent.Agent{Name: "forecaster", Description: "Says what the weather is.", Model: fm, Tools: reg, LocalModel: true}
	a := &agent.Agent{Name: "bench", Model: root, LocalModel: true, Subagents: []*agent.Agent{forecaster}}
	tq := env.Queue("eve-subagent")
	var workers []worker.Worker
	stop := func() {
		for _, w := range workers {
			w.Stop()
		}
	}
	for _, q := range agent.Queues(a, tq) {
		w := worker.New(env.Client, q.TaskQueue, env.WorkerOptions)
		if err := agent.Register(w, q.Agent, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
			stop()
			return nil, nil, err
		}
		if err := w.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		workers = append(workers, w)
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
	}, stop, nil
}
