package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TestRecordWorkflowTools records only the histories of workflow tools
// (change eve-workflow-tools), which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordWorkflowTools
func TestRecordWorkflowTools(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordWorkflowTools(t, prefix)
}

// recordWorkflowTools: a turn whose workflow tool completes, one a person
// approves first, one cancelled while the child runs, one whose child
// outlives its deadline, and a tools API execution of the tool; then a
// Nexus tool's turns: completed, cancelled, past its deadline.
func recordWorkflowTools(t *testing.T, prefix string) {
	t.Helper()
	save := func(env *evetest.Env, name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	start := func(timeout time.Duration, pol approval.Policy, block bool) (*evetest.Env, *agent.Agent) {
		env := evetest.New(t)
		a := provisionAgent(timeout, pol)
		env.StartWorkerAnd(a, agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: t.TempDir(), block: block}.register)
		return env, a
	}
	send := func(env *evetest.Env) string {
		res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		return res.SessionID
	}

	env, a := start(time.Hour, approval.Never(), false)
	sid := send(env)
	env.WaitIdle(sid)
	save(env, "turn-workflow-completed", sid+"/turn_0")
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := svc.RunResult(env.Ctx(30*time.Second), "provisioner.provision", json.RawMessage(`{"name":"cache"}`), toolsapi.RunOptions{IdempotencyKey: "history:workflow"})
	if err != nil || ex.Status != catalog.StatusSucceeded {
		t.Fatalf("execution: %+v, %v", ex, err)
	}
	save(env, "execution-workflow", ex.ID)

	env, _ = start(time.Hour, approval.Always(), false)
	sid = send(env)
	var req protocol.InputRequest
	waitFor(t, env, sid, func(evs []protocol.Event) bool {
		rs := evetest.Of(evs, protocol.InputRequested)
		if len(rs) == 0 {
			return false
		}
		var d protocol.InputRequestedData
		rs[0].Decode(&d)
		req = d.Requests[0]
		return true
	})
	if _, err := env.Sessions.Respond(env.Ctx(30*time.Second), sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.RequestID, OptionID: "approve"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle(sid)
	save(env, "turn-workflow-approved", sid+"/turn_0")

	env, _ = start(time.Hour, approval.Never(), true)
	sid = send(env)
	childOf(t, env, sid)
	waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.TurnWaiting })
	if _, err := env.Sessions.Control(env.Ctx(30*time.Second), sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	save(env, "turn-workflow-cancelled", sid+"/turn_0")

	env, _ = start(2*time.Second, approval.Never(), true)
	sid = send(env)
	env.WaitIdle(sid)
	save(env, "turn-workflow-deadline", sid+"/turn_0")

	// A workflow tool whose child asks its person (eve-workflow-tool-asks).
	aenv := evetest.New(t)
	aenv.StartWorker(askingProvisionAgent())
	sid = send(aenv)
	q := waitAskedQuestion(t, aenv, sid)
	if _, err := aenv.Sessions.Respond(aenv.Ctx(30*time.Second), sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: q.RequestID, OptionID: "s"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	aenv.WaitIdle(sid)
	save(aenv, "turn-workflow-asks", sid+"/turn_0")

	// Nexus tools (eve-nexus-tools), on a server with a handler namespace.
	srv := devtest.Start(t, devserver.Options{ExtraArgs: []string{"--namespace", handlerNamespace}})
	for _, c := range []struct {
		name    string
		timeout time.Duration
		block   bool
	}{{"turn-nexus-completed", time.Minute, false}, {"turn-nexus-cancelled", time.Minute, true}, {"turn-nexus-deadline", 2 * time.Second, true}} {
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		endpoint, _ := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir, block: c.block})
		env.StartWorker(nexusAgent(endpoint, c.timeout, approval.Never()))
		sid := send(env)
		if c.name == "turn-nexus-cancelled" {
			waitMarker(t, dir, "h-reserve-1")
			if _, err := env.Sessions.Control(env.Ctx(30*time.Second), sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
		} else {
			env.WaitIdle(sid)
		}
		save(env, c.name, sid+"/turn_0")
	}
}
