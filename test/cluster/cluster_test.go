//go:build cluster

package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
)

// TestCluster runs the reference topology and its scenarios in order on
// one cluster (`make test-cluster`).
func TestCluster(t *testing.T) {
	total := time.Now()
	c := newCluster(t)
	c.startPostgres()
	c.setupSchemas()
	c.writeServerConfig()
	d := c.startServer()
	t.Logf("%-44s %6.1fs", fmt.Sprintf("Temporal server %s (%d shards) at %s", serverVersion, numHistoryShards, c.frontend), d.Seconds())
	c.createNamespace()
	c.buildApp()
	start := time.Now()
	c.runner = newJobRunner(c.jobsDir)
	c.startWorker(0)
	c.startWorker(1)
	c.startAPI(0)
	c.startAPI(1)
	c.waitPollers(2)
	phase(t, "2 workers, 2 API servers", start)

	a := &accounts{sessions: map[string]bool{}}
	ok := t.Run("a_50_sessions", func(t *testing.T) { c.scenarioSessions(t, a) }) &&
		t.Run("b_kill_worker_mid_tool", func(t *testing.T) { c.scenarioKillWorker(t, a) }) &&
		t.Run("c_kill_api_mid_stream", func(t *testing.T) { c.scenarioKillAPI(t, a) }) &&
		t.Run("d_restart_temporal", func(t *testing.T) { c.scenarioRestartServer(t, a) }) &&
		t.Run("e_shards_and_accounting", func(t *testing.T) { c.scenarioAccounting(t, a) }) &&
		t.Run("f_deploy_new_build", func(t *testing.T) { c.scenarioDeploy(t) }) &&
		t.Run("doctor", func(t *testing.T) { c.doctor(t) })
	if err := c.runner.errors(); err != nil {
		t.Errorf("job runner: %v", err)
	}
	t.Logf("cluster test: %v in all (from PostgreSQL's start; binaries built before)", time.Since(total).Round(time.Second))
	_ = ok
}

// accounts records every session created and every turn sent.
type accounts struct {
	mu        sync.Mutex
	sessions  map[string]bool
	turnsSent atomic.Int64
	completed atomic.Int64
}

func (a *accounts) session(id string) {
	a.mu.Lock()
	a.sessions[id] = true
	a.mu.Unlock()
}

func (c *cluster) api(i int) *client.Client {
	return client.New(c.apiURL(i%2), client.WithAPIKey(c.apiKey))
}

// answers picks an answer for each open request: approve approvals, take
// the first option of questions, or say something.
func answers(open []protocol.InputRequest) []protocol.InputResponse {
	var out []protocol.InputResponse
	for _, r := range open {
		resp := protocol.InputResponse{RequestID: r.RequestID}
		for _, o := range r.Options {
			if o.ID == "approve" {
				resp.OptionID = "approve"
			}
		}
		if resp.OptionID == "" && len(r.Options) > 0 {
			resp.OptionID = r.Options[0].ID
		}
		if resp.OptionID == "" {
			resp.Text = "yes"
		}
		out = append(out, resp)
	}
	return out
}

type turnStats struct {
	mu        sync.Mutex
	latencies []time.Duration
	approvals int
	questions int
}

func (s *turnStats) add(d time.Duration, open []protocol.InputRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.latencies = append(s.latencies, d)
	}
	for _, r := range open {
		if r.Kind == protocol.KindQuestion {
			s.questions++
		} else {
			s.approvals++
		}
	}
}

func (s *turnStats) percentile(p float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.latencies) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[int(p*float64(len(l)-1))].Round(time.Millisecond)
}

// converse sends msg (to a new session when sid is empty), answers whatever
// the turn asks, and returns the session id and final turn.
func (c *cluster) converse(ctx context.Context, a *accounts, api *client.Client, sid, msg string, st *turnStats) (string, *client.Turn, error) {
	start := time.Now()
	t, err := api.SendAndWait(ctx, sid, msg, nil)
	if err != nil {
		return sid, nil, fmt.Errorf("send %q: %w", msg, err)
	}
	sid = t.SessionID
	a.session(sid)
	a.turnsSent.Add(1)
	for t.Status == client.TurnWaiting {
		st.add(0, t.Open)
		if _, t, err = api.RespondAndWait(ctx, sid, answers(t.Open), nil); err != nil {
			return sid, nil, fmt.Errorf("answer %q: %w", msg, err)
		}
	}
	if t.Status != client.TurnCompleted || t.Reply == "" {
		return sid, t, fmt.Errorf("session %s, %q: turn %s %s, reply %q", sid, msg, t.Status, t.Error, t.Reply)
	}
	st.add(time.Since(start), nil)
	a.completed.Add(1)
	return sid, t, nil
}

var cities = []string{"Paris", "Oslo", "Lima", "Tokyo", "Nairobi", "Quito", "Perth", "Cairo", "Dublin", "Hanoi"}

// (a) 50 concurrent sessions over both API servers: a tool call, then an
// approval, a client tool's question, a built-in question or a delegated job.
func (c *cluster) scenarioSessions(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	second := []string{"refund ch_%d for 25", "choose a plan", "ask me something", "run the sales report"}
	want := []string{"Refund of ch_", "You picked ", "You said ", "report succeeded"}
	var st turnStats
	var perAPI [2]atomic.Int64
	// One session alone first: a turn's latency without load.
	var solo turnStats
	for i := range 3 {
		if _, _, err := c.converse(ctx, a, c.api(i), "", "what's the weather in Rome", &solo); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("(a) a turn alone (weather tool): p50 %v max %v", solo.percentile(0.5), solo.percentile(1))
	jobsBefore := c.runner.completed.Load()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := c.api(i)
			sid, tr, err := c.converse(ctx, a, api, "", "what's the weather in "+cities[i%len(cities)], &st)
			if err == nil && !strings.Contains(tr.Reply, "°C") {
				err = fmt.Errorf("weather reply %q", tr.Reply)
			}
			if err != nil {
				errs <- err
				return
			}
			k := i % len(second)
			msg := second[k]
			if strings.Contains(msg, "%d") {
				msg = fmt.Sprintf(msg, i)
			}
			if _, tr, err = c.converse(ctx, a, api, sid, msg, &st); err == nil && !strings.Contains(tr.Reply, want[k]) {
				err = fmt.Errorf("session %s: %q replied %q, want %q", sid, msg, tr.Reply, want[k])
			}
			if err != nil {
				errs <- err
				return
			}
			perAPI[i%2].Add(1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	el := time.Since(start)
	t.Logf("(a) 50 sessions (%d via API 1, %d via API 2), 100 turns: all finished in %.1fs; %d approvals, %d questions, %d delegated jobs completed by URL; turn latency p50 %v p95 %v max %v",
		perAPI[0].Load(), perAPI[1].Load(), el.Seconds(), st.approvals, st.questions, c.runner.completed.Load()-jobsBefore,
		st.percentile(0.5), st.percentile(0.95), st.percentile(1))
}

// workerIdentityPid is the pid in an SDK worker identity (pid@host@...).
func workerIdentityPid(id string) int {
	p, _ := strconv.Atoi(strings.SplitN(id, "@", 2)[0])
	return p
}

// slowMarker is one of slow_step's marker files (test/cluster/clusteragent).
type slowMarker struct {
	Tag     string `json:"tag"`
	Worker  string `json:"worker"`
	Pid     int    `json:"pid"`
	Attempt int32  `json:"attempt"`
	Phase   string `json:"phase"`
	at      time.Time
}

// slowMarkers reads tag's marker files of phase ("start" or "done").
func (c *cluster) slowMarkers(t *testing.T, tag, phase string) []slowMarker {
	files, _ := filepath.Glob(filepath.Join(c.markersDir, tag+".*."+phase+".json"))
	var ms []slowMarker
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m slowMarker
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("marker %s: %v", f, err)
		}
		if fi, err := os.Stat(f); err == nil {
			m.at = fi.ModTime()
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Attempt < ms[j].Attempt })
	return ms
}

// (b) SIGKILL one worker mid-tool; the other worker finishes the turn.
// First a true mid-tool kill: slow_step (Idempotent, heartbeating, 4 s)
// is killed with the worker running it, and its next attempt runs on the
// other worker. Then the worker that ran in-flight delegated calls
// (run_report's jobs, held) is killed; the other one finishes those turns.
func (c *cluster) scenarioKillWorker(t *testing.T, a *accounts) {
	if !t.Run("slow_step", func(t *testing.T) { c.scenarioKillWorkerMidTool(t, a) }) {
		return
	}
	t.Run("delegated", func(t *testing.T) { c.scenarioKillWorkerDelegated(t, a) })
}

func (c *cluster) workerByPid(pid int) int {
	for i, w := range c.workers {
		if w != nil && w.pid() == pid {
			return i
		}
	}
	return -1
}

func (c *cluster) scenarioKillWorkerMidTool(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tag = "b1"
	api := c.api(0)
	sent := time.Now()
	acc, err := api.CreateAndSend(ctx, "slow step "+tag)
	if err != nil {
		t.Fatal(err)
	}
	a.session(acc.SessionID)
	a.turnsSent.Add(1)
	// Wait until a worker has started the tool.
	var first slowMarker
	for {
		if ms := c.slowMarkers(t, tag, "start"); len(ms) > 0 {
			first = ms[0]
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("slow_step never started (no marker in %s)", c.markersDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	started := time.Since(sent)
	victim := c.workerByPid(first.Pid)
	if victim < 0 || first.Attempt != 1 {
		t.Fatalf("slow_step started by pid %d (attempt %d), which is neither worker (%d, %d)", first.Pid, first.Attempt, c.workers[0].pid(), c.workers[1].pid())
	}
	survivor := 1 - victim
	survivorPid := c.workers[survivor].pid()
	if done := c.slowMarkers(t, tag, "done"); len(done) > 0 {
		t.Fatalf("slow_step finished before the kill: %+v", done)
	}
	c.workers[victim].kill()
	killed := time.Now()
	tr, err := api.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, 0, nil)
	turnDone := time.Since(killed)
	if err != nil || tr.Status != client.TurnCompleted {
		t.Fatalf("session %s after the kill: %v %+v", acc.SessionID, err, tr)
	}
	a.completed.Add(1)
	survivorName := fmt.Sprintf("worker-%d", survivor+1)
	if want := "slow step " + tag + " finished by " + survivorName + " on attempt "; !strings.HasPrefix(tr.Reply, want) {
		t.Errorf("reply %q, want %q…", tr.Reply, want)
	}
	// The markers: started by the victim, run again and finished by the
	// survivor, never finished by the victim.
	starts, dones := c.slowMarkers(t, tag, "start"), c.slowMarkers(t, tag, "done")
	if len(dones) != 1 || dones[0].Pid != survivorPid || dones[0].Attempt < 2 {
		t.Fatalf("slow_step finished %+v, want once, by %s (pid %d), on attempt >= 2 (started: %+v)", dones, survivorName, survivorPid, starts)
	}
	retry := starts[len(starts)-1]
	if retry.Pid != survivorPid || retry.Attempt != dones[0].Attempt {
		t.Errorf("last attempt started %+v, finished %+v", retry, dones[0])
	}
	// Temporal's history agrees: the tool's last attempt ran on the survivor.
	var activity string
	lastAttempt, completedBy := int32(0), 0
	it := c.tc.GetWorkflowHistory(ctx, acc.SessionID+"/turn_0", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	tools := map[int64]bool{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s/turn_0: %v", acc.SessionID, err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(); name == work.ExecuteToolName {
				tools[e.GetEventId()], activity = true, name
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if at := e.GetActivityTaskStartedEventAttributes(); tools[at.GetScheduledEventId()] {
				lastAttempt = at.GetAttempt()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if at := e.GetActivityTaskCompletedEventAttributes(); tools[at.GetScheduledEventId()] {
				completedBy = workerIdentityPid(at.GetIdentity())
			}
		}
	}
	if len(tools) != 1 || lastAttempt < 2 || completedBy != survivorPid {
		t.Errorf("history: %d %s activities, last attempt %d completed by pid %d; want 1, attempt >= 2, pid %d", len(tools), activity, lastAttempt, completedBy, survivorPid)
	}
	t.Logf("(b1) slow_step (4 s, heartbeat timeout 2 s) started on worker %d %.1fs after the send; SIGKILL worker %d mid-tool: attempt %d started on worker %d %.1fs after the kill, finished %.1fs after the kill; turn completed %.1fs after the kill: %q",
		victim+1, started.Seconds(), victim+1, retry.Attempt, survivor+1, retry.at.Sub(killed).Seconds(), dones[0].at.Sub(killed).Seconds(), turnDone.Seconds(), tr.Reply)
	c.startWorker(victim)
	c.waitPollers(2)
}

// The worker that ran in-flight delegated calls (run_report's jobs, held)
// is killed; the other worker finishes every turn.
func (c *cluster) scenarioKillWorkerDelegated(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 10
	c.runner.held.Store(true)
	defer c.runner.held.Store(false)
	type started struct {
		sid, delivery string
		api           *client.Client
	}
	var ss []started
	for i := range n {
		api := c.api(i)
		acc, err := api.CreateAndSend(ctx, fmt.Sprintf("run the kill%d report", i))
		if err != nil {
			t.Fatal(err)
		}
		a.session(acc.SessionID)
		a.turnsSent.Add(1)
		ss = append(ss, started{acc.SessionID, acc.DeliveryID, api})
	}
	for c.runner.pending() < n {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d jobs spooled", c.runner.pending(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Which worker ran each in-flight tool call: the turn's pending activity
	// (each session's first turn, a workflow of its own).
	byPid := map[int]int{}
	for _, s := range ss {
		td, err := c.tc.DescribeWorkflowExecution(ctx, s.sid+"/turn_0", "")
		if err != nil || len(td.GetPendingActivities()) == 0 {
			t.Fatalf("turn of %s: no tool call in flight (%v)", s.sid, err)
		}
		byPid[workerIdentityPid(td.GetPendingActivities()[0].GetLastWorkerIdentity())]++
	}
	victim := 0
	if byPid[c.workers[1].pid()] > byPid[c.workers[0].pid()] {
		victim = 1
	}
	survivor := 1 - victim
	victimPid, survivorPid := c.workers[victim].pid(), c.workers[survivor].pid()
	if byPid[victimPid] == 0 {
		t.Fatalf("no tool call in flight on either worker: %v", byPid)
	}
	c.workers[victim].kill()
	killed := time.Now()
	c.runner.held.Store(false)
	for _, s := range ss {
		tr, err := s.api.WaitTurn(ctx, s.sid, s.delivery, 0, nil)
		if err != nil || tr.Status != client.TurnCompleted || !strings.Contains(tr.Reply, "report succeeded") {
			t.Fatalf("session %s after the kill: %v %+v", s.sid, err, tr)
		}
		a.completed.Add(1)
	}
	finished := time.Since(killed)
	// Every turn's last workflow task was completed by the survivor.
	bySurvivor, moved := 0, 0
	for _, s := range ss {
		it := c.tc.GetWorkflowHistory(ctx, s.sid+"/turn_0", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		last, byVictim := "", false
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s/turn_0: %v", s.sid, err)
			}
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				last = e.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
				byVictim = byVictim || workerIdentityPid(last) == victimPid
			}
		}
		if workerIdentityPid(last) == survivorPid {
			bySurvivor++
			if byVictim {
				moved++
			}
		} else {
			t.Errorf("turn of %s finished by %q, want the surviving worker (pid %d)", s.sid, last, survivorPid)
		}
	}
	t.Logf("(b2) %d turns with a run_report call in flight (%d started by worker %d, %d by worker %d); SIGKILL worker %d: worker %d finished %d/%d turns (%d of them begun by the killed worker), the last %.1fs after the kill",
		n, byPid[victimPid], victim+1, byPid[survivorPid], survivor+1, victim+1, survivor+1, bySurvivor, n, moved, finished.Seconds())
	c.startWorker(victim)
}

// (c) SIGKILL the API server a client streams from; the client goes on from
// its cursor on the other one, missing nothing, with the same event ids.
func (c *cluster) scenarioKillAPI(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	doomed, other := c.api(1), c.api(0)
	var st turnStats
	sid, _, err := c.converse(ctx, a, doomed, "", "what's the weather in Bergen", &st)
	if err != nil {
		t.Fatal(err)
	}
	c.runner.held.Store(true)
	defer c.runner.held.Store(false)
	if _, err := doomed.Send(ctx, sid, "run the stream report"); err != nil {
		t.Fatal(err)
	}
	a.turnsSent.Add(1)
	// The turn is in flight once its job is spooled, and stays so (held):
	// read everything up to the tail, then kill the server mid-stream.
	for c.runner.pending() == 0 {
		if ctx.Err() != nil {
			t.Fatal("run_report's job was never spooled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	tail, err := doomed.Tail(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	next := 0
	s := doomed.Stream(ctx, sid, 0, &client.StreamOptions{MaxReconnects: 1})
	for next <= tail {
		if !s.Next() {
			t.Fatalf("stream ended before the tool call: %v", s.Err())
		}
		if s.Index() != next {
			t.Fatalf("event index %d, want %d", s.Index(), next)
		}
		ids = append(ids, s.Event().Meta.ID)
		next++
	}
	before := len(ids)
	c.apis[1].kill()
	killed := time.Now()
	for s.Next() { // what was already on the wire
		ids = append(ids, s.Event().Meta.ID)
		next++
	}
	buffered := len(ids) - before
	cursor := s.Cursor()
	s.Close()
	if cursor != next {
		t.Fatalf("cursor %d, read %d events", cursor, next)
	}
	c.runner.held.Store(false)
	s2 := other.Stream(ctx, sid, cursor, nil)
	reopened := time.Since(killed)
	var reconnect time.Duration
	done := false
	for !done && s2.Next() {
		if reconnect == 0 {
			reconnect = time.Since(killed)
		}
		if s2.Index() != next {
			t.Fatalf("after the reconnect: event index %d, want %d (missed or repeated)", s2.Index(), next)
		}
		ids = append(ids, s2.Event().Meta.ID)
		next++
		done = s2.Event().Type == protocol.SessionWaiting
	}
	s2.Close()
	if !done {
		t.Fatalf("stream on the other API server ended: %v", s2.Err())
	}
	a.completed.Add(1)
	all, _, err := other.Events(ctx, sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range all[:min(len(all), len(ids))] {
		if e.Meta.ID != ids[i] {
			t.Errorf("event %d: id %s, the stream saw %s", i, e.Meta.ID, ids[i])
		}
		if seen[e.Meta.ID] {
			t.Errorf("event %d: id %s repeated", i, e.Meta.ID)
		}
		seen[e.Meta.ID] = true
	}
	if len(all) != len(ids) {
		t.Errorf("session has %d events, the stream saw %d", len(all), len(ids))
	}
	t.Logf("(c) a turn in flight (its run_report job held): read %d events from API 2, SIGKILL API 2, %d more already on the wire, the client's reconnect to API 2 failed and it reopened on API 1 at cursor %d %.1fs after the kill; %d more events there (the first %.1fs after the kill, once the job was released) up to session.waiting: %d/%d event ids identical to the session's, indexes contiguous, none missed or repeated",
		before, buffered, cursor, reopened.Seconds(), len(ids)-cursor, reconnect.Seconds(), len(ids), len(all))
	c.startAPI(1)
}

// (d) restart the whole Temporal server while 20 sessions are parked; they
// all resume after their answers.
func (c *cluster) scenarioRestartServer(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 20
	type parked struct {
		sid string
		api *client.Client
		tr  *client.Turn
	}
	ps := make([]parked, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := c.api(i)
			msg := "ask me something"
			if i%2 == 1 {
				msg = fmt.Sprintf("refund ch_p%d for 5", i)
			}
			tr, err := api.SendAndWait(ctx, "", msg, nil)
			if err != nil || tr.Status != client.TurnWaiting {
				errs <- fmt.Errorf("park %q: %v %+v", msg, err, tr)
				return
			}
			a.session(tr.SessionID)
			a.turnsSent.Add(1)
			ps[i] = parked{tr.SessionID, api, tr}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// SQL visibility with eve's search attributes finds them.
	var waiting int64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		r, err := c.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: "EveStatus = 'waiting-input' AND ExecutionStatus = 'Running'"})
		if err == nil {
			if waiting = r.GetCount(); waiting >= n {
				break
			}
		}
	}
	if waiting < n {
		t.Fatalf("visibility finds %d sessions with EveStatus = 'waiting-input', want >= %d", waiting, n)
	}
	stop := time.Now()
	c.server.stop(30 * time.Second)
	stopped := time.Since(stop)
	up := c.startServer()
	restarted := time.Now()
	var resumed atomic.Int64
	errs = make(chan error, n)
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				tr  *client.Turn
				err error
			)
			// The API servers' Temporal connections come back on their own;
			// a request in the meantime may answer 503.
			for {
				_, tr, err = p.api.RespondAndWait(ctx, p.sid, answers(p.tr.Open), nil)
				if err == nil || ctx.Err() != nil || !(client.IsStatus(err, 503) || client.IsStatus(err, 502) || client.IsStatus(err, 504)) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if err != nil || tr.Status != client.TurnCompleted || tr.Reply == "" {
				errs <- fmt.Errorf("session %s after the restart: %v %+v", p.sid, err, tr)
				return
			}
			resumed.Add(1)
			a.completed.Add(1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("(d) %d sessions parked (10 questions, 10 approvals; SQL visibility: %d workflows, sessions and their turns, with EveStatus = 'waiting-input'); the whole Temporal server (SIGTERM) stopped in %.1fs, started again and answering in %.1fs; %d/%d resumed after their answers within %.1fs of the restart",
		n, waiting, stopped.Seconds(), up.Seconds(), resumed.Load(), n, time.Since(restarted).Seconds())
}

// (e) sessions land on every history shard, and every turn sent is
// accounted for: in the database, in the events and by the clients.
func (c *cluster) scenarioAccounting(t *testing.T, a *accounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uuid := strings.ReplaceAll(c.nsID, "-", "")
	if _, err := hex.DecodeString(uuid); err != nil || len(uuid) != 32 {
		t.Fatalf("namespace id %q", c.nsID)
	}
	rows := c.psql("temporal", "SELECT shard_id, workflow_id FROM executions WHERE namespace_id = decode('"+uuid+"', 'hex')")
	a.mu.Lock()
	sessions := make(map[string]bool, len(a.sessions))
	for s := range a.sessions {
		sessions[s] = true
	}
	a.mu.Unlock()
	sessionsPerShard := map[string]int{}
	turnsInDB := 0
	found := map[string]bool{}
	for _, r := range rows {
		shard, wid := r[0], r[1]
		if sessions[wid] {
			sessionsPerShard[shard]++
			found[wid] = true
		} else if sid, turn, ok := strings.Cut(wid, "/"); ok && sessions[sid] && strings.HasPrefix(turn, "turn_") {
			turnsInDB++
		}
	}
	for s := 1; s <= numHistoryShards; s++ {
		if sessionsPerShard[strconv.Itoa(s)] == 0 {
			t.Errorf("no session on history shard %d: %v", s, sessionsPerShard)
		}
	}
	if len(found) != len(sessions) {
		t.Errorf("%d sessions created, %d in the executions table", len(sessions), len(found))
	}
	// The events: one completed turn per message sent, in every session.
	api := c.api(0)
	turnsInEvents := 0
	for sid := range sessions {
		evs, _, err := api.Events(ctx, sid, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", sid, err)
		}
		for _, e := range evs {
			if e.Type == protocol.TurnCompleted {
				turnsInEvents++
			}
		}
	}
	// No workflow of the namespace failed, timed out or was terminated.
	bad, err := c.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace,
		Query: "ExecutionStatus = 'Failed' OR ExecutionStatus = 'TimedOut' OR ExecutionStatus = 'Terminated'"})
	if err != nil {
		t.Fatal(err)
	}
	if bad.GetCount() != 0 {
		t.Errorf("%d workflows failed, timed out or were terminated", bad.GetCount())
	}
	sent, completed := a.turnsSent.Load(), a.completed.Load()
	if int64(turnsInDB) != sent || int64(turnsInEvents) != sent || completed != sent {
		t.Errorf("turns sent %d; turn workflows in the database %d; turn.completed events %d; completed as clients saw %d", sent, turnsInDB, turnsInEvents, completed)
	}
	var shards []string
	for s := 1; s <= numHistoryShards; s++ {
		shards = append(shards, fmt.Sprintf("shard %d: %d", s, sessionsPerShard[strconv.Itoa(s)]))
	}
	t.Logf("(e) %d sessions over %d history shards (%s); turns sent %d = turn workflows in PostgreSQL %d = turn.completed events %d = completed as clients saw %d; %d workflows failed, timed out or terminated",
		len(sessions), numHistoryShards, strings.Join(shards, ", "), sent, turnsInDB, turnsInEvents, completed, bad.GetCount())
}

// eve doctor passes against the cluster.
func (c *cluster) doctor(t *testing.T) {
	cmd := exec.Command(c.appBin, "doctor", "--url", c.apiURL(0))
	v := c.eveValues()
	cmd.Env = envFor(t, []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "EVE_TASK_QUEUE"}, v)
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("eve doctor: %v\n%s", err, out)
	}
	t.Logf("eve doctor passes:\n%s", strings.TrimRight(string(out), "\n"))
}
