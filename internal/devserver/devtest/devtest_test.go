package devtest_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

func echo(ctx workflow.Context, s string) (string, error) { return s, nil }

func TestSharedRunsAWorkflow(t *testing.T) {
	srv := devtest.Shared(t)
	if srv2 := devtest.Shared(t); srv2 != srv {
		t.Fatal("Shared started a second server")
	}
	c := devtest.Client(t, srv)
	tq := devtest.TaskQueue(t)
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflow(echo)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: tq}, echo, "hi")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

func TestSharedIsReachable(t *testing.T) {
	t.Parallel()
	if !devserver.Reachable(context.Background(), devtest.Shared(t).Addr) {
		t.Fatal("shared server not reachable")
	}
}

func TestTaskQueueUnique(t *testing.T) {
	a, b := devtest.TaskQueue(t), devtest.TaskQueue(t)
	if a == b {
		t.Fatalf("TaskQueue returned %q twice", a)
	}
}
