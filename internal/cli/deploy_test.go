package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// A versioned dev stack (--build-id) makes its build current itself, so
// its one worker gets the turns (e2e/versioning_test.go runs turns on builds).
func TestDevWithBuildIDIsCurrent(t *testing.T) {
	unsetenv(t, "EVE_URL", "EVE_TASK_QUEUE", "EVE_PAYLOAD_STORE", "EVE_ADDR", "EVE_PUBLIC_URL", "EVE_API_KEY", "EVE_API_KEYS_FILE",
		"EVE_BUILD_ID", "EVE_DEPLOYMENT_NAME", "EVE_MAKE_CURRENT")
	queue := "devbuild-" + devtest.TaskQueue(t)
	app := App{Name: "shop", Agent: func() (*agent.Agent, error) {
		m, err := scripted.Parse([]byte("default: \"hi\"\nrules: []\n"))
		if err != nil {
			return nil, err
		}
		return &agent.Agent{Name: "shop", Model: m, Tools: tools.NewRegistry(), LocalModel: true}, nil
	}}
	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dctx, stopDev := context.WithCancel(ctx)
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		root := NewRootCommand(app)
		root.SetOut(&out)
		root.SetArgs([]string{"dev", "--address", srv.Addr, "--namespace", srv.Namespace, "--addr", "127.0.0.1:0",
			"--metrics-addr=", "--state-dir", t.TempDir(), "--task-queue", queue, "--build-id", "v7"})
		done <- root.ExecuteContext(dctx)
	}()
	want := `build "v7" of deployment "` + queue + `" (current)`
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), want); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("dev ended: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev printed no %q:\n%s", want, out.String())
		}
	}
	c := devtest.Client(t, srv)
	desc, err := c.WorkerDeploymentClient().GetHandle(queue).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur := desc.Info.RoutingConfig.CurrentVersion; cur == nil || cur.BuildID != "v7" {
		t.Fatalf("current version %+v, want build v7", cur)
	}
	stopDev()
	if err := <-done; err != nil {
		t.Fatalf("dev: %v", err)
	}
}
