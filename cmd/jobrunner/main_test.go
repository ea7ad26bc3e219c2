package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// The rule proposed for demo/rules.yaml.
const reportRules = `
rules:
  - match: 'run the (?P<name>\w+) report'
    steps:
      - calls: [{tool: run_report, input: {name: "{{name}}"}}]
      - reply: "The {{name}} report {{result.run_report.status}}: {{result.run_report.detail}}{{result.run_report.error}}"
`

var carol = &auth.Principal{ID: "carol", Type: "user"}

type runnerEnv struct {
	*evetest.Env
	dir string
}

func newRunnerEnv(t *testing.T) *runnerEnv {
	t.Helper()
	env := evetest.New(t)
	cfg, _, _ := env.Actions()
	dir := filepath.Join(t.TempDir(), "jobs")
	a := evetest.Agent(t, reportRules, demo.RunReport(dir))
	env.StartWorkerHost(a, agent.Host{Actions: cfg})
	return &runnerEnv{Env: env, dir: dir}
}

func (e *runnerEnv) runner(workTime time.Duration) *runner {
	return &runner{
		dir: e.dir, workTime: workTime, heartbeatEvery: 50 * time.Millisecond, claimTTL: time.Minute,
		client: &actions.Client{InitialBackoff: 10 * time.Millisecond, MaxAttempts: 3},
		log:    slog.New(slog.NewTextHandler(testWriter{e.T}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// send starts a turn and waits for its job file.
func (e *runnerEnv) send(t *testing.T, msg string) (string, string) {
	t.Helper()
	res, err := e.Sessions.CreateAndSend(e.Ctx(30*time.Second), "", carol, signals.SendRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(e.dir, "*"+demo.JobExt))
		if len(files) == 1 {
			return res.SessionID, files[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job file in %s (found %v)", e.dir, files)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitClaimed waits until a runner has claimed the one job.
func (e *runnerEnv) waitClaimed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if f := e.files(t); len(f) == 1 && strings.HasSuffix(f[0], demo.ClaimedExt) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not claimed: %v", e.files(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *runnerEnv) files(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

func readJob(t *testing.T, path string) demo.ReportJob {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j demo.ReportJob
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, j.Input); err != nil {
		t.Fatal(err)
	}
	j.Input = b.Bytes()
	return j
}

func TestRunnerCompletesReport(t *testing.T) {
	e := newRunnerEnv(t)
	id, path := e.send(t, "run the sales report")
	job := readJob(t, path)
	if filepath.Base(path) != job.Action.ID+".json" || job.Action.Completion.URL == "" || string(job.Input) != `{"name":"sales"}` {
		t.Fatalf("job %s = %+v", path, job)
	}
	if tok, err := base64.StdEncoding.DecodeString(job.TaskToken); err != nil || len(tok) == 0 {
		t.Fatalf("taskToken %q: %v", job.TaskToken, err)
	}
	if d := time.Until(job.Action.Deadline); d < 9*time.Minute || d > 10*time.Minute {
		t.Fatalf("deadline in %v, want 10m", d)
	}

	n, err := e.runner(200 * time.Millisecond).RunOnce(e.Ctx(30 * time.Second))
	if err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	want := "The sales report " + makeReport(job.Action.ID, demo.ReportInput{Name: "sales"}).Status + ": " + makeReport(job.Action.ID, demo.ReportInput{Name: "sales"}).Detail
	if got := e.Reply(id); got != want || !strings.HasPrefix(got, "The sales report succeeded: sales report generated: ") {
		t.Fatalf("reply = %q, want %q", got, want)
	}
	if f := e.files(t); len(f) != 0 {
		t.Fatalf("jobs dir still holds %v", f)
	}
	// Nothing is left to do.
	if n, err := e.runner(0).RunOnce(e.Ctx(5 * time.Second)); err != nil || n != 0 {
		t.Fatalf("second pass = %d, %v", n, err)
	}
}

func TestRunnerStopsWhenTurnCancelled(t *testing.T) {
	e := newRunnerEnv(t)
	id, _ := e.send(t, "run the churn report")
	done := make(chan time.Time)
	go func() {
		e.runner(time.Minute).RunOnce(context.Background())
		done <- time.Now()
	}()
	e.waitClaimed(t)
	cancelled := time.Now()
	if _, err := e.Sessions.Control(e.Ctx(20*time.Second), id, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-done:
		t.Logf("runner stopped %v after the cancel", at.Sub(cancelled))
	case <-time.After(20 * time.Second):
		t.Fatal("the runner kept working after the turn was cancelled")
	}
	if f := e.files(t); len(f) != 0 {
		t.Fatalf("jobs dir still holds %v", f)
	}
	var ar protocol.ActionResultData
	evetest.Of(e.WaitIdle(id), protocol.ActionResult)[0].Decode(&ar)
	if ar.Error == nil || ar.Error.Code != protocol.CodeToolCancelled {
		t.Fatalf("action.result = %+v", ar)
	}
}

func TestRunnerSurvivesRestarts(t *testing.T) {
	e := newRunnerEnv(t)
	id, path := e.send(t, "run the revenue report")
	job := readJob(t, path)

	// A runner stopped mid-job hands the job back.
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { e.runner(time.Minute).RunOnce(ctx); close(stopped) }()
	e.waitClaimed(t) // mid-job
	cancel()
	<-stopped
	if f := e.files(t); len(f) != 1 || f[0] != job.Action.ID+demo.JobExt {
		t.Fatalf("after a stop: %v", f)
	}

	// A runner that died leaves a claim behind: fresh, it is left alone...
	claimed := filepath.Join(e.dir, job.Action.ID+demo.ClaimedExt)
	if err := os.Rename(path, claimed); err != nil {
		t.Fatal(err)
	}
	if n, err := e.runner(0).RunOnce(e.Ctx(10 * time.Second)); err != nil || n != 0 {
		t.Fatalf("fresh claim: RunOnce = %d, %v", n, err)
	}
	// ...older than a minute, it is reclaimed and processed.
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(claimed, old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := e.runner(100 * time.Millisecond).RunOnce(e.Ctx(30 * time.Second)); err != nil || n != 1 {
		t.Fatalf("stale claim: RunOnce = %d, %v", n, err)
	}
	if got := e.Reply(id); !strings.HasPrefix(got, "The revenue report succeeded: revenue report generated") {
		t.Fatalf("reply = %q", got)
	}
	if f := e.files(t); len(f) != 0 {
		t.Fatalf("jobs dir still holds %v", f)
	}

	// The first runner, had it finished after all, completes a duplicate: fine.
	if err := (&actions.Client{}).Complete(e.Ctx(10*time.Second), job.Action.Completion, makeReport(job.Action.ID, demo.ReportInput{Name: "revenue"})); err != nil {
		t.Fatalf("duplicate completion: %v", err)
	}
}

func TestSpoolJobIsAtomicAndIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	job := demo.ReportJob{
		Action: demo.JobAction{ID: "act_x", Completion: tools.Completion{ID: "act_x", URL: "http://h/eve/v1/actions/t"}, Deadline: time.Now().Add(time.Minute)},
		Input:  json.RawMessage(`{"name":"a"}`),
	}
	if err := demo.SpoolJob(dir, job); err != nil {
		t.Fatal(err)
	}
	// A retry with a different body changes nothing, spooled or claimed.
	job2 := job
	job2.Input = json.RawMessage(`{"name":"b"}`)
	if err := demo.SpoolJob(dir, job2); err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, filepath.Join(dir, "act_x.json")); string(got.Input) != `{"name":"a"}` {
		t.Fatalf("job rewritten: %s", got.Input)
	}
	os.Rename(filepath.Join(dir, "act_x.json"), filepath.Join(dir, "act_x"+demo.ClaimedExt))
	if err := demo.SpoolJob(dir, job2); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "act_x"+demo.ClaimedExt {
		t.Fatalf("dir = %v (a claimed job was spooled again, or a temp file was left)", entries)
	}
	for _, bad := range []string{"", "../x", ".hidden", "a/b"} {
		j := job
		j.Action.ID = bad
		if err := demo.SpoolJob(dir, j); err == nil {
			t.Fatalf("action id %q accepted", bad)
		}
	}
}
