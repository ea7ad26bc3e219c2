package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// eve's turn and park, doing the same work as bench/rawsdk: model step →
// weather tool → model step, through a session workflow and a turn child
// workflow, with events recorded. Each call starts a new session with its
// first message (Update-with-Start) and waits for the turn's outcome.
func init() {
	for _, v := range []struct {
		name, baseline   string
		localModel, tool bool
	}{
		{"eve-turn/regular", "raw-turn/regular", false, false},
		{"eve-turn/local", "raw-turn/local", true, true},
		{"eve-turn/local-model", "raw-turn/regular", true, false},
	} {
		v := v
		scenarios = append(scenarios, scenario{
			name: v.name, baseline: v.baseline, latency: true, throughput: true, hops: true,
			setup: eveSetup(v.localModel, v.tool, false),
		})
	}
	// The common case: another message to a running session.
	scenarios = append(scenarios, scenario{
		name: "eve-turn/same-session", baseline: "raw-turn/regular", latency: true,
		setup: eveSameSessionSetup,
	})
	for _, v := range []struct {
		name, baseline   string
		localModel, tool bool
	}{
		{"eve-park/regular", "raw-park/regular", false, false},
		{"eve-park/local", "raw-park/local", true, true},
	} {
		v := v
		scenarios = append(scenarios, scenario{
			name: v.name, baseline: v.baseline, latency: true, hops: true,
			setup: eveSetup(v.localModel, v.tool, true),
		})
	}
	// With eve's search attributes registered (as eve dev does, the inbox's
	// too): sessions and turns upsert EveStatus and the inbox's attributes,
	// each upsert a billable action; sessions start with theirs set.
	scenarios = append(scenarios,
		scenario{name: "eve-turn/regular+sa", baseline: "raw-turn/regular", latency: true, throughput: true, hops: true,
			configs: []string{"fast"}, setup: withSearchAttributes(eveSetup(false, false, false))},
		scenario{name: "eve-park/regular+sa", baseline: "raw-park/regular", latency: true, hops: true,
			configs: []string{"fast"}, setup: withSearchAttributes(eveSetup(false, false, true))},
	)
}

// searchAttributesKey marks a setup whose agent records search attributes.
type searchAttributesKey struct{}

// withSearchAttributes registers eve's search attributes on the env's
// namespace and has the agent use them.
func withSearchAttributes(setup func(ctx context.Context, env *benchEnv) (runFunc, func(), error)) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		if err := visibility.Register(ctx, env.Client, env.Namespace); err != nil {
			return nil, nil, fmt.Errorf("register search attributes: %w", err)
		}
		return setup(context.WithValue(ctx, searchAttributesKey{}, true), env)
	}
}

const benchRules = `
rules:
  - match: weather
    steps:
      - calls: [{tool: get_weather, input: {city: "Lisbon"}}]
      - reply: "It is {{result.get_weather.condition}} in {{result.get_weather.city}}."
`

func weatherTool(local bool, ask bool) *tools.Tool {
	t := &tools.Tool{
		Name: "get_weather", Description: "Weather for a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Local:       local,
		Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
			var req struct{ City string }
			json.Unmarshal(in, &req)
			h := fnv.New32a()
			h.Write([]byte(req.City))
			return map[string]any{"city": req.City, "condition": []string{"sunny", "cloudy"}[h.Sum32()%2]}, nil
		},
	}
	if ask {
		t.Approval = approval.Always()
	}
	return t
}

func eveSetup(localModel, localTool, park bool) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		m, err := scripted.Parse([]byte(benchRules))
		if err != nil {
			return nil, nil, err
		}
		reg := tools.NewRegistry()
		if err := reg.Register(weatherTool(localTool, park)); err != nil {
			return nil, nil, err
		}
		sa, _ := ctx.Value(searchAttributesKey{}).(bool)
		tq := env.Queue(fmt.Sprintf("eve-%v-%v-%v-%v", localModel, localTool, park, sa))
		w := worker.New(env.Client, tq, env.WorkerOptions)
		if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg, LocalModel: localModel}, agent.Host{Store: env.Store, SearchAttributes: sa, InboxAttributes: sa, Client: env.Client}); err != nil {
			return nil, nil, err
		}
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		svc := &sessions.Service{Client: env.Client, TaskQueue: tq, SearchAttributes: sa}
		if !park {
			return func(ctx context.Context, i int) (time.Duration, error) {
				res, err := svc.CreateAndSend(ctx, hopSession(ctx), nil, signals.SendRequest{Message: "weather", Wait: true})
				if err != nil {
					return 0, err
				}
				if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
					return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
				}
				return 0, nil
			}, w.Stop, nil
		}
		return func(ctx context.Context, i int) (time.Duration, error) {
			res, err := svc.CreateAndSend(ctx, hopSession(ctx), nil, signals.SendRequest{Message: "weather", Wait: true})
			if err != nil {
				return 0, err
			}
			if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
				return 0, fmt.Errorf("park outcome %+v", res.Outcome)
			}
			call := fmt.Sprintf("apr_call_%d_0", 1)
			start := time.Now()
			r, err := svc.Respond(ctx, res.SessionID, signals.RespondRequest{
				Responses: []protocol.InputResponse{{RequestID: call, OptionID: "approve"}}, Wait: true,
			})
			if err != nil {
				return 0, err
			}
			elapsed := time.Since(start)
			if r.Outcome == nil || r.Outcome.Status != signals.TurnStatusCompleted {
				return 0, fmt.Errorf("respond outcome %+v", r.Outcome)
			}
			if hopsRequested(ctx) {
				// The counted call: its session's last task (the turn's end,
				// session.waiting) runs after the turn answered.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if evs, err := svc.Events(ctx, res.SessionID, 0); err == nil && len(evs) > 0 && evs[len(evs)-1].Type == protocol.SessionWaiting {
						break
					}
				}
			}
			return elapsed, nil
		}, w.Stop, nil
	}
}

// eveSameSessionSetup sends every turn to one session (eve's defaults:
// model step local, tool regular).
func eveSameSessionSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	m, err := scripted.Parse([]byte(benchRules))
	if err != nil {
		return nil, nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(weatherTool(false, false)); err != nil {
		return nil, nil, err
	}
	tq := env.Queue("eve-same-session")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
	id, err := svc.Create(ctx, "", nil)
	if err != nil {
		w.Stop()
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		res, err := svc.Send(ctx, id, signals.SendRequest{Message: "weather", Wait: true})
		if err != nil {
			return 0, err
		}
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
			return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
		}
		return 0, nil
	}, w.Stop, nil
}

// hopSession names the session of a counted call ("" otherwise: generated).
func hopSession(ctx context.Context) string {
	if !hopsRequested(ctx) {
		return ""
	}
	id := sessions.NewID("ses")
	recordHop(ctx, id)
	return id
}
