package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// handlerNamespace is where the Nexus handlers of these tests run: not
// the namespace of eve's sessions, which reaches them only through an
// endpoint.
const handlerNamespace = "eve-nexus-handlers"

// nexusAgent offers the operation provisioning/provision behind endpoint
// as the tool provision.
func nexusAgent(endpoint string, timeout time.Duration, pol approval.Policy) *agent.Agent {
	m, err := scripted.Parse([]byte(provisionRules))
	if err != nil {
		panic(err)
	}
	tool := tools.DefineNexus("provision", "Provision a resource (a Nexus operation of the platform team).",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"status":{"type":"string"}},"required":["id","status"]}`),
		tools.Nexus{Endpoint: endpoint, Service: "provisioning", Operation: "provision", ScheduleToClose: timeout})
	tool.Approval = pol
	reg := tools.NewRegistry()
	reg.MustRegister(tool)
	return &agent.Agent{Name: "provisioner", Model: m, Tools: reg, LocalModel: true}
}

// nexusHandler runs the provisioning service in the handler namespace on
// a task queue of its own, behind a new endpoint, and returns the
// endpoint's name and a client of the handler namespace. Its operation
// starts the provision workflow (handler workflow id "provision-<request
// id>").
func nexusHandler(t *testing.T, srv *devserver.Server, env *evetest.Env, app provisionApp) (string, client.Client) {
	t.Helper()
	hc, err := srv.Dial(client.Options{Namespace: handlerNamespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	tq := env.TaskQueue + "-handler"
	w := worker.New(hc, tq, worker.Options{MaxHeartbeatThrottleInterval: evetest.HeartbeatThrottle})
	app.register(w)
	svc := nexus.NewService("provisioning")
	if err := svc.Register(temporalnexus.NewWorkflowRunOperation("provision", provisionWorkflow,
		func(_ context.Context, _ provisionInput, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
			return client.StartWorkflowOptions{ID: "provision-" + o.RequestID}, nil
		})); err != nil {
		t.Fatal(err)
	}
	w.RegisterNexusService(svc)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	endpoint := strings.ReplaceAll(strings.ToLower(tq), "_", "-")
	endpoint = "ep-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, endpoint)
	if _, err := env.Client.OperatorService().CreateNexusEndpoint(env.Ctx(30*time.Second), &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: endpoint,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: handlerNamespace, TaskQueue: tq,
		}}},
	}}); err != nil {
		t.Fatal(err)
	}
	return endpoint, hc
}

// A Nexus operation as a tool, across two namespaces of one dev server
// (the endpoint created through the operator API): the model calls it
// and the handler's workflow runs its activities; an approval gates it;
// a cancelled turn cancels the operation (the handler's workflow); its
// schedule-to-close deadline expires with DEADLINE_EXCEEDED.
func TestNexusTool(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{ExtraArgs: []string{"--namespace", handlerNamespace}})

	t.Run("runs", func(t *testing.T) {
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		endpoint, _ := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir})
		env.StartWorker(nexusAgent(endpoint, time.Minute, approval.Never()))
		res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		evs := env.WaitIdle(res.SessionID)
		if r := env.Reply(res.SessionID); r != "provisioned res-db (ready)" {
			t.Fatalf("reply %q: %s", r, evetest.Join(evs))
		}
		if got := fmt.Sprint(markers(t, dir)); got != "[h-configure-1 h-reserve-1]" {
			t.Errorf("activities %s", got)
		}
	})

	t.Run("approval", func(t *testing.T) {
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		endpoint, _ := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir})
		env.StartWorker(nexusAgent(endpoint, time.Minute, approval.Always()))
		ctx := env.Ctx(60 * time.Second)
		res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		sid := res.SessionID
		var req protocol.InputRequest
		waitFor(t, env, sid, func(evs []protocol.Event) bool {
			rs := evetest.Of(evs, protocol.InputRequested)
			if len(rs) == 0 || evs[len(evs)-1].Type != protocol.TurnWaiting {
				return false
			}
			var d protocol.InputRequestedData
			rs[0].Decode(&d)
			req = d.Requests[0]
			return true
		})
		if len(markers(t, dir)) != 0 {
			t.Fatalf("ran before the approval: %v", markers(t, dir))
		}
		if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.RequestID, OptionID: "approve"}}, Responder: alice, Wait: true}); err != nil {
			t.Fatal(err)
		}
		env.WaitIdle(sid)
		if r := env.Reply(sid); r != "provisioned res-db (ready)" {
			t.Fatalf("reply %q", r)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		endpoint, hc := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir, block: true})
		env.StartWorker(nexusAgent(endpoint, time.Minute, approval.Never()))
		ctx := env.Ctx(60 * time.Second)
		res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		sid := res.SessionID
		waitMarker(t, dir, "h-reserve-1")
		if r, err := env.Sessions.Control(ctx, sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil || r.Status != signals.ControlAccepted {
			t.Fatalf("cancel: %+v %v", r, err)
		}
		evs := waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
		if ar := lastResult(t, evs); ar.Error == nil || ar.Error.Code != protocol.CodeToolCancelled {
			t.Fatalf("action.result %+v: %s", ar, evetest.Join(evs))
		}
		// The handler's workflow, in the other namespace, is cancelled.
		handlerCancelled(t, hc)
	})

	t.Run("worker killed", func(t *testing.T) {
		// The worker that runs the turn is SIGKILLed while the operation
		// runs in the handler's namespace: a new worker replays the turn,
		// the operation's result reaches it, and the call settles once;
		// the handler ran the operation once.
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		release := filepath.Join(t.TempDir(), "release")
		endpoint, _ := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir, release: release})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+srv.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
			"EVE_E2E_WORKER_AGENT=nexus", "EVE_E2E_WORKER_ENDPOINT="+endpoint, srv.PayloadStoreEnv())
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		sid := res.SessionID
		waitMarker(t, dir, "h-reserve-1")
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		env.StartWorker(nexusAgent(endpoint, time.Minute, approval.Never()))
		var evs []protocol.Event
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got, err := env.Sessions.Events(env.Ctx(10*time.Second), sid, 0)
			if err == nil && len(got) > 0 && got[len(got)-1].Type == protocol.SessionWaiting {
				evs = got
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session did not finish: %v %s", err, evetest.Join(got))
			}
		}
		if r := env.Reply(sid); r != "provisioned res-db (ready)" {
			t.Fatalf("reply %q: %s", r, evetest.Join(evs))
		}
		if n := len(evetest.Of(evs, protocol.ActionResult)); n != 1 {
			t.Fatalf("%d action results: %s", n, evetest.Join(evs))
		}
		if got := fmt.Sprint(markers(t, dir)); got != "[h-configure-1 h-reserve-1]" {
			t.Errorf("the handler's activities %s", got)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		env := evetest.NewOn(t, srv)
		dir := t.TempDir()
		endpoint, _ := nexusHandler(t, srv, env, provisionApp{worker: "h", markers: dir, block: true})
		env.StartWorker(nexusAgent(endpoint, 3*time.Second, approval.Never()))
		res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "provision db"})
		if err != nil {
			t.Fatal(err)
		}
		evs := env.WaitIdle(res.SessionID)
		if ar := lastResult(t, evs); ar.Error == nil || ar.Error.Code != protocol.CodeDeadlineExceeded || !strings.Contains(ar.Error.Message, "3s") {
			t.Fatalf("action.result %+v", ar)
		}
	})
}

// handlerCancelled waits (bounded) until a provision workflow of the
// handler namespace is cancelled.
func handlerCancelled(t *testing.T, hc client.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.WorkflowService().ListWorkflowExecutions(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: handlerNamespace, Query: `WorkflowType = "E2EProvision" AND ExecutionStatus = "Canceled"`,
		})
		if err == nil && len(resp.GetExecutions()) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no handler workflow was cancelled: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
