package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

const reportRules = `
rules:
  - match: report
    steps:
      - calls: [{tool: run_report, input: {spec: "q3"}}]
      - reply: "{{result.run_report.status}}: {{result.run_report.detail}}{{result.run_report.error}}"
`

type job struct {
	Action tools.Action
	Input  json.RawMessage
}

// reportTool enqueues jobs on a channel; when instant is set, it completes
// the action itself before Delegate returns.
func reportTool(jobs chan job, deadline time.Duration, instant bool) *tools.Tool {
	return tools.DefineDelegated("run_report", "Run a durable external report job.",
		json.RawMessage(`{"type":"object","properties":{"spec":{"type":"string"}},"required":["spec"]}`),
		json.RawMessage(`{"type":"object","properties":{"status":{"enum":["succeeded","failed"]},"detail":{"type":"string"}},"required":["status","detail"]}`),
		tools.Delegated{Deadline: deadline, Delegate: func(ctx *tools.Context, input json.RawMessage, a tools.Action) (tools.Pending, error) {
			if instant {
				if err := actions.Complete(ctx, a.Completion, map[string]string{"status": "succeeded", "detail": "instant"}); err != nil {
					return tools.Pending{}, err
				}
			} else {
				jobs <- job{Action: a, Input: input}
			}
			return a.Pending(), nil
		}})
}

type delegatedEnv struct {
	*evetest.Env
	jobs chan job
	mk   func() *agent.Agent
	// host signs the agent's completion URLs.
	host agent.Host
}

func newDelegatedEnv(t *testing.T, env *evetest.Env, deadline time.Duration, instant bool) *delegatedEnv {
	cfg, _, _ := env.Actions()
	jobs := make(chan job, 10)
	mk := func() *agent.Agent { return evetest.Agent(t, reportRules, reportTool(jobs, deadline, instant)) }
	return &delegatedEnv{Env: env, jobs: jobs, mk: mk, host: agent.Host{Actions: cfg}}
}

func (d *delegatedEnv) start(t *testing.T) (string, job) {
	t.Helper()
	ctx := d.Ctx(30 * time.Second)
	res, err := d.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "report"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-d.jobs:
		return res.SessionID, j
	case <-time.After(20 * time.Second):
		t.Fatal("no job was enqueued")
	}
	return "", job{}
}

func (d *delegatedEnv) reply(t *testing.T, id string) string {
	t.Helper()
	evs := waitFor(t, d.Env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	mc := evetest.Of(evs, protocol.MessageCompleted)
	var m protocol.MessageCompletedData
	mc[len(mc)-1].Decode(&m)
	return m.Message
}

func post(t *testing.T, url string, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestDelegatedCompletionBeforeExecuteReturns(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, true)
	env.StartWorkerHost(d.mk(), d.host)
	res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.reply(t, res.SessionID); got != "succeeded: instant" {
		t.Fatalf("reply = %q", got)
	}
}

func TestDelegatedDuplicateConflictInvalidAndTaskWaiting(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	if j.Action.ID == "" || !strings.HasPrefix(j.Action.ID, "act_") || len(j.Action.TaskToken) == 0 || j.Action.Deadline.IsZero() {
		t.Fatalf("action = %+v", j.Action)
	}
	waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.TurnWaiting })
	evs := env.Events(env.Ctx(10*time.Second), id)
	var tw protocol.TurnWaitingData
	evs[len(evs)-1].Decode(&tw)
	if tw.On != "tasks" {
		t.Fatalf("turn.waiting = %+v", tw)
	}
	// Invalid output: 422, and the action stays pending.
	if st, body := post(t, j.Action.Completion.URL, `{"output":{"status":"maybe"}}`); st != 422 || !strings.Contains(body, "invalid_output") {
		t.Fatalf("invalid output: %d %s", st, body)
	}
	good := `{"output":{"status":"succeeded","detail":"rows: 42"}}`
	for i := 0; i < 2; i++ { // first and duplicate: 200 both
		if st, body := post(t, j.Action.Completion.URL, good); st != 200 {
			t.Fatalf("completion %d: %d %s", i, st, body)
		}
	}
	if st, body := post(t, j.Action.Completion.URL, `{"output":{"status":"succeeded","detail":"other"}}`); st != 409 {
		t.Fatalf("conflict: %d %s", st, body)
	}
	if got := d.reply(t, id); got != "succeeded: rows: 42" {
		t.Fatalf("reply = %q", got)
	}
	// Still 200 for the same completion after the turn ended.
	if st, body := post(t, j.Action.Completion.URL, good); st != 200 {
		t.Fatalf("duplicate after the turn: %d %s", st, body)
	}
	if n := len(evetest.Of(env.Events(env.Ctx(10*time.Second), id), protocol.ActionResult)); n != 1 {
		t.Fatalf("%d action results, want 1", n)
	}
}

func TestDelegatedDeadlineThenLateCompletion(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, 1500*time.Millisecond, false)
	env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	if got := d.reply(t, id); !strings.Contains(got, "deadline exceeded") {
		t.Fatalf("reply = %q", got)
	}
	var ar protocol.ActionResultData
	evetest.Of(env.Events(env.Ctx(10*time.Second), id), protocol.ActionResult)[0].Decode(&ar)
	if ar.Status != protocol.StatusFailed || ar.Error.Code != protocol.CodeDeadlineExceeded {
		t.Fatalf("action.result = %+v", ar)
	}
	err := actions.Complete(env.Ctx(10*time.Second), j.Action.Completion, map[string]string{"status": "succeeded", "detail": "late"})
	if !errors.Is(err, actions.ErrGone) {
		t.Fatalf("late completion: %v, want 410", err)
	}
}

func TestDelegatedCancellation(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	ctx := env.Ctx(20 * time.Second)
	if cancel, err := actions.Heartbeat(ctx, j.Action.Completion, map[string]int{"progress": 10}); err != nil || cancel {
		t.Fatalf("heartbeat before cancel: %v %v", cancel, err)
	}
	if _, err := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	evs := waitFor(t, env, id, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	var ar protocol.ActionResultData
	evetest.Of(evs, protocol.ActionResult)[0].Decode(&ar)
	if ar.Error == nil || ar.Error.Code != protocol.CodeToolCancelled {
		t.Fatalf("action.result = %+v", ar)
	}
	if cancel, err := actions.Heartbeat(ctx, j.Action.Completion, nil); err != nil || !cancel {
		t.Fatalf("heartbeat after cancel: cancelRequested=%v err=%v", cancel, err)
	}
	if err := actions.Complete(ctx, j.Action.Completion, map[string]string{"status": "succeeded", "detail": "x"}); !errors.Is(err, actions.ErrGone) {
		t.Fatalf("completion after cancel: %v", err)
	}
}

func TestDelegatedForgedCapabilityAnsweredAtOnce(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	env.StartWorkerHost(d.mk(), d.host)
	_, j := d.start(t)
	u := j.Action.Completion.URL
	forged := u[:len(u)-3] + "xyz"
	// At once: the signature is checked before any Temporal call (one that
	// hung would take the service's 10 s Timeout). The bound leaves a
	// loaded machine room and still tells the two apart.
	start := time.Now()
	st, body := post(t, forged, `{"output":{"status":"succeeded","detail":"x"}}`)
	if took := time.Since(start); st != 401 || took > 5*time.Second {
		t.Fatalf("forged: %d %s in %v", st, body, took)
	}
	err := actions.Complete(env.Ctx(5*time.Second), tools.Completion{URL: forged}, map[string]string{})
	if !errors.Is(err, actions.ErrInvalidCapability) {
		t.Fatalf("helper on forged URL: %v", err)
	}
}

func TestDelegatedCompletionAfterWorkerRestart(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	stop := env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	stop()
	env.StartWorkerHost(d.mk(), d.host)
	if err := actions.Complete(env.Ctx(20*time.Second), j.Action.Completion, map[string]string{"status": "succeeded", "detail": "after restart"}); err != nil {
		t.Fatal(err)
	}
	if got := d.reply(t, id); got != "succeeded: after restart" {
		t.Fatalf("reply = %q", got)
	}
}

func TestDelegatedCompletionAfterDevServerRestart(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	env := evetest.NewOn(t, srv)
	d := newDelegatedEnv(t, env, time.Hour, false)
	stop := env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	stop()
	if err := srv.Restart(env.Ctx(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(d.mk(), d.host)
	if err := actions.Complete(env.Ctx(30*time.Second), j.Action.Completion, map[string]string{"status": "succeeded", "detail": "survived"}); err != nil {
		t.Fatal(err)
	}
	if got := d.reply(t, id); got != "succeeded: survived" {
		t.Fatalf("reply = %q", got)
	}
}

func TestActionsHelperRetriesServerErrors(t *testing.T) {
	env := evetest.New(t)
	d := newDelegatedEnv(t, env, time.Hour, false)
	env.StartWorkerHost(d.mk(), d.host)
	id, j := d.start(t)
	// A proxy that fails the first two attempts with 503, then forwards.
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			http.Error(w, `{"ok":false,"error":"try later"}`, http.StatusServiceUnavailable)
			return
		}
		target := strings.Split(j.Action.Completion.URL, "/eve/v1/")[0] + r.URL.Path
		req, _ := http.NewRequest(http.MethodPost, target, r.Body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization")) // the helper's capability
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 1<<16)
		n, _ := resp.Body.Read(buf)
		w.Write(buf[:n])
	}))
	defer proxy.Close()
	viaProxy := tools.Completion{ID: j.Action.ID, URL: proxy.URL + "/eve/v1/" + strings.Split(j.Action.Completion.URL, "/eve/v1/")[1]}
	cl := &actions.Client{InitialBackoff: 10 * time.Millisecond}
	if err := cl.Complete(context.Background(), viaProxy, map[string]string{"status": "succeeded", "detail": "retried"}); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 3 {
		t.Fatalf("%d attempts, want 3", hits.Load())
	}
	if got := d.reply(t, id); got != "succeeded: retried" {
		t.Fatalf("reply = %q", got)
	}
}
