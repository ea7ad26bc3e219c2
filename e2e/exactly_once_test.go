package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Exactly once (docs/architecture.md): a message that races a turn's
// final workflow task, its park or its resumption runs once, answered by
// the turn that took it or by the next turn, never both; and a stream
// index never changes its event.

const raceRules = `
name: race
default: "Hello."
rules:
  - match: '^refund (?P<charge>\w+)'
    steps:
      - calls: [{tool: refund, input: {chargeId: "{{charge}}"}}]
      - reply: "refunded {{charge}}: {{result.refund.chargeId}}{{result.refund.code}}"
  - match: '^look up (?P<key>\w+)'
    steps:
      - calls: [{tool: lookup, input: {key: "{{key}}"}}]
      - reply: "found {{result.lookup.key}}"
  - match: '^(?P<id>m\d+)'
    steps:
      - calls: [{tool: lookup, input: {key: "{{id}}"}}]
      - reply: "done {{id}}"
`

// execLog records every tool execution, as a line in a file a worker
// process appends to: "<worker> <idempotency key> <tool> <input>".
type execLog struct {
	mu   sync.Mutex
	path string
}

func (l *execLog) record(worker string, ctx *tools.Context, tool string, in json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s %s\n", worker, ctx.IdempotencyKey, tool, compactJSON(in))
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type execution struct{ worker, key, tool, input string }

// executions reads every worker's log.
func executions(t *testing.T, dir string) []execution {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var out []execution
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), " ", 4)
			if len(parts) == 4 {
				out = append(out, execution{parts[0], parts[1], parts[2], parts[3]})
			}
		}
		f.Close()
	}
	return out
}

// raceAgent: lookup runs at once; refund needs an approval; a message
// "mNN …" looks itself up and replies "done mNN" (order_test.go).
func raceAgent(worker, dir string) *agent.Agent {
	m, err := scripted.Parse([]byte(raceRules))
	if err != nil {
		panic(err)
	}
	log := &execLog{path: filepath.Join(dir, worker+".log")}
	tool := func(name string, policy approval.Policy, field string) *tools.Tool {
		return &tools.Tool{
			Name: name, Description: "A test tool that records its executions.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"` + field + `":{"type":"string"}},"required":["` + field + `"]}`),
			Approval:    policy,
			// An attempt lost with a killed worker is retried after this.
			Timeout:    5 * time.Second,
			Idempotent: true,
			Execute: func(ctx *tools.Context, in json.RawMessage) (any, error) {
				log.record(worker, ctx, name, in)
				var v map[string]any
				json.Unmarshal(in, &v)
				return v, nil
			},
		}
	}
	reg := tools.NewRegistry()
	reg.MustRegister(tool("lookup", approval.Never(), "key"), tool("refund", approval.Always(), "chargeId"))
	return &agent.Agent{Name: "race", Model: m, Tools: reg, LocalModel: true}
}

// A hold stops a turn's workflow task at one point, in a local activity,
// until the test releases it: "end" (after the turn returned, before its
// completion is sent), "park" (after it told its session that it waits
// for input) or "resume" (in the task that takes the answer, after it
// scheduled the approved call's activity: a turn tells its session nothing
// then, eve-quiet-resume, so the session's view still has the approval
// open). A message sent while it holds arrives during that workflow task.
type holdKey struct {
	WorkflowID string `json:"workflowId"`
	Point      string `json:"point"`
}

type hold struct {
	reached, release chan struct{}
	once             sync.Once
}

type holds struct {
	mu sync.Mutex
	m  map[holdKey]*hold
}

// arm makes the next arrival at key wait for release.
func (h *holds) arm(key holdKey) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[holdKey]*hold{}
	}
	x := &hold{reached: make(chan struct{}), release: make(chan struct{})}
	h.m[key] = x
	return x
}

// wait is the local activity: an armed hold blocks once, the first time
// its point is reached (a retried task passes).
func (h *holds) wait(ctx context.Context, key holdKey) error {
	h.mu.Lock()
	x := h.m[key]
	delete(h.m, key)
	h.mu.Unlock()
	if x == nil {
		return nil
	}
	x.once.Do(func() { close(x.reached) })
	select {
	case <-x.release:
	case <-ctx.Done():
	}
	return nil
}

// holdInterceptor runs holds.wait at a turn's hold points.
type holdInterceptor struct {
	interceptor.WorkerInterceptorBase
	h *holds
}

func (i *holdInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != signals.TurnWorkflow {
		return next
	}
	return &holdInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, h: i.h}
}

type holdInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	h   *holds
	out *holdOutbound
}

func (i *holdInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	i.out = &holdOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, h: i.h}
	return i.Next.Init(i.out)
}

// ExecuteUpdate: an answer to the turn's requests. The turn's next
// activity is the answered call's, whether or not the turn told its
// session it parked (a turn nobody waits on does not: eve-turn-decides).
func (i *holdInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	if in.Name == signals.UpdateRespond {
		i.out.parked = true
	}
	return i.Next.ExecuteUpdate(ctx, in)
}

func (i *holdInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	out, err := i.Next.ExecuteWorkflow(ctx, in)
	holdAt(ctx, i.h, "end")
	return out, err
}

type holdOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	h *holds
	// parked: the turn told its session it waits, or was given an
	// answer; its next activity is the answered call's.
	parked bool
}

func (o *holdOutbound) SignalExternalWorkflow(ctx workflow.Context, wid, runID, name string, arg any) workflow.Future {
	f := o.Next.SignalExternalWorkflow(ctx, wid, runID, name, arg)
	if in, ok := arg.(signals.TurnInputs); ok && name == signals.SignalTurnInputs && len(in.Open) > 0 {
		o.parked = true
		holdAt(ctx, o.h, "park")
	}
	return f
}

func (o *holdOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	f := o.Next.ExecuteActivity(ctx, activityType, args...)
	if o.parked {
		o.parked = false
		holdAt(ctx, o.h, "resume")
	}
	return f
}

func holdAt(ctx workflow.Context, h *holds, point string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	lctx := workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	key := holdKey{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Point: point}
	_ = workflow.ExecuteLocalActivity(lctx, h.wait, key).Get(dctx, nil)
}

// raceEnv runs the race agent on a worker with holds.
type raceEnv struct {
	*evetest.Env
	holds *holds
	dir   string
}

func newRaceEnv(t *testing.T) *raceEnv {
	env := evetest.New(t)
	r := &raceEnv{Env: env, holds: &holds{}, dir: t.TempDir()}
	env.StartWorkerWith(raceAgent("w1", r.dir), worker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&holdInterceptor{h: r.holds}},
	})
	return r
}

var bob = &auth.Principal{ID: "bob", Type: "user"}

// signalsDelivered counts the signals a workflow sent that reached their target.
func signalsDelivered(t *testing.T, ctx context.Context, c client.Client, wid string) int {
	return historyCounts(t, ctx, c, wid)[enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED]
}

// streamWatch reads a session's events again and again while a test runs
// and fails it when two reads disagree on any index.
type streamWatch struct {
	mu     sync.Mutex
	seen   map[int]string
	reads  int
	errs   []string
	cancel context.CancelFunc
	done   chan struct{}
}

func watchStream(t *testing.T, env *evetest.Env, id string) *streamWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &streamWatch{seen: map[int]string{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			evs, err := env.Sessions.Events(ctx, id, 0)
			if err == nil {
				w.check(evs)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *streamWatch) check(evs []protocol.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	for i, e := range evs {
		got := e.Meta.ID + " " + e.Type + " " + string(e.Data)
		if prev, ok := w.seen[i]; ok && prev != got {
			w.errs = append(w.errs, fmt.Sprintf("index %d: %s, later %s", i, prev, got))
		}
		w.seen[i] = got
	}
}

func (w *streamWatch) readCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads
}

func (w *streamWatch) stop() {
	w.cancel()
	<-w.done
}

// verify stops the watch, reads once more and fails on any disagreement.
func (w *streamWatch) verify(t *testing.T, final []protocol.Event) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); w.readCount() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	w.stop()
	if w.reads == 0 {
		t.Fatal("the stream was never read while the test ran")
	}
	w.check(final)
	if len(w.errs) > 0 {
		t.Fatalf("the stream rewrote events (%d reads): %s", w.reads, strings.Join(w.errs, "; "))
	}
}

// received counts the message.received events of each text.
func received(evs []protocol.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evetest.Of(evs, protocol.MessageReceived) {
		var d protocol.MessageReceivedData
		e.Decode(&d)
		n[d.Message]++
	}
	return n
}

// A message that arrives during a turn's final workflow task, its park or
// its resumption, sent by the turn's person (steer, queue) or by another:
// every tool input runs exactly once, every key at most once, each message
// is read by exactly one turn, and every read of the stream agrees.
func TestMessageRacingTurnRunsOnce(t *testing.T) {
	type race struct {
		point, first, policy string
		sender               *auth.Principal
	}
	var cases []race
	for _, p := range []string{"end", "park", "resume"} {
		first := "look up k1"
		if p != "end" {
			first = "refund ch1"
		}
		for _, policy := range []string{signals.TurnPolicySteer, signals.TurnPolicyQueue} {
			cases = append(cases, race{p, first, policy, alice})
		}
		cases = append(cases, race{p, first, "", bob})
	}
	for _, tc := range cases {
		who := "owner"
		if tc.sender == bob {
			who = "other"
		}
		t.Run(fmt.Sprintf("%s/%s/%s", tc.point, who, tc.policy), func(t *testing.T) {
			r := newRaceEnv(t)
			ctx := r.Ctx(60 * time.Second)
			id, err := r.Sessions.Create(ctx, "", alice)
			if err != nil {
				t.Fatal(err)
			}
			watch := watchStream(t, r.Env, id)
			turn0 := signals.TurnWorkflowID(id, "turn_0")
			h := r.holds.arm(holdKey{turn0, tc.point})
			first := signals.SendRequest{Message: tc.first, DeliveryID: "dlv_first", Caller: alice}
			var waited <-chan sendOutcome
			if tc.point == "park" {
				// The hold finds the park by the turn's signal to its
				// session, which it sends when someone waits for its
				// outcome (eve-turn-decides).
				first.Wait = true
				waited = r.sendAsync(ctx, id, first)
			} else if _, err := r.Sessions.Send(ctx, id, first); err != nil {
				t.Fatal(err)
			}
			if tc.point == "resume" {
				evs := waitFor(t, r.Env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputRequested)) == 1 })
				var d protocol.InputRequestedData
				evetest.Of(evs, protocol.InputRequested)[0].Decode(&d)
				go r.Sessions.Respond(ctx, id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: d.Requests[0].RequestID, OptionID: "approve"}}})
			}
			offered, res := r.race(t, ctx, h, id, signals.SendRequest{Message: "look up k2", DeliveryID: "dlv_race", Caller: tc.sender, TurnPolicy: tc.policy})
			evs := r.settle(t, ctx, id)
			watch.verify(t, r.Env.Events(ctx, id))
			if waited != nil {
				if o := <-waited; o.err != nil || o.res.TurnID != "turn_0" {
					t.Fatalf("the first message's send: %+v %v", o.res, o.err)
				}
			}

			if n := received(evs); n[tc.first] != 1 || n["look up k2"] != 1 {
				t.Fatalf("messages read %v, want each once: %s", n, evetest.Join(evs))
			}
			// The answer named the turn that read the message, which read
			// it after the first.
			if p := checkOrder(evs, []sent{{tc.first, "turn_0"}, {"look up k2", res.TurnID}}, fullText); len(p) > 0 {
				t.Fatalf("%s: %s", strings.Join(p, "; "), evetest.Join(evs))
			}
			execs := executions(t, r.dir)
			byKey, byInput := map[string]int{}, map[string]int{}
			for _, e := range execs {
				byKey[e.key]++
				byInput[e.tool+" "+e.input]++
			}
			for k, n := range byKey {
				if n > 1 {
					t.Errorf("key %s executed %d times", k, n)
				}
			}
			if n := byInput[`lookup {"key":"k2"}`]; n != 1 {
				t.Errorf("the racing message's tool ran %d times, want 1: %+v", n, execs)
			}
			switch tc.point {
			case "end":
				if n := byInput[`lookup {"key":"k1"}`]; n != 1 {
					t.Errorf("the first message's tool ran %d times: %+v", n, execs)
				}
			case "resume":
				if n := byInput[`refund {"chargeId":"ch1"}`]; n != 1 {
					t.Errorf("the approved refund ran %d times: %+v", n, execs)
				}
			case "park":
				// A steering message withdraws the open approval (the
				// refund does not run); otherwise it waits for approval.
				if n := byInput[`refund {"chargeId":"ch1"}`]; n != 0 {
					t.Errorf("the unapproved refund ran %d times: %+v", n, execs)
				}
			}
			if tc.point == "end" && tc.sender == alice && tc.policy == signals.TurnPolicySteer && !offered {
				t.Fatal("the steering message was not offered to the running turn")
			}
			if tc.point == "end" && offered {
				// The race happened: the turn's final task failed because
				// the message arrived during it.
				if n := unhandledCommandFailures(t, ctx, r.Client, turn0); n == 0 {
					t.Errorf("the message did not race the final workflow task of %s", turn0)
				}
			}
			turns := len(evetest.Of(evs, protocol.TurnStarted))
			if ended := len(evetest.Of(evs, protocol.TurnCompleted)) + len(evetest.Of(evs, protocol.TurnFailed)) + len(evetest.Of(evs, protocol.TurnCancelled)); ended != turns {
				t.Fatalf("%d turns started, %d ended: %s", turns, ended, evetest.Join(evs))
			}
		})
	}
}

// race sends a message while h holds a turn's workflow task, and releases
// the task once the message reached the turn (when the session offered it
// to the running turn: it reports whether it did) or the session answered
// that it waits for a turn of its own. An offered message's answer waits
// for the turn's decision, which the held task makes once released: the
// send completes after the release, and race returns its answer.
func (r *raceEnv) race(t *testing.T, ctx context.Context, h *hold, id string, req signals.SendRequest) (offered bool, res signals.SendResult) {
	t.Helper()
	var done <-chan sendOutcome
	var answered *sendOutcome
	waitHeld(t, h, func() {
		before := signalsDelivered(t, ctx, r.Client, id)
		done = r.sendAsync(ctx, id, req)
		// Hold until the turn has the signal, buffered behind its running
		// workflow task, or the message was queued.
		deadline := time.Now().Add(20 * time.Second)
		for {
			select {
			case o := <-done:
				answered = &o
				return
			default:
			}
			if signalsDelivered(t, ctx, r.Client, id) > before {
				offered = true
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the message neither reached the turn nor was answered")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	if answered == nil {
		select {
		case o := <-done:
			answered = &o
		case <-time.After(60 * time.Second):
			t.Fatal("the racing send was never answered")
		}
	}
	if answered.err != nil {
		t.Fatalf("racing send: %v", answered.err)
	}
	return offered, answered.res
}

type sendOutcome struct {
	res signals.SendResult
	err error
}

// sendAsync sends a message and delivers its answer on the channel.
func (r *raceEnv) sendAsync(ctx context.Context, id string, req signals.SendRequest) <-chan sendOutcome {
	done := make(chan sendOutcome, 1)
	go func() {
		res, err := r.Sessions.Send(ctx, id, req)
		done <- sendOutcome{res, err}
	}()
	return done
}

// settle waits until the session runs no turn and holds no message. A
// turn left parked on an approval (another person's message cannot settle
// it) is cancelled, so the message behind it gets its turn.
func (r *raceEnv) settle(t *testing.T, ctx context.Context, id string) []protocol.Event {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		evs := r.Env.Events(ctx, id)
		s, err := r.Sessions.Summary(ctx, id)
		if err == nil && len(evs) > 0 {
			last := evs[len(evs)-1].Type
			if s.ActiveTurn == nil && s.Queued == 0 && last == protocol.SessionWaiting {
				return evs
			}
			if s.ActiveTurn != nil && last == protocol.TurnWaiting {
				r.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCancel, TurnID: s.ActiveTurn.TurnID})
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session never settled: %s", evetest.Join(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unhandledCommandFailures counts a workflow's tasks that failed because
// new events arrived while they ran.
func unhandledCommandFailures(t *testing.T, ctx context.Context, c client.Client, wid string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", wid, err)
		}
		if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil && a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
			n++
		}
	}
	return n
}

// waitHeld waits until h holds a workflow task, runs during and releases it.
func waitHeld(t *testing.T, h *hold, during func()) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn never reached its hold point")
	}
	defer close(h.release)
	during()
}

// Many sessions, messages sent at random moments by the turn's person or
// another, with random turn policies, and a worker process killed once
// mid-run (SIGKILL; a second worker takes over): every accepted message is
// read by exactly one turn, in the order the session accepted it and in
// the turn its answer named, every turn that started ends, no tool call
// key executes twice (but one in flight on the killed worker, which is
// what idempotency keys are for), and repeated stream reads never
// disagree.
func TestRandomMessageRacesWithKilledWorker(t *testing.T) {
	env := evetest.New(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
		"EVE_E2E_WORKER_MARKERS="+dir, "EVE_E2E_WORKER_AGENT=race", env.Server.PayloadStoreEnv())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	env.StartWorker(raceAgent("survivor", dir))

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	const sessions, perSession = 6, 4
	type plan struct {
		delay  time.Duration
		sender *auth.Principal
		policy string
	}
	plans := make([][]plan, sessions)
	for i := range plans {
		for range perSession {
			p := plan{delay: time.Duration(rng.IntN(200)) * time.Millisecond, sender: alice}
			if rng.IntN(4) == 0 {
				p.sender = bob
			}
			p.policy = []string{"", signals.TurnPolicySteer, signals.TurnPolicyQueue}[rng.IntN(3)]
			plans[i] = append(plans[i], p)
		}
	}
	killAfter := time.Duration(100+rng.IntN(500)) * time.Millisecond

	ctx := env.Ctx(3 * time.Minute)
	ids := make([]string, sessions)
	watches := make([]*streamWatch, sessions)
	for i := range ids {
		id, err := env.Sessions.Create(ctx, "", alice)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], watches[i] = id, watchStream(t, env, id)
	}
	var mu sync.Mutex
	accepted := map[string]string{} // message -> session
	// Each session's messages in the order it accepted them (one sender
	// per session, each send after the last one's answer), with the turn
	// each answer named.
	inOrder := make([][]sent, sessions)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, p := range plans[i] {
				time.Sleep(p.delay)
				msg := fmt.Sprintf("look up s%dm%d", i, j)
				res, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: msg, Caller: p.sender, TurnPolicy: p.policy})
				if err != nil {
					t.Errorf("send %q: %v", msg, err)
					continue
				}
				mu.Lock()
				accepted[msg] = id
				inOrder[i] = append(inOrder[i], sent{msg, res.TurnID})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(killAfter) // the fault's moment, not a barrier
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wg.Wait()

	r := &raceEnv{Env: env, holds: &holds{}, dir: dir}
	outOfOrder := 0
	for i, id := range ids {
		evs := r.settle(t, ctx, id)
		watches[i].verify(t, env.Events(ctx, id))
		n := received(evs)
		for msg, sid := range accepted {
			if sid == id && n[msg] != 1 {
				t.Errorf("%s: %q read by %d turns, want 1: %s", id, msg, n[msg], evetest.Join(evs))
			}
		}
		if p := checkOrder(evs, inOrder[i], fullText); len(p) > 0 {
			outOfOrder++
			t.Errorf("%s: %s", id, strings.Join(p, "; "))
		}
		started := len(evetest.Of(evs, protocol.TurnStarted))
		ended := len(evetest.Of(evs, protocol.TurnCompleted)) + len(evetest.Of(evs, protocol.TurnFailed)) + len(evetest.Of(evs, protocol.TurnCancelled))
		if started != ended {
			t.Errorf("%s: %d turns started, %d ended", id, started, ended)
		}
	}
	byKey := map[string][]string{}
	for _, e := range executions(t, dir) {
		byKey[e.key] = append(byKey[e.key], e.worker)
	}
	doomed := 0
	for k, ws := range byKey {
		for _, w := range ws[:len(ws)-1] {
			if w != "doomed" {
				t.Errorf("key %s executed %d times (workers %v)", k, len(ws), ws)
				break
			}
		}
		for _, w := range ws {
			if w == "doomed" {
				doomed++
			}
		}
	}
	t.Logf("%d messages, %d tool calls, %d on the killed worker; %d of %d sessions read out of order or in another turn than an answer named", len(accepted), len(byKey), doomed, outOfOrder, sessions)
}
