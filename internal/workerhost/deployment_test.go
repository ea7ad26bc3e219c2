package workerhost_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/internal/workerhost"
)

// The flags and EVE_… variables reach the SDK's deployment options; the
// zero value is an unversioned worker.
func TestDeploymentReachesWorkerOptions(t *testing.T) {
	parse := func(args ...string) workerhost.Deployment {
		var d workerhost.Deployment
		fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
		d.Bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := parse(); d.Versioned() || workerhost.Options(limits(), d.ForTaskQueue("shop")).DeploymentOptions != (worker.DeploymentOptions{}) {
		t.Fatalf("default %+v is versioned", d)
	}
	t.Setenv("EVE_BUILD_ID", "b7")
	t.Setenv("EVE_MAKE_CURRENT", "true")
	d := parse().ForTaskQueue("shop")
	if d != (workerhost.Deployment{Name: "shop", BuildID: "b7", MakeCurrent: true}) {
		t.Fatalf("env: %+v, want build b7 of deployment shop (the task queue), made current", d)
	}
	d = parse("--deployment-name", "shop-fleet", "--build-id", "b8", "--make-current=false").ForTaskQueue("shop")
	want := worker.DeploymentOptions{UseVersioning: true, Version: worker.WorkerDeploymentVersion{DeploymentName: "shop-fleet", BuildID: "b8"}}
	if got := workerhost.Options(limits(), d).DeploymentOptions; got != want || d.MakeCurrent {
		t.Fatalf("flags: %+v → %+v, want %+v", d, got, want)
	}
	o := workerhost.Options(limits(), d)
	if o.MaxConcurrentActivityExecutionSize != 4 || o.MaxConcurrentWorkflowTaskExecutionSize != 4 {
		t.Fatalf("limits lost: %+v", o)
	}
}

func TestDeploymentValidate(t *testing.T) {
	for _, c := range []struct {
		d    workerhost.Deployment
		want string // "" valid
	}{
		{workerhost.Deployment{}, ""},
		{workerhost.Deployment{BuildID: "1"}.ForTaskQueue("eve"), ""},
		{workerhost.Deployment{Name: "eve"}, "need --build-id"},
		{workerhost.Deployment{MakeCurrent: true}, "need --build-id"},
		{workerhost.Deployment{BuildID: "1"}.ForTaskQueue("eve.demo"), "--deployment-name"},
		{workerhost.Deployment{Name: "a:b", BuildID: "1"}, "reserves"},
	} {
		err := c.d.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.d, err, c.want)
		}
	}
}
