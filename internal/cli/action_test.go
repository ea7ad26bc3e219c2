package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const actionRules = `
rules:
  - match: report
    steps:
      - calls: [{tool: run_report, input: {spec: "q3"}}]
      - reply: "{{result.run_report.status}}: {{result.run_report.detail}}{{result.run_report.error}}"
`

var bob = &auth.Principal{ID: "bob", Type: "user"}

// actionEnv is a worker serving a delegated run_report tool whose jobs
// land on a channel, with completion URLs served by env.Actions().
type actionEnv struct {
	*evetest.Env
	jobs chan tools.Action
}

func newActionEnv(t *testing.T) *actionEnv { return newActionEnvDeadline(t, time.Hour) }

func newActionEnvDeadline(t *testing.T, deadline time.Duration) *actionEnv {
	t.Helper()
	env := evetest.New(t)
	cfg, _, _ := env.Actions()
	jobs := make(chan tools.Action, 10)
	tool := tools.DefineDelegated("run_report", "Run a report job.",
		json.RawMessage(`{"type":"object","properties":{"spec":{"type":"string"}},"required":["spec"]}`),
		json.RawMessage(`{"type":"object","properties":{"status":{"enum":["succeeded","failed"]},"detail":{"type":"string"}},"required":["status","detail"]}`),
		tools.Delegated{Deadline: deadline, Delegate: func(ctx *tools.Context, input json.RawMessage, a tools.Action) (tools.Pending, error) {
			jobs <- a
			return a.Pending(), nil
		}})
	a := evetest.Agent(t, actionRules, tool)
	env.StartWorkerHost(a, agent.Host{Actions: cfg})
	return &actionEnv{Env: env, jobs: jobs}
}

// start begins a turn that calls run_report and returns its session and action.
func (e *actionEnv) start(t *testing.T) (string, tools.Action) {
	t.Helper()
	res, err := e.Sessions.CreateAndSend(e.Ctx(30*time.Second), "", bob, signals.SendRequest{Message: "report"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-e.jobs:
		return res.SessionID, a
	case <-time.After(20 * time.Second):
		t.Fatal("no job was enqueued")
	}
	return "", tools.Action{}
}

func (e *actionEnv) actionResult(t *testing.T, id string) protocol.ActionResultData {
	t.Helper()
	ars := evetest.Of(e.WaitIdle(id), protocol.ActionResult)
	if len(ars) != 1 {
		t.Fatalf("%d action results, want 1", len(ars))
	}
	var ar protocol.ActionResultData
	ars[0].Decode(&ar)
	return ar
}

// temporalFlags point --task-token commands at the test's dev server.
func (e *actionEnv) temporalFlags() []string {
	return []string{"--address", e.Server.Addr, "--namespace", e.Server.Namespace}
}

func token(a tools.Action) string { return base64.StdEncoding.EncodeToString(a.TaskToken) }

// runEve runs the CLI in-process, as main does (an error means exit 1).
func runEve(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	t.Logf("%s eve %s\n  stdout: %s  stderr: %s  err: %v", time.Now().Format("15:04:05.000"), strings.Join(args, " "), out.String(), errOut.String(), err)
	return out.String(), err
}

func mustFail(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

func decodeOut[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", out, err)
	}
	return v
}

func TestActionCompleteByURL(t *testing.T) {
	e := newActionEnv(t)
	id, a := e.start(t)
	u := a.Completion.URL

	// 422: reported with the server's code, and the action stays pending.
	_, err := runEve(t, "", "action", "complete", "--url", u, "--output", `{"status":"maybe"}`)
	mustFail(t, err, "422", "invalid_output", "stays pending")

	out, err := runEve(t, "", "action", "complete", "--url", u, "--output", `{"status":"succeeded","detail":"from the cli"}`)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeOut[actionSettleReply](t, out)
	if !r.OK || r.ActionID != a.ID || r.Status != protocol.StatusCompleted {
		t.Fatalf("reply = %+v", r)
	}
	// The same completion again is fine (duplicate-safe); a different one is 409.
	if _, err := runEve(t, "", "action", "complete", "--url", u, "--output", `{"status":"succeeded","detail":"from the cli"}`); err != nil {
		t.Fatal(err)
	}
	_, err = runEve(t, "", "action", "complete", "--url", u, "--output", `{"status":"succeeded","detail":"other"}`)
	mustFail(t, err, "409", "action_conflict")
	if got := e.Reply(id); got != "succeeded: from the cli" {
		t.Fatalf("reply = %q", got)
	}
}

func TestActionCompleteByURLFromFile(t *testing.T) {
	e := newActionEnv(t)
	id, a := e.start(t)
	f := filepath.Join(t.TempDir(), "result.json")
	if err := os.WriteFile(f, []byte(`{"status":"succeeded","detail":"from a file"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runEve(t, "", "action", "complete", "--url", a.Completion.URL, "--output-file", f); err != nil {
		t.Fatal(err)
	}
	if got := e.Reply(id); got != "succeeded: from a file" {
		t.Fatalf("reply = %q", got)
	}
}

func TestActionCompleteByTaskToken(t *testing.T) {
	e := newActionEnv(t)
	id, a := e.start(t)
	args := append([]string{"action", "complete", "--task-token", token(a), "--output", "-"}, e.temporalFlags()...)
	out, err := runEve(t, `{"status":"succeeded","detail":"by token"}`, args...)
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeOut[actionSettleReply](t, out); !r.OK || r.ActionID != a.ID || r.Duplicate {
		t.Fatalf("reply = %+v", r)
	}
	if got := e.Reply(id); got != "succeeded: by token" {
		t.Fatalf("reply = %q", got)
	}
	// After the turn: the same completion is a duplicate, a different one a conflict.
	out, err = runEve(t, `{"status":"succeeded","detail":"by token"}`, args...)
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeOut[actionSettleReply](t, out); !r.OK || !r.Duplicate {
		t.Fatalf("repeat: %+v", r)
	}
	_, err = runEve(t, `{"status":"succeeded","detail":"different"}`, args...)
	mustFail(t, err, "action_conflict")
}

func TestActionFail(t *testing.T) {
	e := newActionEnv(t)
	// By URL.
	id, a := e.start(t)
	out, err := runEve(t, "", "action", "fail", "--url", a.Completion.URL, "--code", "REPORT_FAILED", "--message", "the warehouse is down")
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeOut[actionSettleReply](t, out); r.Status != protocol.StatusFailed {
		t.Fatalf("reply = %+v", r)
	}
	if got := e.Reply(id); !strings.Contains(got, "the warehouse is down") {
		t.Fatalf("reply = %q", got)
	}
	if ar := e.actionResult(t, id); ar.Status != protocol.StatusFailed || ar.Error == nil || ar.Error.Code != "REPORT_FAILED" {
		t.Fatalf("action.result = %+v", ar)
	}

	// By task token, with the default code.
	id, a = e.start(t)
	args := append([]string{"action", "fail", "--task-token", token(a), "--message", "no data for q3"}, e.temporalFlags()...)
	if _, err := runEve(t, "", args...); err != nil {
		t.Fatal(err)
	}
	if got := e.Reply(id); !strings.Contains(got, "no data for q3") {
		t.Fatalf("reply = %q", got)
	}
	if ar := e.actionResult(t, id); ar.Error == nil || ar.Error.Code != protocol.CodeToolExecution {
		t.Fatalf("action.result = %+v", ar)
	}
}

func TestActionHeartbeatReportsCancel(t *testing.T) {
	e := newActionEnv(t)
	id, a := e.start(t)
	byToken := append([]string{"action", "heartbeat", "--task-token", token(a)}, e.temporalFlags()...)

	out, err := runEve(t, "", "action", "heartbeat", "--url", a.Completion.URL, "--details", `{"progress":10}`)
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeOut[actionHeartbeatReply](t, out); r.CancelRequested {
		t.Fatalf("before cancel: %s", out)
	}
	out, err = runEve(t, "", append(byToken, "--details", `{"progress":20}`)...)
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeOut[actionHeartbeatReply](t, out); r.CancelRequested {
		t.Fatalf("before cancel, by token: %s", out)
	}

	if _, err := e.Sessions.Control(e.Ctx(20*time.Second), id, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	if ar := e.actionResult(t, id); ar.Error == nil || ar.Error.Code != protocol.CodeToolCancelled {
		t.Fatalf("action.result = %+v", ar)
	}

	for _, args := range [][]string{{"action", "heartbeat", "--url", a.Completion.URL}, byToken} {
		out, err := runEve(t, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		if out != "{\"cancelRequested\":true}\n" {
			t.Fatalf("after cancel: %q", out)
		}
	}
	// A late completion cannot revive it: 410 by URL, action_ended by token.
	_, err = runEve(t, "", "action", "complete", "--url", a.Completion.URL, "--output", `{"status":"succeeded","detail":"late"}`)
	mustFail(t, err, "410", "action_ended")
	_, err = runEve(t, "", append([]string{"action", "complete", "--task-token", token(a), "--output", `{"status":"succeeded","detail":"late"}`}, e.temporalFlags()...)...)
	mustFail(t, err, "action_ended", "cancelled")
}

// fakeToken is a well-formed task token for an activity that does not exist.
func fakeToken() string { return fakeTokenIn("00000000-0000-0000-0000-000000000000") }

func fakeTokenIn(namespaceID string) string {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, namespaceID)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "no-such-turn")
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendString(b, "tool/call_1")
	return base64.StdEncoding.EncodeToString(b)
}

func TestActionBadFlags(t *testing.T) {
	const u = "http://127.0.0.1:1/eve/v1/actions/abc.def"
	tok := fakeToken()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"neither", []string{"complete", "--output", "{}"}, "--url <completion url> or --task-token"},
		{"both", []string{"complete", "--url", u, "--task-token", tok, "--output", "{}"}, "either --url or --task-token, not both"},
		{"no output", []string{"complete", "--url", u}, "complete needs the output"},
		{"two outputs", []string{"complete", "--url", u, "--output", "{}", "--output-file", "x.json"}, "either --output or --output-file"},
		{"invalid JSON", []string{"complete", "--url", u, "--output", `{"status":`}, "--output is not valid JSON"},
		{"two JSON values", []string{"complete", "--url", u, "--output", `{} {}`}, "more than one value"},
		{"missing file", []string{"complete", "--url", u, "--output-file", filepath.Join(t.TempDir(), "nope.json")}, "--output-file"},
		{"bad base64", []string{"complete", "--task-token", "not base64!!", "--output", "{}"}, "--task-token is not valid base64"},
		{"not a task token", []string{"complete", "--task-token", base64.StdEncoding.EncodeToString([]byte("hello, world")), "--output", "{}"}, "not a Temporal activity task token"},
		{"not a URL", []string{"complete", "--url", "ftp://x/y", "--output", "{}"}, "not an http(s) URL"},
		{"not a completion URL", []string{"complete", "--url", "http://127.0.0.1:4111/eve/v1/sessions", "--output", "{}"}, "not a completion URL"},
		{"heartbeat URL", []string{"complete", "--url", u + "/heartbeat", "--output", "{}"}, "without /heartbeat"},
		{"fail without message", []string{"fail", "--url", u}, "fail needs --message"},
		{"fail with empty code", []string{"fail", "--url", u, "--message", "m", "--code", ""}, "--code is empty"},
		{"bad details", []string{"heartbeat", "--url", u, "--details", "{oops"}, "--details is not valid JSON"},
		{"stray argument", []string{"complete", "extra", "--url", u, "--output", "{}"}, "unknown command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := runEve(t, "", append([]string{"action"}, c.args...)...)
			mustFail(t, err, c.want)
			if time.Since(start) > 2*time.Second {
				t.Fatalf("took %v: a bad flag must fail at once", time.Since(start))
			}
		})
	}
}

func TestActionTaskTokenNeverHangs(t *testing.T) {
	e := newActionEnv(t)
	ns, err := e.Client.WorkflowService().DescribeNamespace(e.Ctx(10*time.Second), &workflowservice.DescribeNamespaceRequest{Namespace: e.Server.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	// Unknown namespaces and activities are answered at once...
	for _, tok := range []string{fakeToken(), fakeTokenIn(ns.NamespaceInfo.Id)} {
		start := time.Now()
		_, err := runEve(t, "", append([]string{"action", "complete", "--task-token", tok, "--output", "{}"}, e.temporalFlags()...)...)
		if err == nil || time.Since(start) > 12*time.Second {
			t.Fatalf("fake token: err=%v after %v", err, time.Since(start))
		}
	}
	// ...and whatever Temporal does, --timeout bounds the wait and says so.
	_, err = runEve(t, "", append([]string{"action", "heartbeat", "--task-token", fakeToken(), "--timeout", "1ns"}, e.temporalFlags()...)...)
	mustFail(t, err, "--timeout")
}

func TestActionAfterDeadline(t *testing.T) {
	e := newActionEnvDeadline(t, 1500*time.Millisecond)
	id, a := e.start(t)
	if ar := e.actionResult(t, id); ar.Error == nil || ar.Error.Code != protocol.CodeDeadlineExceeded {
		t.Fatalf("action.result = %+v", ar)
	}
	// The job is told to stop: cancelRequested, or 410 once the turn is over.
	out, err := runEve(t, "", "action", "heartbeat", "--url", a.Completion.URL)
	if err == nil && out != "{\"cancelRequested\":true}\n" {
		t.Fatalf("heartbeat after the deadline: %q", out)
	} else if err != nil {
		mustFail(t, err, "410")
	}
	_, err = runEve(t, "", "action", "complete", "--url", a.Completion.URL, "--output", `{"status":"succeeded","detail":"late"}`)
	mustFail(t, err, "410", "action_ended", "deadline-exceeded")
	_, err = runEve(t, "", append([]string{"action", "complete", "--task-token", token(a), "--output", `{"status":"succeeded","detail":"late"}`}, e.temporalFlags()...)...)
	mustFail(t, err, "action_ended", "deadline-exceeded")
}
