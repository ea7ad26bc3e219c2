package main

import (
	"context"
	"slices"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/bench/rawsdk"
)

// The raw Temporal SDK baseline (bench/rawsdk): a turn written directly
// against the SDK, in each activity variant, plus the park variant measured
// from the "respond" Update to the turn's result.
func init() {
	fastOnly := []string{"fast", "fast-sqlite"} // eager needs system.enableActivityEagerExecution
	for _, v := range rawsdk.Variants {
		turn := scenario{
			name:       "raw-turn/" + string(v),
			baseline:   "raw-turn/regular",
			latency:    true,
			throughput: true,
			hops:       true,
			setup:      rawSetup(v, false),
		}
		if v == rawsdk.Regular {
			turn.baseline = "raw-turn/regular@default"
		}
		if v == rawsdk.Eager {
			turn.configs = fastOnly
		}
		scenarios = append(scenarios, turn)
	}
	for _, v := range rawsdk.Variants {
		park := scenario{
			name:     "raw-park/" + string(v),
			baseline: "raw-park/regular",
			latency:  true,
			hops:     true,
			setup:    rawSetup(v, true),
		}
		if v == rawsdk.Regular {
			park.baseline = "raw-park/regular@default"
		}
		if v == rawsdk.Eager {
			park.configs = fastOnly
		}
		scenarios = append(scenarios, park)
	}
	// A session and a workflow per turn, with the raw SDK: what eve's
	// shape costs at the least, and what a turn started by the caller would.
	for _, v := range []struct {
		name, baseline string
		shape          rawsdk.Shape
		variant        rawsdk.Variant
	}{
		{"raw-session/regular", "raw-turn/regular", rawsdk.ShapeSession, rawsdk.Regular},
		{"raw-session/local", "raw-turn/local", rawsdk.ShapeSession, rawsdk.Local},
		{"raw-session-child/regular", "raw-session/regular", rawsdk.ShapeChildTurn, rawsdk.Regular},
		{"raw-turn-first/regular", "raw-turn/regular", rawsdk.ShapeTurnFirst, rawsdk.Regular},
		{"raw-turn-first/local", "raw-turn/local", rawsdk.ShapeTurnFirst, rawsdk.Local},
	} {
		v := v
		scenarios = append(scenarios, scenario{
			name: v.name, baseline: v.baseline, latency: true, throughput: true, hops: true,
			configs: []string{"fast"}, setup: rawShapeSetup(v.shape, v.variant),
		})
	}
	// The tool as a child workflow (ExecuteChildWorkflow, the tool activity
	// inside it): the shape of eve's workflow tool (eve-turn/workflow-tool).
	scenarios = append(scenarios, scenario{
		name: "raw-child/regular", baseline: "raw-turn/regular", latency: true, hops: true,
		configs: []string{"fast"}, setup: rawChildSetup,
	})
	scenarios = append(scenarios, scenario{
		name:     "raw-turn/regular+eager-start",
		baseline: "raw-turn/regular",
		latency:  true,
		extra:    true,
		setup:    rawSetup(rawsdk.Regular, false, rawsdk.WithEagerStart()),
	})
}

// rawSetup starts a worker for the raw turn on its own task queue (with the
// env's client, so eager workflow start can hand tasks to it).
func rawSetup(v rawsdk.Variant, park bool, opts ...rawsdk.RunOption) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		name := "raw-" + string(v)
		if park {
			name += "-park"
		}
		tq := env.Queue(name)
		w := worker.New(env.Client, tq, env.WorkerOptions)
		rawsdk.RegisterWorker(w)
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		withID := func(ctx context.Context) []rawsdk.RunOption {
			if !hopsRequested(ctx) {
				return opts
			}
			id := rawsdk.NextWorkflowID("hops")
			recordHop(ctx, id)
			return append(slices.Clone(opts), rawsdk.WithID(id))
		}
		if park {
			return func(ctx context.Context, i int) (time.Duration, error) {
				return rawsdk.RunPark(ctx, env.Client, tq, v, withID(ctx)...)
			}, w.Stop, nil
		}
		return func(ctx context.Context, i int) (time.Duration, error) {
			return 0, rawsdk.RunTurn(ctx, env.Client, tq, v, withID(ctx)...)
		}, w.Stop, nil
	}
}

// rawShapeSetup runs the raw turn in a shape with a session (bench/rawsdk/shapes.go).
func rawShapeSetup(shape rawsdk.Shape, v rawsdk.Variant) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		tq := env.Queue("raw-" + string(shape) + "-" + string(v))
		w := worker.New(env.Client, tq, env.WorkerOptions)
		rawsdk.RegisterWorker(w)
		rawsdk.RegisterShapes(w, env.Client)
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, i int) (time.Duration, error) {
			id := rawsdk.NextWorkflowID("session")
			recordHop(ctx, id)
			return 0, rawsdk.RunShape(ctx, env.Client, tq, shape, v, id)
		}, w.Stop, nil
	}
}

// rawChildSetup runs the raw turn with its tool as a child workflow.
func rawChildSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-child")
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
		return 0, rawsdk.RunChildTurn(ctx, env.Client, tq, rawsdk.Regular, opts...)
	}, w.Stop, nil
}
