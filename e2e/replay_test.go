package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/workflows"
)

// Saved workflow histories guard running sessions against incompatible
// workflow changes: every file in testdata/histories must replay with the
// current code. The corpus starts at 0.2.0, the first supported baseline
// (prefix "v0.2.0-"; the unreleased generations before it were collapsed
// and their histories dropped). Histories of released code are never
// re-recorded; a change behind workflow.GetVersion adds histories of its
// new paths, under a new prefix (EVE_RECORD_PREFIX), with:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.3.0- go test ./e2e -run TestRecordHistories
//
// It records every scenario; keep the files of new paths and delete those
// that repeat a scenario already saved for the same code.
const historyDir = "testdata/histories"

func historyFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historyDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no saved histories in %s: record them (see the comment above)", historyDir)
	}
	sort.Strings(files)
	return files
}

// Every saved history replays against the current code, through the
// helper an app's deploy gate uses (workflows.Replay, eve replay). That a
// non-deterministic change fails is proven beside the workflow code
// (workflows/replay_test.go) and the command (internal/cli).
func TestReplaySavedHistories(t *testing.T) {
	for _, f := range historyFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var opts worker.WorkflowReplayerOptions
			if strings.Contains(filepath.Base(f), "raced") {
				// "raced" histories were recorded on a worker that holds a
				// turn's workflow task (exactly_once_test.go): they replay
				// with its interceptor, whose holds are recorded as local
				// activities.
				opts.Interceptors = []interceptor.WorkerInterceptor{&holdInterceptor{h: &holds{}}}
			}
			if err := workflows.Replay(opts, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRecordHistories runs representative sessions on a real dev server and
// saves their histories. It only records when EVE_RECORD_HISTORIES=1.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to re-record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	// Small enough that a 10 KB message compacts the conversation, and a
	// session continues as new after two turns.
	a.ContextWindow = 3000
	a.ContinueAsNewAfterTurns = 2
	env.StartWorker(a)
	ctx := env.Ctx(60 * time.Second)
	if err := os.MkdirAll(historyDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// Tools, two turns.
	res, err := env.Sessions.CreateAndSend(ctx, "ses_history_tools", alice, signals.SendRequest{Message: "compare Paris and Oslo", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	env.SendAndWait(ctx, res.SessionID, "what's the weather in Rome")
	// A third turn in the next run, compacted before its model step.
	env.SendAndWait(ctx, res.SessionID, "what's the weather in Lima? "+strings.Repeat("It rains a lot there. ", 500))
	// Approval, approved; a client tool answered.
	id, d := startParked(t, env, "refund ch_1 10")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.SendAndWait(ctx, id, "choose a plan")
	// /compact between turns.
	if _, err := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCompact}); err != nil {
		t.Fatal(err)
	}
	sum, _ := env.Sessions.Summary(ctx, id)
	_ = sum
	evs := env.Events(ctx, id)
	var req protocol.InputRequestedData
	rq := evetest.Of(evs, protocol.InputRequested)
	rq[len(rq)-1].Decode(&req)
	respond(t, env, id, protocol.InputResponse{RequestID: req.Requests[0].RequestID, OptionID: "pro"})
	// A cancelled turn.
	id2, _ := startParked(t, env, "refund ch_2 20")
	env.Sessions.Control(ctx, id2, signals.ControlRequest{Op: signals.ControlCancel})
	waitFor(t, env, id2, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	// Messages as in eve 0.80.1: another
	// person's message waits for the turn, one of the person the turn serves
	// answers the approval; in another session a message steers (the
	// approval is withdrawn, the model reads it in the same turn).
	id3, _ := startParked(t, env, "refund ch_3 30")
	if _, err := env.Sessions.Send(ctx, id3, signals.SendRequest{Message: "hello", Caller: &auth.Principal{ID: "bob", Type: "user"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Sessions.Send(ctx, id3, signals.SendRequest{Message: "approve"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id3, idle(2))
	id4, _ := startParked(t, env, "refund ch_4 40")
	if _, err := env.Sessions.Send(ctx, id4, signals.SendRequest{Message: "what's the weather in Oslo"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id4, idle(1))

	save := func(name, wid string) {
		f := filepath.Join(historyDir, prefix+name+".json")
		if err := writeHistory(ctx, env.Client, wid, "", f); err != nil {
			t.Fatal(err)
		}
	}
	// The first run of a session that continued as new.
	saveFirstRun := func(name, wid string) {
		desc, err := env.Client.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			t.Fatal(err)
		}
		first := desc.WorkflowExecutionInfo.GetFirstRunId()
		for i := 0; i < 100 && first == desc.WorkflowExecutionInfo.Execution.RunId; i++ {
			// An idle session continues as new a moment after its turn.
			time.Sleep(100 * time.Millisecond)
			if desc, err = env.Client.DescribeWorkflowExecution(ctx, wid, ""); err != nil {
				t.Fatal(err)
			}
		}
		if first == desc.WorkflowExecutionInfo.Execution.RunId {
			t.Fatalf("session %s did not continue as new", wid)
		}
		if err := writeHistory(ctx, env.Client, wid, first, filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	saveFirstRun("session-tools-run1", res.SessionID)
	saveFirstRun("session-hitl-compact-run1", id)
	save("session-tools", res.SessionID)
	save("turn-tools", res.SessionID+"/turn_0")
	save("turn-compacted", res.SessionID+"/turn_2")
	save("turn-approval", id+"/turn_0")
	save("turn-client-tool", id+"/turn_1")
	save("turn-cancelled", id2+"/turn_0")
	saveFirstRun("session-message-answers-run1", id3)
	save("turn-message-answers", id3+"/turn_0")
	save("session-steered", id4)
	save("turn-steered", id4+"/turn_0")

	// Response policies (0.3): a four-eyes transfer, the requester's own
	// approval refused and an approver's allowed; in another session both
	// answers typed, the approver's offered to the turn by the session.
	id6, d6 := startParked(t, env, "transfer 25 to bob")
	fourEyes := protocol.InputResponse{RequestID: d6.Requests[0].RequestID, OptionID: "approve"}
	for _, who := range []*auth.Principal{alice, carol} {
		if _, err := env.Sessions.Respond(ctx, id6, signals.RespondRequest{Responses: []protocol.InputResponse{fourEyes}, Responder: who, Wait: true}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, env, id6, idle(1))
	save("turn-four-eyes", id6+"/turn_0")
	id7, _ := startParked(t, env, "transfer 30 to dan")
	if _, err := env.Sessions.Send(ctx, id7, signals.SendRequest{Message: "approve", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id7, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.ApprovalCandidate)) == 2 })
	if _, err := env.Sessions.Send(ctx, id7, signals.SendRequest{Message: "approve", Caller: carol}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id7, idle(1))
	save("session-four-eyes-typed", id7)
	save("turn-four-eyes-typed", id7+"/turn_0")

	// approval.Auto (0.3): a clear call runs; a caution asks, then approved.
	autoEnv := evetest.New(t)
	var autoRuns atomic.Int32
	autoEnv.StartWorker(autoAgent(t, &autoRuns))
	ares, err := autoEnv.Sessions.CreateAndSend(ctx, "ses_history_auto", alice, signals.SendRequest{Message: "count 1", Wait: true})
	if err != nil || ares.Outcome == nil || ares.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("auto clear: %+v, %v", ares.Outcome, err)
	}
	aid, ad := startParked(t, autoEnv, "count 2")
	respond(t, autoEnv, aid, protocol.InputResponse{RequestID: ad.Requests[0].RequestID, OptionID: "approve"})
	saveOn := func(c client.Client, name, wid string) {
		if err := writeHistory(ctx, c, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	saveOn(autoEnv.Client, "turn-auto-clear", ares.SessionID+"/turn_0")
	saveOn(autoEnv.Client, "turn-auto-caution", aid+"/turn_0")

	// A call that asks its person (0.4): answered, then cancelled while
	// it asks.
	askEnv := evetest.New(t)
	askEnv.StartWorker(askingAgent(t))
	ask, err := askEnv.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	q := waitAsked(t, askEnv, ask.SessionID)
	respond(t, askEnv, ask.SessionID, protocol.InputResponse{RequestID: q.RequestID, Text: "Ada"})
	askEnv.WaitIdle(ask.SessionID)
	if _, err := askEnv.Sessions.Send(ctx, ask.SessionID, signals.SendRequest{Message: "greet"}); err != nil {
		t.Fatal(err)
	}
	waitAsked(t, askEnv, ask.SessionID)
	askEnv.Sessions.Control(ctx, ask.SessionID, signals.ControlRequest{Op: signals.ControlCancel})
	waitFor(t, askEnv, ask.SessionID, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	saveOn(askEnv.Client, "turn-ask-answered", ask.SessionID+"/turn_0")
	saveOn(askEnv.Client, "turn-ask-cancelled", ask.SessionID+"/turn_1")

	// The inbox (0.3): a turn with search attributes publishes its open
	// request (memo and attributes) and clears them once it is answered.
	ienv := evetest.New(t)
	if err := visibility.Register(ctx, ienv.Client, "default"); err != nil {
		t.Fatal(err)
	}
	ia, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	ienv.StartWorkerHost(ia, agent.Host{SearchAttributes: true, InboxAttributes: true})
	iid, id8 := startParked(t, ienv, "refund ch_8 8")
	respond(t, ienv, iid, protocol.InputResponse{RequestID: id8.Requests[0].RequestID, OptionID: "approve"})
	saveOn(ienv.Client, "turn-inbox", iid+"/turn_0")

	// Input deadlines (0.3): one answered before its deadline (the timer
	// cancelled), one expired (the model reads that nobody answered).
	for _, c := range []struct {
		name     string
		deadline time.Duration
	}{{"turn-deadline-answered", time.Hour}, {"turn-deadline-expired", time.Second}} {
		denv := evetest.New(t)
		da, err := demo.Agent()
		if err != nil {
			t.Fatal(err)
		}
		da.InputDeadline = c.deadline
		denv.StartWorker(da)
		did, dd := startParked(t, denv, "refund ch_9 9")
		if c.deadline == time.Hour {
			respond(t, denv, did, protocol.InputResponse{RequestID: dd.Requests[0].RequestID, OptionID: "approve"})
		}
		denv.WaitIdle(did)
		saveOn(denv.Client, c.name, did+"/turn_0")
	}

	// Approve with edits (0.4): an edit the tenant policy denies is
	// refused, then an edited amount is approved and runs.
	acme := &auth.Principal{ID: "alice", Type: auth.TypeUser, Attributes: map[string]string{"tenantId": "acme"}}
	eres, err := env.Sessions.CreateAndSend(ctx, "ses_history_edit", acme, signals.SendRequest{Message: "credit acme 1500", Wait: true})
	if err != nil || eres.Outcome == nil || eres.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("edit: %+v, %v", eres.Outcome, err)
	}
	erq := lastRequest(t, env.Events(ctx, eres.SessionID)).RequestID
	for _, in := range []string{`{"tenantId":"globex","amount":1500}`, `{"tenantId":"acme","amount":1200}`} {
		if _, err := env.Sessions.Respond(ctx, eres.SessionID, signals.RespondRequest{Responder: acme, Wait: true,
			Responses: []protocol.InputResponse{{RequestID: erq, OptionID: "approve", Input: json.RawMessage(in)}}}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitIdle(eres.SessionID)
	save("turn-approval-edited", eres.SessionID+"/turn_0")

	// Tool stubs (0.5): one call settled by a stub (a recorded SideEffect),
	// one that no rule matches runs the real tool.
	stubs := []protocol.ToolStub{{ID: "paris", Tool: "get_weather", Match: map[string]json.RawMessage{"city": json.RawMessage(`{"const":"Paris"}`)},
		Outcome: &protocol.ToolStubOutcome{Response: json.RawMessage(`{"city":"Paris","condition":"stubbed","temperatureC":1}`)}}}
	sres, err := env.Sessions.CreateAndSendStubbed(ctx, "ses_history_stubs", alice, "", stubs, signals.SendRequest{Message: "compare Paris and Oslo", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitIdle(sres.SessionID)
	save("turn-stubs", sres.SessionID+"/turn_0")

	// Session limits (0.3): Continue, then Stop; and a lifetime that ends
	// the session.
	lenv := limitedEnv(t, func(a *agent.Agent) { a.MaxInputTokensPerSession = 1; a.SessionLifetime = 3 * time.Second })
	lres, err := lenv.Sessions.CreateAndSend(ctx, "ses_history_limits", alice, signals.SendRequest{Message: "what's the weather in Paris", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	respond(t, lenv, lres.SessionID, protocol.InputResponse{RequestID: lastRequest(t, lenv.Events(ctx, lres.SessionID)).RequestID, OptionID: "continue"})
	if _, err := lenv.Sessions.Send(ctx, lres.SessionID, signals.SendRequest{Message: "what's the weather in Oslo", Caller: alice, Wait: true}); err != nil {
		t.Fatal(err)
	}
	respond(t, lenv, lres.SessionID, protocol.InputResponse{RequestID: lastRequest(t, lenv.Events(ctx, lres.SessionID)).RequestID, OptionID: "stop"})
	if err := lenv.Client.GetWorkflow(ctx, lres.SessionID, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	saveOn(lenv.Client, "session-limits-lifetime", lres.SessionID)
	saveOn(lenv.Client, "turn-limit-continue", lres.SessionID+"/turn_0")
	saveOn(lenv.Client, "turn-limit-stop", lres.SessionID+"/turn_1")

	// A turn terminated by an operator while parked: the session reads its
	// events (eve.TurnEvents) and records turn.failed after them.
	id5, _ := startParked(t, env, "refund ch_5 50")
	if err := env.Client.TerminateWorkflow(ctx, id5+"/turn_0", "", "operator"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id5, func(evs []protocol.Event) bool { return evs[len(evs)-1].Type == protocol.SessionWaiting })
	save("session-turn-terminated", id5)

	// A message that raced the turn's final workflow task: the task failed
	// (unhandled command) and its retry took the message.
	re := newRaceEnv(t)
	rid, err := re.Sessions.Create(ctx, "ses_history_raced", alice)
	if err != nil {
		t.Fatal(err)
	}
	h := re.holds.arm(holdKey{signals.TurnWorkflowID(rid, "turn_0"), "end"})
	if _, err := re.Sessions.Send(ctx, rid, signals.SendRequest{Message: "look up k1", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	if offered, _ := re.race(t, ctx, h, rid, signals.SendRequest{Message: "look up k2", Caller: alice}); !offered {
		t.Fatal("the racing message was not offered to the turn")
	}
	re.settle(t, ctx, rid)
	if unhandledCommandFailures(t, ctx, re.Client, signals.TurnWorkflowID(rid, "turn_0")) == 0 {
		t.Fatal("the final task did not fail")
	}
	save("session-raced-end", rid)
	save("turn-raced-end", rid+"/turn_0")

	// A delegated action finished through its completion URL, and a tools
	// API execution (execute, then the same key again), on their own queue.
	denv := newDelegatedEnv(t, evetest.New(t), time.Minute, true)
	da := denv.mk()
	startExecutionWorkerHost(t, denv.Env, da, denv.host)
	dres, err := denv.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "report", Wait: true})
	if err != nil || dres.Outcome == nil || dres.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("delegated turn: %+v, %v", dres.Outcome, err)
	}
	save("turn-delegated", dres.SessionID+"/turn_0")
	svc, err := toolsapi.New(toolsapi.Options{Client: denv.Client, TaskQueue: denv.TaskQueue, Agent: da, RunTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := svc.RunResult(ctx, "test.run_report", json.RawMessage(`{"spec":"q4"}`), toolsapi.RunOptions{IdempotencyKey: "history:1"})
	if err != nil || ex.Status != catalog.StatusSucceeded {
		t.Fatalf("execution: %+v, %v", ex, err)
	}
	save("execution-delegated", ex.ID)

	// Executions that ask their caller to approve (MCP tasks,
	// input_required): approved, then denied.
	aenv := evetest.New(t)
	aa, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	startExecutionWorker(t, aenv, aa)
	asvc, err := toolsapi.New(toolsapi.Options{Client: aenv.Client, TaskQueue: aenv.TaskQueue, Agent: aa})
	if err != nil {
		t.Fatal(err)
	}
	for _, approve := range []bool{true, false} {
		res, err := asvc.StartAsking(ctx, "demo.refund_charge", "alice", json.RawMessage(`{"chargeId":"ch_9","amount":5}`))
		if err != nil {
			t.Fatal(err)
		}
		for {
			p, err := asvc.PendingApproval(ctx, res.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if p != nil {
				break
			}
		}
		if err := asvc.AnswerApproval(ctx, res.ID, "", approve, "", auth.Principal{ID: "alice", Type: auth.TypeUser}); err != nil {
			t.Fatal(err)
		}
		if _, err := asvc.Wait(ctx, res.ID, 0); err != nil {
			t.Fatal(err)
		}
		save(map[bool]string{true: "execution-approval-approved", false: "execution-approval-denied"}[approve], res.ID)
	}

	// Client input rounds (MCP multi round-trip): a round that asks the
	// client, then the round its answer starts.
	cenv := evetest.New(t)
	ca := evetest.Agent(t, `rules: []`, askNameTool(), askTwoTool())
	startExecutionWorker(t, cenv, ca)
	csvc, err := toolsapi.New(toolsapi.Options{Client: cenv.Client, TaskQueue: cenv.TaskQueue, Agent: ca})
	if err != nil {
		t.Fatal(err)
	}
	caps := json.RawMessage(`{"elicitation":{}}`)
	for i, round := range []*protocol.ClientRound{
		{Capabilities: caps},
		{Capabilities: caps, State: json.RawMessage(`{"asked":1}`), Responses: map[string]json.RawMessage{"user_name": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}},
	} {
		res, err := csvc.StartRound(ctx, "test.ask_name", "alice", json.RawMessage(`{}`), round, false)
		if err != nil {
			t.Fatal(err)
		}
		if res, err = csvc.Wait(ctx, res.ID, 0); err != nil {
			t.Fatal(err)
		}
		save([]string{"execution-client-round-asks", "execution-client-round-answered"}[i], res.ID)
	}
	// In a task: the execution waits for two answers, given one update at
	// a time, then runs the next round.
	task, err := csvc.StartRound(ctx, "test.ask_two", "alice", json.RawMessage(`{}`), &protocol.ClientRound{Capabilities: caps, Task: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "second"} {
		for {
			out, err := csvc.Pending(ctx, task.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := out.ClientInput[id]; ok {
				break
			}
		}
		if err := csvc.AnswerClientInput(ctx, task.ID, "", map[string]json.RawMessage{id: json.RawMessage(`{"action":"accept","content":{"name":"` + id + `"}}`)}, auth.Principal{ID: "alice", Type: auth.TypeUser}); err != nil {
			t.Fatal(err)
		}
	}
	if done, err := csvc.Wait(ctx, task.ID, 0); err != nil || done.Status != catalog.StatusSucceeded {
		t.Fatalf("task rounds: %+v %v", done, err)
	}
	save("execution-client-task-rounds", task.ID)
	recordFollowUps(t, prefix)
	recordAskOnce(t, prefix)
	recordOrder(t, prefix)
	recordDenied(t, prefix)
	recordSearchWrites(t, prefix)
	recordParkWrites(t, prefix)
	recordTurnVersions(t, prefix)
	recordInputVersions(t, prefix)
	recordQuietResume(t, prefix)
	recordStatusFromTurns(t, prefix)

	// Workflow tools (eve-workflow-tools), each on a queue of its own.
	recordWorkflowTools(t, prefix)
	recordFirstMessage(t, prefix)
}

// askTwoTool asks its client two questions at once, then answers both.
func askTwoTool() *tools.Tool {
	t := tools.Func("ask_two", "Asks the client two questions.", func(ctx *tools.Context, _ struct{}) (string, error) {
		var a, b struct {
			Content map[string]string `json:"content"`
		}
		if ctx.Client.Response("first", &a) && ctx.Client.Response("second", &b) {
			return a.Content["name"] + " and " + b.Content["name"], nil
		}
		q := tools.Elicit("Name?", map[string]any{"type": "object"})
		return "", tools.AskClient(map[string]protocol.ClientRequest{"first": q, "second": q}, nil)
	})
	t.ClientInput = true
	return t
}

// askNameTool asks its MCP client for a name, then greets it.
func askNameTool() *tools.Tool {
	t := tools.Func("ask_name", "Asks the client for a name.", func(ctx *tools.Context, _ struct{}) (string, error) {
		var a struct {
			Action  string            `json:"action"`
			Content map[string]string `json:"content"`
		}
		if ctx.Client.Response("user_name", &a) && a.Action == "accept" {
			return "Hello, " + a.Content["name"], nil
		}
		return "", tools.AskClient(map[string]protocol.ClientRequest{"user_name": tools.Elicit("What is your name?", map[string]any{"type": "object"})}, map[string]int{"asked": 1})
	})
	t.ClientInput = true
	return t
}

func writeHistory(ctx context.Context, c client.Client, wid, runID, path string) error {
	if runID == "" {
		d, err := c.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			return err
		}
		runID = d.WorkflowExecutionInfo.Execution.RunId
	}
	if err := os.WriteFile(path+".id", []byte(wid+" "+runID+"\n"), 0o644); err != nil {
		return err
	}
	it := c.GetWorkflowHistory(ctx, wid, runID, false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return err
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
