package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// settledByTask is a stream's task.settled as "status output" by task id,
// each settlement of a task appended.
func settledByTask(t *testing.T, evs []protocol.Event) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, e := range evetest.Of(evs, protocol.TaskSettled) {
		var d protocol.TaskSettledData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		var s string
		if json.Unmarshal(d.Output, &s) != nil {
			s = string(d.Output)
		}
		out[d.TaskID] = append(out[d.TaskID], d.Status+" "+s)
	}
	return out
}

// fanAgent delegates to three researchers (the demo's, with the
// approval-gated fetch_paper) in one step, and continues one by taskId.
// The scripted model numbers call ids by the conversation's length, so
// every fresh child asks for apr_<tag>_call_1_0: only the tag of its
// session (changeSubagentRequestIDs) tells them apart on the root.
func fanAgent(t *testing.T) *agent.Agent {
	t.Helper()
	researcher, err := demo.Researcher()
	if err != nil {
		t.Fatal(err)
	}
	m, err := scripted.Parse([]byte(`
name: fan
rules:
  - match: '^fan (?P<a>\w+) (?P<b>\w+) (?P<c>\w+)$'
    steps:
      - calls:
          - {tool: researcher, input: {message: "fetch {{a}}"}}
          - {tool: researcher, input: {message: "fetch {{b}}"}}
          - {tool: researcher, input: {message: "fetch {{c}}"}}
      # Held while the tasks work; each result resumes the turn.
      - reply: "The researchers are done."
  - match: '^tell (?P<id>researcher-\w+) (?P<message>.+)$'
    steps:
      - calls: [{tool: researcher, input: {taskId: "{{id}}", message: "{{message}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "The researcher says: {{task.researcher}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Name: "fan", Model: m, Tools: tools.NewRegistry(), LocalModel: true, Subagents: []*agent.Agent{researcher}}
}

// Three children at once (issue 38): one root step delegates to three
// researchers, each of whose turns waits on a person (its fetch_paper
// approval, proxied to the root) at the same time. One task is cancelled,
// the other two approved: every call settles once, each tool runs once or
// (cancelled) not at all. Later turns continue an answered child and the
// cancelled one by taskId: the same child sessions, no new ones.
func TestSubagentsThreeAtOnce(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(fanAgent(t))
	ctx := env.Ctx(3 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "fan tides winds waves", Caller: alice})

	// All three working at once: three proxied requests open on the root,
	// nothing settled yet.
	evs := waitWithin(t, env, id, time.Minute, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 3 })
	if n := len(evetest.Of(evs, protocol.TaskSettled)); n != 0 {
		t.Fatalf("%d task.settled while the three wait on a person: %s", n, evetest.Join(evs))
	}
	topics := map[string]string{}   // task id → topic
	requests := map[string]string{} // topic → proxied request id
	children := map[string]string{} // topic → child session
	calls := map[string]string{}    // call id → task id
	for _, e := range evetest.Of(evs, protocol.TaskStarted) {
		var d protocol.TaskStartedData
		_ = e.Decode(&d)
		calls[d.CallID] = d.TaskID
	}
	if len(calls) != 3 {
		t.Fatalf("%d tasks started, want 3: %s", len(calls), evetest.Join(evs))
	}
	for _, e := range evetest.Of(evs, protocol.InputRequested) {
		var d protocol.InputRequestedData
		_ = e.Decode(&d)
		if len(d.Requests) != 1 || calls[d.CallID] == "" {
			t.Fatalf("proxied input.requested %+v", d)
		}
		var in demo.SourcesInput
		_ = json.Unmarshal(d.Requests[0].Action.Input, &in)
		topics[calls[d.CallID]] = in.Topic
		requests[in.Topic] = d.Requests[0].RequestID
		children[in.Topic] = signals.SubagentSessionID(id, calls[d.CallID])
		// Each child's id has its session's tag (docs/subagents.md).
		if want := "apr_" + requestTag(children[in.Topic]) + "_" + d.Requests[0].Action.CallID; d.Requests[0].RequestID != want {
			t.Errorf("%s: request id %q, want %q", in.Topic, d.Requests[0].RequestID, want)
		}
	}
	if len(requests) != 3 {
		t.Fatalf("proxied requests by topic %v, want tides, winds and waves", requests)
	}
	taskOf := map[string]string{}
	for task, topic := range topics {
		taskOf[topic] = task
	}
	// Each child's own turn is open on its request.
	for topic, child := range children {
		cevs := waitFor(t, env, child, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 1 })
		if got := typesOf(cevs, protocol.TurnStarted, protocol.TurnCompleted, protocol.TurnCancelled); !cmp.Equal(got, []string{protocol.TurnStarted}) {
			t.Errorf("%s: child turns %v while it waits", topic, got)
		}
	}

	// waves is cancelled; tides and winds are approved in one answer.
	if _, err := env.Sessions.CancelTask(ctx, id, nil, signals.TaskCancelRequest{TaskID: taskOf["waves"], Caller: alice}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, env, id, func(evs []protocol.Event) bool { return len(settledByTask(t, evs)[taskOf["waves"]]) > 0 })
	if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responder: alice, Responses: []protocol.InputResponse{
		{RequestID: requests["tides"], OptionID: "approve"}, {RequestID: requests["winds"], OptionID: "approve"}}}); err != nil {
		t.Fatal(err)
	}
	evs = waitWithin(t, env, id, time.Minute, idle(1))
	want := map[string][]string{
		taskOf["tides"]: {"completed Fetched: the paper on tides (12 pages)"},
		taskOf["winds"]: {"completed Fetched: the paper on winds (12 pages)"},
		taskOf["waves"]: {"cancelled "},
	}
	if diff := cmp.Diff(want, settledByTask(t, evs)); diff != "" {
		t.Errorf("each call settled once (-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
	var got []string
	for _, r := range resolutions(evs) {
		got = append(got, r.RequestID+" "+r.Outcome)
	}
	sort.Strings(got)
	wantRes := []string{requests["tides"] + " " + protocol.OutcomeApproved, requests["winds"] + " " + protocol.OutcomeApproved, requests["waves"] + " " + protocol.OutcomeCancelled}
	sort.Strings(wantRes)
	if diff := cmp.Diff(wantRes, got); diff != "" {
		t.Errorf("root: each proxied request resolved once (-want +got):\n%s", diff)
	}
	if got := lastReply(t, evs); got != "The researchers are done." {
		t.Errorf("root reply %q", got)
	}
	if n := len(evetest.Of(evs, protocol.AgentStarted)); n != 3 {
		t.Errorf("%d agent.started, want 3", n)
	}
	for topic, wantTurns := range map[string][]string{
		"tides": {protocol.TurnStarted, protocol.TurnCompleted},
		"winds": {protocol.TurnStarted, protocol.TurnCompleted},
		"waves": {protocol.TurnStarted, protocol.TurnCancelled},
	} {
		cevs := waitFor(t, env, children[topic], idle(1))
		if got := typesOf(cevs, protocol.TurnStarted, protocol.TurnCompleted, protocol.TurnCancelled); !cmp.Equal(got, wantTurns) {
			t.Errorf("%s: child turns %v, want %v", topic, got, wantTurns)
		}
		runs := 0
		for _, r := range stubResults(t, cevs, "fetch_paper") {
			if r.Status == protocol.StatusCompleted {
				runs++
			}
		}
		if wantRuns := map[bool]int{true: 1, false: 0}[topic != "waves"]; runs != wantRuns {
			t.Errorf("%s: fetch_paper ran %d times, want %d", topic, runs, wantRuns)
		}
	}

	// A later turn continues tides by taskId; another the cancelled waves.
	for i, topic := range []string{"tides", "waves"} {
		send(t, env, id, signals.SendRequest{Message: "tell " + taskOf[topic] + " dig deeper", Caller: alice})
		evs = waitWithin(t, env, id, time.Minute, idle(2+i))
		if got := lastReply(t, evs); got != "The researcher says: On dig deeper: 2 more sources, both recent." {
			t.Errorf("%s continued: reply %q", topic, got)
		}
		cevs := waitFor(t, env, children[topic], idle(2))
		if n, m := len(evetest.Of(cevs, protocol.SessionStarted)), len(evetest.Of(cevs, protocol.TurnStarted)); n != 1 || m != 2 {
			t.Errorf("%s: %d session.started and %d turns, want 1 and 2", topic, n, m)
		}
		if got := lastReply(t, cevs); got != "On dig deeper: 2 more sources, both recent." {
			t.Errorf("%s: child reply %q", topic, got)
		}
	}
	if n := len(evetest.Of(evs, protocol.AgentStarted)); n != 3 {
		t.Errorf("%d agent.started after the continuations, want 3 (no new child)", n)
	}
	if n := len(evetest.Of(env.Events(ctx, children["winds"]), protocol.TurnStarted)); n != 1 {
		t.Errorf("winds ran %d turns, want 1", n)
	}
}

const subKillRootRules = `
name: subroot
rules:
  - match: '^split (?P<topic>\w+)$'
    steps:
      - calls:
          - {tool: helper, input: {message: "fetch {{topic}}"}}
          - {tool: helper, input: {message: "crunch {{topic}}"}}
      - reply: "The helpers are done."
`

const subKillHelperRules = `
name: helper
rules:
  - match: '(?m)^Caller message:\s*fetch (?P<topic>\w+)$'
    steps:
      - calls: [{tool: fetch_paper, input: {topic: "{{topic}}"}}]
      - reply: "fetched {{result.fetch_paper}}"
  - match: '(?m)^Caller message:\s*crunch (?P<topic>\w+)$'
    steps:
      - calls: [{tool: tally, input: {topic: "{{topic}}"}}]
      - calls: [{tool: slow}]
      - reply: "crunched {{result.tally}} by {{result.slow.worker}}{{result.slow.error}}"
`

// markerTool is a fast tool that leaves a file of its own in markerDir
// each time it runs: the durable count of its executions.
func markerTool(name, markerDir string, gate approval.Policy) *tools.Tool {
	t := tools.Func(name, "Leaves a marker.", func(_ *tools.Context, in demo.SourcesInput) (string, error) {
		f, err := os.CreateTemp(markerDir, name+"-ran-*")
		if err != nil {
			return "", fmt.Errorf("marker: %w", err)
		}
		f.Close()
		return name + " " + in.Topic, nil
	})
	t.Approval = gate
	return t
}

// subKillAgent is a root that delegates, in one step, to two helpers: one
// asks a person to approve fetch_paper, the other runs tally and then
// slow (which blocks in the worker named "doomed", see slowTool).
func subKillAgent(workerName, markerDir string, idempotent bool) *agent.Agent {
	root, err := scripted.Parse([]byte(subKillRootRules))
	if err != nil {
		panic(err)
	}
	helper, err := scripted.Parse([]byte(subKillHelperRules))
	if err != nil {
		panic(err)
	}
	slow := slowTool(workerName, markerDir)
	slow.Idempotent = idempotent
	reg := tools.NewRegistry()
	reg.MustRegister(markerTool("fetch_paper", markerDir, approval.Always()), markerTool("tally", markerDir, approval.Never()), slow)
	return &agent.Agent{Name: "subroot", Model: root, Tools: tools.NewRegistry(), LocalModel: true,
		Subagents: []*agent.Agent{{Name: "helper", Description: "Fetches or crunches.", Model: helper, Tools: reg, LocalModel: true}}}
}

// A worker SIGKILLed while one child waits on a person and another runs a
// tool (issue 38): the worker process serves the root and the helpers;
// when the fetch child's approval is proxied to the root and the crunch
// child's slow tool runs, it is killed. A new worker takes over, the
// person approves through the root: every child settles once, each child
// ran one turn and replied once, and no tool ran twice (marker files):
// fetch_paper and tally once each; slow's attempt lost with the worker is
// retried once when the tool is idempotent and completes on the new
// worker, and is not retried when it is not (the call fails, the child
// still answers once). Recording (EVE_RECORD_HISTORIES=1
// EVE_RECORD_PREFIX=v0.5.0-) saves the idempotent run's root session and
// calling turn, and the children's (v0.5.0-*-subagent-killed*.json).
func TestSubagentsWorkerKilled(t *testing.T) {
	for _, tc := range []struct {
		name       string
		idempotent bool
		slowRuns   []string // slow's start markers
		crunched   string   // the crunch child's reply, a prefix
	}{
		{name: "idempotent", idempotent: true, slowRuns: []string{"doomed-1", "survivor-2"}, crunched: `crunched tally kiln by survivor`},
		{name: "not idempotent", idempotent: false, slowRuns: []string{"doomed-1"}, crunched: `crunched tally kiln by `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := evetest.New(t)
			markers := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
				"EVE_E2E_WORKER_MARKERS="+markers, "EVE_E2E_WORKER_AGENT=subagents", fmt.Sprintf("EVE_E2E_WORKER_IDEMPOTENT=%t", tc.idempotent),
				env.Server.PayloadStoreEnv())
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

			ctx := env.Ctx(3 * time.Minute)
			id, err := env.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			send(t, env, id, signals.SendRequest{Message: "split kiln", Caller: alice})
			evs := waitWithin(t, env, id, time.Minute, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 1 })
			deadline := time.Now().Add(time.Minute)
			for {
				if _, err := os.Stat(filepath.Join(markers, "doomed-1")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("slow never started in the doomed worker")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if n := len(evetest.Of(evs, protocol.TaskSettled)); n != 0 {
				t.Fatalf("%d task.settled before the kill", n)
			}
			env.StartWorker(subKillAgent("survivor", markers, tc.idempotent))

			var req protocol.InputRequestedData
			_ = evetest.Of(evs, protocol.InputRequested)[0].Decode(&req)
			if _, err := env.Sessions.Respond(ctx, id, signals.RespondRequest{Responder: alice, Responses: []protocol.InputResponse{{RequestID: req.Requests[0].RequestID, OptionID: "approve"}}}); err != nil {
				t.Fatal(err)
			}
			evs = waitWithin(t, env, id, 2*time.Minute, idle(1))
			if got := lastReply(t, evs); got != "The helpers are done." {
				t.Errorf("root reply %q", got)
			}

			// Every child settles once.
			settled := settledByTask(t, evs)
			if len(settled) != 2 {
				t.Fatalf("settled tasks %v, want 2: %s", settled, evetest.Join(evs))
			}
			var fetched, crunched []string
			var fetchChild, crunchChild string
			for task, outs := range settled {
				child := signals.SubagentSessionID(id, task)
				cevs := waitWithin(t, env, child, time.Minute, idle(1))
				if got := typesOf(cevs, protocol.SessionStarted, protocol.TurnStarted, protocol.TurnCompleted, protocol.TurnFailed, protocol.TurnCancelled); !cmp.Equal(got, []string{protocol.SessionStarted, protocol.TurnStarted, protocol.TurnCompleted}) {
					t.Errorf("child %s: %v, want one turn, completed", task, got)
				}
				if sent, _ := signalsSent(t, env, child, signals.SignalAgentReply); sent != 1 {
					t.Errorf("child %s replied %d times, want 1", task, sent)
				}
				if len(stubResults(t, cevs, "fetch_paper")) > 0 {
					fetched, fetchChild = append(fetched, outs...), child
				} else {
					crunched, crunchChild = append(crunched, outs...), child
				}
				for _, tool := range []string{"fetch_paper", "tally", "slow"} {
					if n := len(stubResults(t, cevs, tool)); n > 1 {
						t.Errorf("child %s: %d results of %s, want at most 1", task, n, tool)
					}
				}
			}
			if diff := cmp.Diff([]string{"completed fetched fetch_paper kiln"}, fetched); diff != "" {
				t.Errorf("the fetch child's settlement (-want +got):\n%s", diff)
			}
			if len(crunched) != 1 || !strings.HasPrefix(crunched[0], "completed "+tc.crunched) {
				t.Errorf("the crunch child's settlement %q, want one starting %q", crunched, "completed "+tc.crunched)
			}
			if tc.idempotent && crunched[0] != "completed "+tc.crunched {
				t.Errorf("the crunch child's settlement %q", crunched[0])
			}

			// No tool ran twice: one marker per execution.
			var runs []string
			for _, pat := range []string{"fetch_paper-ran-*", "tally-ran-*", "doomed-*", "survivor-*"} {
				m, _ := filepath.Glob(filepath.Join(markers, pat))
				for _, f := range m {
					name := filepath.Base(f)
					if i := strings.Index(name, "-ran-"); i >= 0 {
						name = name[:i]
					}
					runs = append(runs, name)
				}
			}
			wantRuns := append([]string{"fetch_paper", "tally"}, tc.slowRuns...)
			if diff := cmp.Diff(wantRuns, runs); diff != "" {
				t.Errorf("tool executions (-want +got):\n%s", diff)
			}
			if tc.idempotent && !t.Failed() {
				// Recording (EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0-):
				// the root session and its calling turn, the child that waited
				// on a person across the kill (session and turn), and the
				// child whose slow call was lost with the worker.
				saveTaskHistory(t, env, id, "session-subagent-killed")
				saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-killed")
				saveTaskHistory(t, env, fetchChild, "session-subagent-killed-child")
				saveTaskHistory(t, env, fetchChild+"/turn_0", "turn-subagent-killed-child")
				saveTaskHistory(t, env, crunchChild+"/turn_0", "turn-subagent-killed-crunch")
			}
		})
	}
}
