package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// EVE_METRICS_ADDR set but empty turns metrics off like --metrics-addr=
// does; unset, the default address (with its fallback) is used.
func TestMetricsAddrFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  *string
		want string
	}{
		{nil, config.DefaultMetricsAddr},
		{ptr(""), ""},
		{ptr("127.0.0.1:9999"), "127.0.0.1:9999"},
	} {
		t.Setenv("EVE_METRICS_ADDR", "")
		if c.env == nil {
			os.Unsetenv("EVE_METRICS_ADDR")
		} else {
			os.Setenv("EVE_METRICS_ADDR", *c.env)
		}
		for _, name := range []string{"worker", "dev"} {
			cmd, _, err := newRootCommand().Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			if got := cmd.Flags().Lookup("metrics-addr").Value.String(); got != c.want {
				t.Errorf("%s with EVE_METRICS_ADDR %s: --metrics-addr %q, want %q", name, show(c.env), got, c.want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func show(v *string) string {
	if v == nil {
		return "unset"
	}
	return "=" + *v
}

// appAgent is an app's agent named name, whose scripted model answers
// every message with "hi from <name>".
func appAgent(name string) func() (*agent.Agent, error) {
	return func() (*agent.Agent, error) {
		m, err := scripted.Parse([]byte("name: " + name + "\ndefault: \"hi from " + name + "\"\nrules: []\n"))
		if err != nil {
			return nil, err
		}
		reg := tools.NewRegistry()
		if err := reg.Register(tools.Func("ping", "Answer pong.", func(*tools.Context, struct{}) (string, error) { return "pong", nil })); err != nil {
			return nil, err
		}
		return &agent.Agent{Name: name, Model: m, Tools: reg, LocalModel: true}, nil
	}
}

// unsetenv unsets name for the test (restored after it).
func unsetenv(t *testing.T, names ...string) {
	for _, name := range names {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

// An app binary's default task queue is its agent's name, not the demo's
// "eve": its bare worker polls it and its doctor checks it. The demo's
// binary keeps "eve".
func TestAppDefaultTaskQueueIsTheAgentsName(t *testing.T) {
	unsetenv(t, "EVE_TASK_QUEUE")
	t.Setenv("EVE_PAYLOAD_STORE", "file:"+t.TempDir())
	const name = "shoptq"
	app := App{Name: "shop", Agent: appAgent(name)}
	for _, c := range []struct {
		root *cobra.Command
		def  string
	}{{NewRootCommand(app), ""}, {newRootCommand(), "eve"}} {
		for _, cmdName := range []string{"dev", "worker", "serve", "mcp", "doctor"} {
			cmd, _, err := c.root.Find([]string{cmdName})
			if err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags().Lookup("task-queue")
			if f.DefValue != c.def || (c.def == "" && !strings.Contains(f.Usage, "default: the agent's name")) {
				t.Fatalf("%s %s --task-queue: default %q (%s), want %q", c.root.Name(), cmdName, f.DefValue, f.Usage, c.def)
			}
		}
	}

	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		root := NewRootCommand(app)
		root.SetArgs([]string{"worker", "--address", srv.Addr, "--namespace", srv.Namespace, "--metrics-addr=", "--log-level", "warn"})
		done <- root.ExecuteContext(wctx)
	}()
	// The doctor's poller check is the test: it passes once the worker polls
	// the agent's queue (it fails for other reasons, e.g. search attributes).
	var out bytes.Buffer
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out.Reset()
		root := NewRootCommand(app)
		root.SetOut(&out)
		root.SetArgs([]string{"doctor", "--address", srv.Addr, "--namespace", srv.Namespace})
		root.ExecuteContext(ctx)
		if strings.Contains(out.String(), `workflow poller(s) on task queue "`+name+`"`) && strings.Contains(out.String(), `activity poller(s) on task queue "`+name+`"`) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("shop worker ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("shop doctor never saw shop worker's pollers on task queue %q:\n%s", name, out.String())
		}
	}
	stopWorker()
	if err := <-done; err != nil {
		t.Fatalf("shop worker: %v", err)
	}
}
