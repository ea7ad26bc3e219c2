package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/tools/wfcall"
)

const provisionRules = `
rules:
  - match: '^provision (?P<name>\w+)'
    steps:
      - calls: [{tool: provision, input: {name: "{{name}}"}}]
      - reply: "provisioned {{result.provision.id}} ({{result.provision.status}}){{result.provision.code}}"
`

// provisionApp is an app's own workflow (two activities: reserve, then
// configure) that knows nothing of eve, and the tool that runs it. Each
// activity attempt leaves a marker "<worker>-<activity>-<attempt>";
// reserve blocks (heartbeating) until cancelled when block is set, or
// until the file release exists when that is set.
type provisionApp struct {
	worker, markers string
	block           bool
	release         string
}

type provisionInput struct {
	Name string `json:"name"`
}

type provisionResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (p provisionApp) mark(ctx context.Context, what string) {
	os.WriteFile(filepath.Join(p.markers, fmt.Sprintf("%s-%s-%d", p.worker, what, activity.GetInfo(ctx).Attempt)), nil, 0o644)
}

func (p provisionApp) reserve(ctx context.Context, name string) (string, error) {
	p.mark(ctx, "reserve")
	for p.block || p.release != "" {
		if p.release != "" {
			if _, err := os.Stat(p.release); err == nil {
				break
			}
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "res-" + name, nil
}

func (p provisionApp) configure(ctx context.Context, id string) (string, error) {
	p.mark(ctx, "configure")
	return "ready", nil
}

func provisionWorkflow(ctx workflow.Context, in provisionInput) (provisionResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, HeartbeatTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
	})
	var out provisionResult
	if err := workflow.ExecuteActivity(ctx, "E2EReserve", in.Name).Get(ctx, &out.ID); err != nil {
		return out, err
	}
	err := workflow.ExecuteActivity(ctx, "E2EConfigure", out.ID).Get(ctx, &out.Status)
	return out, err
}

// register puts the app's workflow and activities on a worker.
func (p provisionApp) register(w worker.Registry) {
	w.RegisterWorkflowWithOptions(provisionWorkflow, workflow.RegisterOptions{Name: "E2EProvision"})
	w.RegisterActivityWithOptions(p.reserve, activity.RegisterOptions{Name: "E2EReserve"})
	w.RegisterActivityWithOptions(p.configure, activity.RegisterOptions{Name: "E2EConfigure"})
}

// provisionAgent offers the workflow as the tool provision.
func provisionAgent(timeout time.Duration, pol approval.Policy) *agent.Agent {
	m, err := scripted.Parse([]byte(provisionRules))
	if err != nil {
		panic(err)
	}
	tool := tools.DefineWorkflow("provision", "Provision a resource (a workflow of two steps).",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"status":{"type":"string"}},"required":["id","status"]}`),
		tools.Workflow{Type: "E2EProvision", ExecutionTimeout: timeout})
	tool.Approval = pol
	reg := tools.NewRegistry()
	reg.MustRegister(tool)
	return &agent.Agent{Name: "provisioner", Model: m, Tools: reg, LocalModel: true}
}

// markers lists the marker files, sorted.
func markers(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// waitMarker waits (bounded) for a marker file.
func waitMarker(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker %s never appeared: %v", name, markers(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childOf is the id of the workflow the session's first workflow-tool
// call started (task.started names it).
func childOf(t *testing.T, env *evetest.Env, sid string) string {
	t.Helper()
	evs := waitFor(t, env, sid, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.TaskStarted)) > 0 })
	var d protocol.TaskStartedData
	if err := evetest.Of(evs, protocol.TaskStarted)[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.TaskID
}

// childStatus waits (bounded) until the child's status is want.
func childStatus(t *testing.T, env *evetest.Env, id string, want enumspb.WorkflowExecutionStatus) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := env.Client.DescribeWorkflowExecution(env.Ctx(10*time.Second), id, "")
		if err == nil && d.GetWorkflowExecutionInfo().GetStatus() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %s: status %v (%v), want %v", id, d.GetWorkflowExecutionInfo().GetStatus(), err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastResult is the session's last action.result.
func lastResult(t *testing.T, evs []protocol.Event) protocol.ActionResultData {
	t.Helper()
	rs := evetest.Of(evs, protocol.ActionResult)
	if len(rs) == 0 {
		t.Fatalf("no action.result: %s", evetest.Join(evs))
	}
	var d protocol.ActionResultData
	if err := rs[len(rs)-1].Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The model calls a workflow tool; the app's workflow runs its two
// activities as a child of the turn, linked to its session by memo and
// search attribute; its result reaches the model.
func TestWorkflowToolRuns(t *testing.T) {
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	app := provisionApp{worker: "w", markers: dir}
	env.StartWorkerAnd(provisionAgent(time.Hour, approval.Never()), agent.Host{SearchAttributes: true}, worker.Options{}, app.register)
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	child := childOf(t, env, sid)
	evs := env.WaitIdle(sid)
	if r := env.Reply(sid); r != "provisioned res-db (ready)" {
		t.Fatalf("reply %q: %s", r, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.ActionResult)); n != 1 {
		t.Fatalf("%d action results", n)
	}
	if diff := cmp.Diff([]string{"w-configure-1", "w-reserve-1"}, markers(t, dir)); diff != "" {
		t.Errorf("activities (-want +got):\n%s", diff)
	}
	if want := sid + "/turn_0/tool/"; !strings.HasPrefix(child, want) {
		t.Errorf("child id %q, want prefix %q", child, want)
	}
	d, err := env.Client.DescribeWorkflowExecution(ctx, child, "")
	if err != nil {
		t.Fatal(err)
	}
	info := d.GetWorkflowExecutionInfo()
	memo := map[string]string{}
	for k, p := range info.GetMemo().GetFields() {
		var s string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
			t.Fatal(err)
		}
		memo[k] = s
	}
	if memo[signals.MemoSession] != sid || memo[signals.MemoTool] != "provision" || memo[signals.MemoCall] == "" || info.GetParentExecution().GetWorkflowId() == "" {
		t.Errorf("child memo %v, parent %v", memo, info.GetParentExecution())
	}
	var sa string
	if p := info.GetSearchAttributes().GetIndexedFields()["EveSessionId"]; p == nil || converter.GetDefaultDataConverter().FromPayload(p, &sa) != nil || sa != sid {
		t.Errorf("child EveSessionId %q, want %q", sa, sid)
	}
}

// The worker that runs the turn and the app's workflow is SIGKILLed while
// the workflow's first activity runs: a new worker finishes the workflow
// (the activity's next attempt) and the call settles once, with one child.
func TestWorkflowToolWorkerKilled(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
		"EVE_E2E_WORKER_MARKERS="+dir, "EVE_E2E_WORKER_AGENT=workflow", env.Server.PayloadStoreEnv())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	ctx := env.Ctx(90 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	waitMarker(t, dir, "doomed-reserve-1")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	env.StartWorkerAnd(provisionAgent(time.Hour, approval.Never()), agent.Host{}, worker.Options{}, provisionApp{worker: "survivor", markers: dir}.register)
	// The session, the turn and the child each wait out the dead worker's
	// sticky queue (5 s) once, and queries meanwhile may time out: poll
	// with a longer bound.
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
	if diff := cmp.Diff([]string{"doomed-reserve-1", "survivor-configure-1", "survivor-reserve-2"}, markers(t, dir)); diff != "" {
		t.Errorf("activities (-want +got):\n%s", diff)
	}
	// One child: one run under the call's id.
	child := childOf(t, env, sid)
	runs := 0
	it := env.Client.GetWorkflowHistory(ctx, child, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			t.Fatal(err)
		}
		runs++
	}
	if runs != 1 {
		t.Errorf("child %s closed %d times", child, runs)
	}
}

// provisionWorkerMain is the doomed worker of TestWorkflowToolWorkerKilled:
// eve's agent and the app's workflow, whose reserve blocks.
func provisionWorkerMain(w worker.Worker, dir string) *agent.Agent {
	provisionApp{worker: "doomed", markers: dir, block: true}.register(w)
	return provisionAgent(time.Hour, approval.Never())
}

// A cancelled turn cancels the workflow it started, and the call settles
// as cancelled.
func TestWorkflowToolCancelled(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	env.StartWorkerAnd(provisionAgent(time.Hour, approval.Never()), agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: dir, block: true}.register)
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	child := childOf(t, env, sid)
	waitMarker(t, dir, "w-reserve-1")
	if r, err := env.Sessions.Control(ctx, sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil || r.Status != signals.ControlAccepted {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	evs := waitFor(t, env, sid, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	if ar := lastResult(t, evs); ar.Error == nil || ar.Error.Code != protocol.CodeToolCancelled || len(evetest.Of(evs, protocol.TurnCancelled)) != 1 {
		t.Fatalf("action.result %+v: %s", ar, evetest.Join(evs))
	}
	childStatus(t, env, child, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED)
}

// An approval gates a workflow tool: nothing starts before a person
// approves.
func TestWorkflowToolApproval(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	env.StartWorkerAnd(provisionAgent(time.Hour, approval.Always()), agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: dir}.register)
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
	// Parked on the approval: no child yet.
	if _, err := env.Client.DescribeWorkflowExecution(ctx, signals.WorkflowToolID(sid+"/turn_0", req.Action.CallID), ""); !isNotFound(err) {
		t.Fatalf("the child exists before the approval: %v", err)
	}
	if len(markers(t, dir)) != 0 {
		t.Fatalf("ran before the approval: %v", markers(t, dir))
	}
	if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.RequestID, OptionID: "approve"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	evs := env.WaitIdle(sid)
	if r := env.Reply(sid); r != "provisioned res-db (ready)" {
		t.Fatalf("reply %q: %s", r, evetest.Join(evs))
	}
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// A workflow that outlives the tool's execution timeout is timed out by
// Temporal, and the call fails with DEADLINE_EXCEEDED.
func TestWorkflowToolDeadline(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	env.StartWorkerAnd(provisionAgent(3*time.Second, approval.Never()), agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: dir, block: true}.register)
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	child := childOf(t, env, sid)
	evs := env.WaitIdle(sid)
	ar := lastResult(t, evs)
	if ar.Error == nil || ar.Error.Code != protocol.CodeDeadlineExceeded || !strings.Contains(ar.Error.Message, "3s") {
		t.Fatalf("action.result %+v", ar)
	}
	if r := env.Reply(sid); r != "provisioned  ()"+protocol.CodeDeadlineExceeded {
		t.Errorf("reply %q", r)
	}
	childStatus(t, env, child, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT)
}

// The same workflow tool outside a session, through the tools API: the
// catalog lists it as async in every format, and `run` starts it as the
// execution's child and returns its result.
func TestWorkflowToolRun(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	a := provisionAgent(time.Hour, approval.Never())
	env.StartWorkerAnd(a, agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: dir}.register)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []catalog.Format{catalog.FormatCanonical, catalog.FormatAnthropic, catalog.FormatOpenAI, catalog.FormatAISDK, catalog.FormatMCP} {
		res, err := svc.Get(catalog.GetToolsOptions{Format: f, IncludeAsync: f == catalog.FormatMCP})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var async []string
		for _, d := range res.Raw {
			if d.Annotations.Async {
				async = append(async, d.Name)
			}
		}
		if diff := cmp.Diff([]string{"provisioner.provision"}, async); diff != "" {
			t.Errorf("%s: async tools (-want +got):\n%s", f, diff)
		}
	}
	ctx := env.Ctx(60 * time.Second)
	ex, err := svc.RunResult(ctx, "provisioner.provision", json.RawMessage(`{"name":"cache"}`), toolsapi.RunOptions{})
	if err != nil || ex.Status != catalog.StatusSucceeded {
		t.Fatalf("run: %+v, %v", ex, err)
	}
	if got := string(ex.Output); got != `{"id":"res-cache","status":"ready"}` {
		t.Errorf("output %s", got)
	}
	d, err := env.Client.DescribeWorkflowExecution(ctx, signals.WorkflowToolID(ex.ID, signals.ExecutionCallID), "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("the execution's child: %v, %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
}

// The workflow tool through `eve mcp`: it is a task tool (taskSupport
// required, as async tools are), a tools/call with a task starts an
// execution backed by the app's workflow, tasks/get returns its result,
// and tasks/cancel cancels the workflow.
func TestWorkflowToolMCPTask(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	a := provisionAgent(time.Hour, approval.Never())
	env.StartWorkerAnd(a, agent.Host{}, worker.Options{}, provisionApp{worker: "w", markers: dir}.register)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "mcp_user"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	call := func(name string) string {
		t.Helper()
		st, created, rerr := modernCall(t, hs.URL, "tools/call", "provisioner.provision", map[string]any{"name": "provisioner.provision", "arguments": map[string]any{"name": name}})
		if st != 200 || rerr != nil || created["resultType"] != "task" {
			t.Fatalf("create: %d %v %v", st, created, rerr)
		}
		return created["taskId"].(string)
	}
	id := call("web")
	if res, err := svc.Wait(env.Ctx(30*time.Second), id, 0); err != nil || res.Status != catalog.StatusSucceeded {
		t.Fatalf("wait: %+v %v", res, err)
	}
	_, got, rerr := modernCall(t, hs.URL, "tasks/get", id, map[string]any{"taskId": id})
	if rerr != nil || got["status"] != mcpserver.TaskCompleted {
		t.Fatalf("tasks/get: %v %v", got, rerr)
	}
	if sc, _ := got["result"].(map[string]any)["structuredContent"].(map[string]any); sc["id"] != "res-web" || sc["status"] != "ready" {
		t.Errorf("result %v", got["result"])
	}

	// A task whose workflow blocks, cancelled.
	env2 := evetest.New(t)
	env2.StartWorkerAnd(a, agent.Host{}, worker.Options{}, provisionApp{worker: "b", markers: dir, block: true}.register)
	svc2, err := toolsapi.New(toolsapi.Options{Client: env2.Client, TaskQueue: env2.TaskQueue, Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := mcpserver.New(mcpserver.Options{Tools: svc2, UserID: "mcp_user"})
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = s2.HTTPHandler(nil)
	id = call("slow")
	waitMarker(t, dir, "b-reserve-1")
	if st, ack, rerr := modernCall(t, hs.URL, "tasks/cancel", id, map[string]any{"taskId": id}); st != 200 || rerr != nil {
		t.Fatalf("tasks/cancel: %d %v %v", st, ack, rerr)
	}
	if res, err := svc2.Wait(env2.Ctx(30*time.Second), id, 0); err != nil || res.Status != catalog.StatusCanceled {
		t.Fatalf("wait: %+v %v", res, err)
	}
	childStatus(t, env2, signals.WorkflowToolID(id, signals.ExecutionCallID), enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED)
}

// The demo agent's provision tool: "provision <name>" runs the demo's
// provision workflow (two activities, registered on the agent's worker by
// Agent.RegisterWorker) and the reply quotes its result.
func TestDemoProvision(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	evs := env.WaitIdle(res.SessionID)
	if r := env.Reply(res.SessionID); r != "Provisioned res-db at https://res-db.demo.internal (ready)" {
		t.Fatalf("reply %q: %s", r, evetest.Join(evs))
	}
}

// askingProvision asks the call's person which size before it provisions
// (package tools/wfcall).
func askingProvision(ctx workflow.Context, in provisionInput) (provisionResult, error) {
	ans, err := wfcall.Ask(ctx, "size", wfcall.Question{Prompt: "Which size for " + in.Name + "?",
		Options: []protocol.InputOption{{ID: "s", Label: "Small"}, {ID: "l", Label: "Large"}}})
	if err != nil {
		return provisionResult{}, err
	}
	return provisionResult{ID: "res-" + in.Name + "-" + ans.OptionID, Status: ans.Outcome}, nil
}

// askingAgent is provisionAgent whose workflow asks (askingProvision).
func askingProvisionAgent() *agent.Agent {
	a := provisionAgent(time.Hour, approval.Never())
	tool, _ := a.Tools.Get("provision")
	tool.Workflow.Type = "E2EProvisionAsk"
	a.RegisterWorker = func(w worker.Registry) {
		w.RegisterWorkflowWithOptions(askingProvision, workflow.RegisterOptions{Name: "E2EProvisionAsk"})
	}
	return a
}

// A workflow tool's child asks the session's person (tools/wfcall): the
// turn records input.requested and parks; the answer, given through the
// usual respond route, reaches the child, whose result reaches the model.
func TestWorkflowToolAsks(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(askingProvisionAgent())
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "provision db"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	req := waitAskedQuestion(t, env, sid)
	if !strings.HasPrefix(req.RequestID, "ask_") || !strings.HasSuffix(req.RequestID, "_size") || req.Prompt != "Which size for db?" || req.Action.ToolName != "provision" {
		t.Fatalf("question %+v", req)
	}
	if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: req.RequestID, OptionID: "l"}}, Responder: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	evs := env.WaitIdle(sid)
	if r := env.Reply(sid); r != "provisioned res-db-l (answered)" {
		t.Fatalf("reply %q: %s", r, evetest.Join(evs))
	}
}

// waitAskedQuestion waits for the session's first question and returns it.
func waitAskedQuestion(t *testing.T, env *evetest.Env, sid string) protocol.InputRequest {
	t.Helper()
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
	return req
}
