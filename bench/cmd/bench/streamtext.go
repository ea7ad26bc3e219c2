package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// A streamed response: one model step whose text arrives as -stream-deltas
// pieces, -stream-gap apart (100 × 20 ms: a 2 s answer at 50 tokens/s), in
// a turn of its own. eve's rows run the model as a regular activity (text
// streaming needs one), with Agent.StreamText on and off; the raw row is one
// activity that takes as long and returns the text. The hops table shows
// what the deltas cost in history events and billable actions: the
// difference between eve-stream/text and eve-stream/no-deltas.
var (
	streamDeltas = flag.Int("stream-deltas", 100, "text deltas of the streamed-response rows (eve-stream/*, raw-stream/*)")
	streamGap    = flag.Duration("stream-gap", 20*time.Millisecond, "time between text deltas of the streamed-response rows")
)

// streamCalls is the number of timed calls of each streamed-response row.
const streamCalls = 3

func init() {
	fastOnly := []string{"fast"}
	scenarios = append(scenarios,
		scenario{name: "raw-stream/activity", latency: true, calls: streamCalls, hops: true, configs: fastOnly, setup: rawStreamSetup},
		scenario{name: "eve-stream/no-deltas", baseline: "raw-stream/activity", latency: true, calls: streamCalls, hops: true, configs: fastOnly,
			setup: eveStreamSetup(false)},
		scenario{name: "eve-stream/text", baseline: "raw-stream/activity", latency: true, calls: streamCalls, hops: true, configs: fastOnly,
			setup: eveStreamSetup(true)},
	)
}

// streamedText is the answer, one word per delta.
func streamedText() []string {
	parts := make([]string, *streamDeltas)
	for i := range parts {
		parts[i] = fmt.Sprintf("word%d ", i)
	}
	return parts
}

// deltaModel answers every step with streamedText, streamed piece by piece.
type deltaModel struct{}

func (deltaModel) ID() string { return "bench:stream" }

func (deltaModel) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	parts := streamedText()
	for _, p := range parts {
		select {
		case <-time.After(*streamGap):
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
		if stream != nil {
			stream(p)
		}
	}
	return model.Response{Text: strings.Join(parts, ""), FinishReason: model.FinishStop}, nil
}

func eveStreamSetup(streamText bool) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		tq := env.Queue(fmt.Sprintf("eve-stream-%v", streamText))
		w := worker.New(env.Client, tq, env.WorkerOptions)
		if err := agent.Register(w, &agent.Agent{Name: "bench", Model: deltaModel{}, Tools: tools.NewRegistry(), StreamText: streamText}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
			return nil, nil, err
		}
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
		want := strings.Join(streamedText(), "")
		return func(ctx context.Context, i int) (time.Duration, error) {
			res, err := svc.CreateAndSend(ctx, hopSession(ctx), nil, signals.SendRequest{Message: "talk", Wait: true})
			if err != nil {
				return 0, err
			}
			if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply != want {
				return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
			}
			return 0, nil
		}, w.Stop, nil
	}
}

// rawStreamSetup: a workflow running one activity that takes as long as
// the streamed answer and returns its text.
func rawStreamSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-stream")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	w.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		_, err := deltaModel{}.Step(ctx, model.Request{}, nil)
		return strings.Join(streamedText(), ""), err
	}, activity.RegisterOptions{Name: "bench.RawAnswer"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, DisableEagerExecution: true})
		var out string
		err := workflow.ExecuteActivity(actx, "bench.RawAnswer").Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "bench.RawStream"})
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		id := fmt.Sprintf("%s-%d-%d", tq, time.Now().UnixNano(), i)
		recordHop(ctx, id)
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "bench.RawStream")
		if err != nil {
			return 0, err
		}
		var out string
		if err := run.Get(ctx, &out); err != nil {
			return 0, fmt.Errorf("raw stream: %w", err)
		}
		return 0, nil
	}, w.Stop, nil
}

func init() { reports = append(reports, reportStream) }

// reportStream prints what the deltas of a streamed response cost: the
// text row's counts minus the no-deltas row's, per config.
func reportStream(w io.Writer, t *benchkit.Table) {
	hopsMu.Lock()
	defer hopsMu.Unlock()
	for _, r := range t.Rows {
		if r.Scenario != "eve-stream/text" {
			continue
		}
		on, ok1 := hopsRows["eve-stream/text@"+r.Config]
		off, ok2 := hopsRows["eve-stream/no-deltas@"+r.Config]
		raw, ok3 := hopsRows["raw-stream/activity@"+r.Config]
		if !ok1 || !ok2 {
			continue
		}
		d := float64(*streamDeltas)
		fmt.Fprintf(w, "\nstreamed response (%s), %d text deltas %s apart: %d %s signals;\n"+
			"  deltas add %d history events, %d workflow tasks, %d billable actions to the turn (%.2f events, %.2f actions per delta)",
			r.Config, *streamDeltas, *streamGap, on.Signals[signals.SignalTextDelta], signals.SignalTextDelta,
			on.Events-off.Events, on.Tasks-off.Tasks, on.Actions-off.Actions,
			float64(on.Events-off.Events)/d, float64(on.Actions-off.Actions)/d)
		if ok3 {
			fmt.Fprintf(w, ";\n  raw SDK (one activity returning the text): %d events, %d actions; eve with deltas: %d events, %d actions",
				raw.Events, raw.Actions, on.Events, on.Actions)
		}
		fmt.Fprintln(w, ".")
	}
}
