package cli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
)

func TestDoctorHealthyDevStack(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(30 * time.Second)
	tc := config.Temporal{Address: env.Server.Addr, Namespace: "default", TaskQueue: env.TaskQueue}
	var out bytes.Buffer
	// Before: no worker, no search attributes; each failure says how to fix it.
	if failed := runDoctor(ctx, &out, "eve", tc, ""); failed == 0 || !strings.Contains(out.String(), "fix: start a worker on this task queue") {
		t.Fatalf("doctor without a worker (%d failures):\n%s", failed, out.String())
	}
	if err := visibility.Register(ctx, env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, _ := demo.Agent()
	env.StartWorker(a)
	// A new worker's pollers show up within moments (slower on a loaded machine).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out.Reset()
		failed := runDoctor(ctx, &out, "eve", tc, "")
		if failed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("doctor on a healthy stack: %d failures:\n%s", failed, out.String())
		}
	}
	for _, want := range []string{"answers", `namespace "default" exists`, "search attributes", "workflow poller", "activity poller"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDoctorWrongAddress(t *testing.T) {
	port, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	tc := config.Temporal{Address: "127.0.0.1:" + itoa(port), Namespace: "default", TaskQueue: "eve"}
	failed := runDoctor(t.Context(), &out, "shop", tc, "")
	if failed != 1 || !strings.Contains(out.String(), "cannot reach Temporal at 127.0.0.1:") || !strings.Contains(out.String(), "fix: run a local Temporal dev server with `shop dev`") {
		t.Fatalf("doctor on a wrong address (%d failures):\n%s", failed, out.String())
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("doctor took %v on a wrong address", time.Since(start))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
