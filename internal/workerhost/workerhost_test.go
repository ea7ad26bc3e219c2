package workerhost_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/workerhost"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// The worker's agent gets the store its client offloads to.
func TestNewGivesAgentTheClientsStore(t *testing.T) {
	srv := devtest.Shared(t)
	ctx := context.Background()
	tc := config.Temporal{Address: srv.Addr, Namespace: srv.Namespace, TaskQueue: devtest.TaskQueue(t), PayloadStore: "file:" + t.TempDir()}
	c, _, closeClient, err := workerhost.Dial(ctx, nil, tc, "")
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient()
	store, err := tc.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := workerhost.StoreOf(c); got == nil || got.Location() != store.Location() {
		t.Fatalf("StoreOf(client) = %v, want the store at %s", got, store.Location())
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	w, err := workerhost.New(c, tc.Namespace, tc.TaskQueue, a, agent.Host{}, limits(), workerhost.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Host().Store; got == nil || got.Location() != store.Location() {
		t.Fatalf("host store %v, want the client's at %s", got, store.Location())
	}

	// A client Dial did not make: the agent must bring its store.
	other := devtest.Client(t, srv)
	b, _ := demo.Agent()
	if _, err := workerhost.New(other, tc.Namespace, tc.TaskQueue, b, agent.Host{}, limits(), workerhost.Deployment{}); err == nil || !strings.Contains(err.Error(), "no payload store") {
		t.Fatalf("New without a store = %v, want an error", err)
	}
}

func limits() workerhost.Limits {
	return workerhost.Limits{Activities: 4, LocalActivities: 4, WorkflowTasks: 4, CachedWorkflows: 10}
}

func TestStopTimeoutFlagAndEnv(t *testing.T) {
	parse := func(args ...string) workerhost.Limits {
		var l workerhost.Limits
		fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
		l.Bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := parse(); l.StopTimeout != workerhost.DefaultStopTimeout || workerhost.DefaultStopTimeout != 30*time.Second {
		t.Fatalf("default %s", l.StopTimeout)
	}
	t.Setenv("EVE_WORKER_STOP_TIMEOUT", "45s")
	if l := parse(); l.StopTimeout != 45*time.Second {
		t.Fatalf("env %s", l.StopTimeout)
	}
	if l := parse("--stop-timeout", "2m"); l.StopTimeout != 2*time.Minute {
		t.Fatalf("flag %s", l.StopTimeout)
	}
	if (workerhost.Limits{}).EffectiveStopTimeout() != workerhost.DefaultStopTimeout {
		t.Fatal("zero is not the default")
	}
	l := limits()
	l.StopTimeout = -time.Second
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "stop-timeout") {
		t.Fatalf("negative: %v", err)
	}
}
