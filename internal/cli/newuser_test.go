package cli

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
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

// Every help text of an app's binary names its commands by the binary's
// name: no {bin} left, no eve command, cmd/worker or make dev.
func TestHelpNamesTheBinary(t *testing.T) {
	eveCommand := regexp.MustCompile(`\beve (dev|worker|serve|mcp|doctor|session|tools|action)\b|cmd/worker|make dev|"command": "eve"`)
	var walk func(c *cobra.Command)
	texts := 0
	walk = func(c *cobra.Command) {
		check := func(what, s string) {
			texts++
			if strings.Contains(s, "{bin}") || eveCommand.MatchString(s) {
				t.Errorf("%s %s names another binary: %q", c.CommandPath(), what, s)
			}
		}
		check("short", c.Short)
		check("long", c.Long)
		check("example", c.Example)
		c.Flags().VisitAll(func(f *pflag.Flag) { check("--"+f.Name, f.Usage) })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { check("--"+f.Name, f.Usage) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := NewRootCommand(App{Name: "shop", Agent: appAgent("shop")})
	walk(root)
	for _, c := range []struct{ path, want string }{
		{"serve", "run at least one worker (shop worker, or shop dev) beside it"},
		{"mcp", `{"command": "shop", "args": ["mcp"]}`},
		{"tools exec", "follow them with shop tools status <id>"},
		{"action complete", `shop action complete --url "$URL"`},
	} {
		cmd, _, err := root.Find(strings.Fields(c.path))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cmd.Long+cmd.Example, c.want) {
			t.Errorf("shop %s help lacks %q:\n%s%s", c.path, c.want, cmd.Long, cmd.Example)
		}
	}
	if texts < 100 {
		t.Fatalf("checked only %d texts", texts)
	}
}

// A session command to suggest has --url exactly when a bare command would
// go elsewhere (EVE_URL, else the default).
func TestSessionHintURL(t *testing.T) {
	unsetenv(t, "EVE_URL")
	f := sessionFlags{bin: "shop", url: "http://127.0.0.1:4111"}
	if got := f.command("approve ses_1"); got != "shop session approve ses_1" {
		t.Fatalf("default URL: %q", got)
	}
	f.url = "http://127.0.0.1:4191"
	if got := f.command("approve ses_1"); got != "shop session approve ses_1 --url http://127.0.0.1:4191" {
		t.Fatalf("another URL: %q", got)
	}
	t.Setenv("EVE_URL", "http://127.0.0.1:4191/")
	if got := f.command("approve ses_1"); got != "shop session approve ses_1" {
		t.Fatalf("the URL of EVE_URL: %q", got)
	}
	for in, want := range map[string]string{"http://0.0.0.0:4191": "http://127.0.0.1:4191", "http://[::]:4191": "http://127.0.0.1:4191", "http://127.0.0.1:4191": "http://127.0.0.1:4191"} {
		if got := loopbackURL(in); got != want {
			t.Errorf("loopbackURL(%s) = %s, want %s", in, got, want)
		}
	}
}

// syncBuffer is a bytes.Buffer that a command writes to while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `shop dev` on another --addr: it runs the agent's queue, its Try line
// names shop and that server's URL, and following it (and the approval
// hint it leads to) reaches this stack's agent, not another's.
func TestDevHintsNameTheBinaryAndURL(t *testing.T) {
	unsetenv(t, "EVE_URL", "EVE_TASK_QUEUE", "EVE_PAYLOAD_STORE", "EVE_ADDR", "EVE_PUBLIC_URL", "EVE_API_KEY", "EVE_API_KEYS_FILE")
	const name = "shopdev"
	newAgent := func() (*agent.Agent, error) {
		m, err := scripted.Parse([]byte("name: " + name + "\ndefault: \"hi from " + name + "\"\nrules:\n" +
			"  - match: '^refund'\n    steps:\n      - calls: [{tool: refund, input: {}}]\n      - reply: \"refunded by " + name + "\"\n"))
		if err != nil {
			return nil, err
		}
		refund := tools.Func("refund", "Refund.", func(*tools.Context, struct{}) (string, error) { return "ok", nil })
		refund.Approval = approval.Always()
		reg := tools.NewRegistry()
		if err := reg.Register(refund); err != nil {
			return nil, err
		}
		return &agent.Agent{Name: name, Model: m, Tools: reg, LocalModel: true}, nil
	}
	app := App{Name: "shop", Agent: newAgent}
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
			"--metrics-addr=", "--state-dir", t.TempDir()})
		done <- root.ExecuteContext(dctx)
	}()
	try := regexp.MustCompile(`(?m)^Try: +(.*)$`)
	var line []string
	for deadline := time.Now().Add(60 * time.Second); line == nil; time.Sleep(50 * time.Millisecond) {
		line = try.FindStringSubmatch(out.String())
		select {
		case err := <-done:
			t.Fatalf("shop dev ended: %v\n%s", err, out.String())
		default:
		}
		if line == nil && time.Now().After(deadline) {
			t.Fatalf("shop dev printed no Try line:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), `Worker       task queue "`+name+`"`) {
		t.Fatalf("shop dev's worker is not on its agent's queue %q:\n%s", name, out.String())
	}
	m := regexp.MustCompile(`^shop session send "hello" --url (http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(line[1])
	if m == nil {
		t.Fatalf("Try line %q: want shop session send \"hello\" --url <this server>", line[1])
	}
	url := m[1]
	session := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		root := NewRootCommand(app)
		root.SetOut(&out)
		root.SetArgs(append([]string{"session"}, args...))
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("shop session %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	if got := session("send", "hello", "--url", url); !strings.Contains(got, "hi from "+name) {
		t.Fatalf("the Try line's command:\n%s", got)
	}
	got := session("send", "refund", "--url", url)
	hint := regexp.MustCompile(`answer with: shop session approve (ses_\w+) (\S+) --url ` + regexp.QuoteMeta(url) + `   \(or deny\)`).FindStringSubmatch(got)
	if hint == nil {
		t.Fatalf("the approval hint does not name shop and %s:\n%s", url, got)
	}
	if got := session("approve", hint[1], hint[2], "--url", url); !strings.Contains(got, "refunded by "+name) {
		t.Fatalf("the approval hint's command:\n%s", got)
	}
	stopDev()
	if err := <-done; err != nil {
		t.Fatalf("shop dev: %v", err)
	}
}
