package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// "completion → turn continues": the time from an external job's completion
// to the end of the turn. eve's row completes through the completion-URL
// service (verify the capability, settle Update, CompleteActivityByID); the
// raw row calls CompleteActivityByID on a plain async activity.
func init() {
	scenarios = append(scenarios,
		scenario{name: "raw-complete/regular", latency: true, setup: rawCompleteSetup},
		scenario{name: "eve-complete/local-model", baseline: "raw-complete/regular", latency: true, setup: eveCompleteSetup},
	)
}

type pendingJob struct{ workflowID, activityID string }

func rawCompleteSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("raw-complete")
	jobs := make(chan pendingJob, 1)
	w := worker.New(env.Client, tq, env.WorkerOptions)
	w.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		info := activity.GetInfo(ctx)
		jobs <- pendingJob{info.WorkflowExecution.ID, info.ActivityID}
		return "", activity.ErrResultPending
	}, activity.RegisterOptions{Name: "bench.Pending"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{ActivityID: "job", StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out string
		err := workflow.ExecuteActivity(actx, "bench.Pending").Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "bench.RawComplete"})
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, i int) (time.Duration, error) {
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d-%d", tq, time.Now().UnixNano(), i), TaskQueue: tq}, "bench.RawComplete")
		if err != nil {
			return 0, err
		}
		var j pendingJob
		select {
		case j = <-jobs:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		start := time.Now()
		if err := env.Client.CompleteActivityByID(ctx, env.Namespace, j.workflowID, "", j.activityID, "done", nil); err != nil {
			return 0, err
		}
		var out string
		if err := run.Get(ctx, &out); err != nil || out != "done" {
			return 0, fmt.Errorf("raw complete: %q %v", out, err)
		}
		return time.Since(start), nil
	}, w.Stop, nil
}

const completeRules = `
rules:
  - match: job
    steps:
      - calls: [{tool: job}]
      - reply: "{{result.job.status}}"
`

func eveCompleteSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	tq := env.Queue("eve-complete")
	secret := []byte("bench secret of at least 16 bytes")
	signer, err := capability.NewSigner(secret)
	if err != nil {
		return nil, nil, err
	}
	actionsCfg := &agent.Actions{Secret: secret, PublicURL: "http://bench.invalid"}
	jobs := make(chan tools.Action, 1)
	reg := tools.NewRegistry()
	if err := reg.Register(tools.DefineDelegated("job", "A job.", json.RawMessage(`{"type":"object"}`), nil,
		tools.Delegated{Delegate: func(ctx *tools.Context, _ json.RawMessage, a tools.Action) (tools.Pending, error) {
			jobs <- a
			return a.Pending(), nil
		}})); err != nil {
		return nil, nil, err
	}
	m, err := scripted.Parse([]byte(completeRules))
	if err != nil {
		return nil, nil, err
	}
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: env.Store, Client: env.Client, Actions: actionsCfg}); err != nil {
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
	completer := &actionsvc.Service{Client: env.Client, Signer: signer}
	return func(ctx context.Context, i int) (time.Duration, error) {
		done := make(chan error, 1)
		go func() {
			res, err := svc.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "job", Wait: true})
			if err == nil && (res.Outcome == nil || res.Outcome.Reply != "ok") {
				err = fmt.Errorf("turn outcome %+v", res.Outcome)
			}
			done <- err
		}()
		var a tools.Action
		select {
		case a = <-jobs:
		case err := <-done:
			return 0, fmt.Errorf("turn ended before its job started: %v", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		token := a.Completion.URL[len("http://bench.invalid"+signals.ActionsPath):]
		start := time.Now()
		if st, rep := completer.Complete(ctx, token, actionsvc.Body{Output: json.RawMessage(`{"status":"ok"}`)}); st != 200 {
			return 0, errors.New("complete: " + rep.Error)
		}
		if err := <-done; err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}, w.Stop, nil
}
