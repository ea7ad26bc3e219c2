//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// The deploy drill's own task queue, worker deployment (its default name,
// the task queue) and API server, beside the topology's unversioned ones.
const drillQueue = "eve-drill"

// drill is a versioned deployment of eve on drillQueue: a worker per build
// and an API server.
type drill struct {
	c       *cluster
	api     *proc
	apiPort int
	workers map[string]*proc // by build id
}

func (c *cluster) newDrill() *drill {
	d := &drill{c: c, apiPort: freePort(c.t), workers: map[string]*proc{}}
	v := c.eveValues()
	v["EVE_TASK_QUEUE"] = drillQueue
	v["EVE_ADDR"] = fmt.Sprintf("127.0.0.1:%d", d.apiPort)
	d.api = startProc(c.t, c.logs, "api-drill", envFor(c.t, apiEnvKeys, v), c.dir, c.appBin, "serve")
	c.extra = append(c.extra, d.api)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(d.url() + "/eve/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d
			}
		}
		if !d.api.alive() || time.Now().After(deadline) {
			c.t.Fatalf("drill API server not ready: %v\n%s", err, d.api.tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *drill) url() string { return fmt.Sprintf("http://127.0.0.1:%d", d.apiPort) }

func (d *drill) client() *client.Client { return client.New(d.url(), client.WithAPIKey(d.c.apiKey)) }

// startBuild starts a worker of build id on the drill's queue; env adds
// variables (EVE_BUILD_ID …), args flags.
func (d *drill) startBuild(build string, env []string, args ...string) {
	c := d.c
	v := c.eveValues()
	v["EVE_TASK_QUEUE"] = drillQueue
	v["EVE_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", freePort(c.t))
	e := append(envFor(c.t, workerEnvKeys, v), "EVE_CLUSTER_MARKERS="+c.markersDir, "EVE_CLUSTER_WORKER=drill-"+build)
	p := startProc(c.t, c.logs, "worker-drill-"+build, append(e, env...), c.dir, c.appBin, append([]string{"worker"}, args...)...)
	d.workers[build] = p
	c.extra = append(c.extra, p)
}

// current is the drill deployment's current build id ("" none yet).
func (d *drill) current(ctx context.Context) string {
	desc, err := d.c.tc.WorkerDeploymentClient().GetHandle(drillQueue).Describe(ctx, sdkclient.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return ""
	}
	if cur := desc.Info.RoutingConfig.CurrentVersion; cur != nil {
		return cur.BuildID
	}
	return ""
}

// waitCurrent waits until build is current.
func (d *drill) waitCurrent(ctx context.Context, t *testing.T, build string) {
	for d.current(ctx) != build {
		if ctx.Err() != nil || !d.workers[build].alive() {
			t.Fatalf("build %s never became current (current %q)\n%s", build, d.current(context.Background()), d.workers[build].tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setCurrent runs the operator's command of docs/deploy.md, retried until
// the server has seen the build's pollers (it refuses a version without).
func (d *drill) setCurrent(ctx context.Context, t *testing.T, build string) {
	var out []byte
	for {
		cmd := exec.CommandContext(ctx, d.c.cliBin, "worker", "deployment", "set-current-version",
			"--address", d.c.frontend, "--namespace", namespace,
			"--deployment-name", drillQueue, "--build-id", build, "--yes")
		var err error
		if out, err = cmd.CombinedOutput(); err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("temporal worker deployment set-current-version --build-id %s: %v\n%s", build, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// parkedTurn is a turn waiting on an approval.
type parkedTurn struct {
	session, workflowID string
	open                []protocol.InputRequest
	reply               string // the reply it must end with
}

// park starts a session whose turn asks for an approval.
func (d *drill) park(ctx context.Context, t *testing.T, n int) parkedTurn {
	tr, err := d.client().SendAndWait(ctx, "", fmt.Sprintf("refund ch_%d for %d", n, n), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status != client.TurnWaiting {
		t.Fatalf("refund %d: turn %s %s, want waiting on an approval", n, tr.Status, tr.Error)
	}
	return parkedTurn{session: tr.SessionID, workflowID: turnWorkflowID(t, tr), open: tr.Open, reply: fmt.Sprintf("Refund of ch_%d: %d", n, n)}
}

// turnWorkflowID is the workflow of the turn tr read.
func turnWorkflowID(t *testing.T, tr *client.Turn) string {
	for _, e := range tr.Events {
		if e.Type == protocol.TurnStarted {
			var ref protocol.TurnRef
			if err := e.Decode(&ref); err == nil && ref.TurnID != "" {
				return signals.TurnWorkflowID(tr.SessionID, ref.TurnID)
			}
		}
	}
	t.Fatalf("session %s: no turn.started in the turn's events", tr.SessionID)
	return ""
}

// approve answers the parked turn and checks it completed.
func (d *drill) approve(ctx context.Context, p parkedTurn) error {
	_, tr, err := d.client().RespondAndWait(ctx, p.session, answers(p.open), nil)
	if err != nil {
		return fmt.Errorf("approve %s: %w", p.workflowID, err)
	}
	if tr.Status != client.TurnCompleted || tr.Reply != p.reply {
		return fmt.Errorf("%s after approval: %s %s, reply %q, want %q", p.workflowID, tr.Status, tr.Error, tr.Reply, p.reply)
	}
	return nil
}

// version is a workflow's build and versioning behaviour as the server
// records them.
func (c *cluster) version(ctx context.Context, workflowID string) (string, enumspb.VersioningBehavior, error) {
	resp, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return "", 0, err
	}
	vi := resp.GetWorkflowExecutionInfo().GetVersioningInfo()
	if name := vi.GetDeploymentVersion().GetDeploymentName(); name != drillQueue {
		return "", 0, fmt.Errorf("%s: deployment %q, want %q", workflowID, name, drillQueue)
	}
	return vi.GetDeploymentVersion().GetBuildId(), vi.GetBehavior(), nil
}

// tasksOn lists the builds that completed the workflow's tasks.
func (c *cluster) tasksOn(ctx context.Context, workflowID string) ([]string, error) {
	it := c.tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var builds []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			builds = append(builds, ev.GetWorkflowTaskCompletedEventAttributes().GetDeploymentVersion().GetBuildId())
		}
	}
	return builds, nil
}

// (f) A deploy under Worker Versioning (docs/deploy.md, Deploying a new
// build): build a's workers run, current; turns park on approvals on a;
// build b's worker starts and the operator makes it current; new turns run
// on b while the parked ones, approved, finish on a; a drains, stops, and
// the old sessions' next turns run on b.
func (c *cluster) scenarioDeploy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	d := c.newDrill()
	// Build a: flags, and it makes itself current (a first deploy).
	d.startBuild("a", nil, "--build-id", "a", "--make-current")
	d.waitCurrent(ctx, t, "a")
	phase(t, "(f) build a current", start)

	const parked = 4
	var onA []parkedTurn
	for i := range parked {
		p := d.park(ctx, t, 100+i)
		if build, beh, err := c.version(ctx, p.workflowID); err != nil || build != "a" || beh != enumspb.VERSIONING_BEHAVIOR_PINNED {
			t.Fatalf("%s on %q %v (%v), want pinned to a", p.workflowID, build, beh, err)
		}
		onA = append(onA, p)
	}

	// Build b: the environment, and the operator's command.
	mark := time.Now()
	d.startBuild("b", []string{"EVE_BUILD_ID=b"})
	d.setCurrent(ctx, t, "b")
	if cur := d.current(ctx); cur != "b" {
		t.Fatalf("current build %q after set-current-version b", cur)
	}
	phase(t, "(f) build b started and made current", mark)

	var onB []parkedTurn
	for i := range 2 {
		p := d.park(ctx, t, 200+i)
		if build, beh, err := c.version(ctx, p.workflowID); err != nil || build != "b" || beh != enumspb.VERSIONING_BEHAVIOR_PINNED {
			t.Fatalf("new turn %s on %q %v (%v), want pinned to b", p.workflowID, build, beh, err)
		}
		onB = append(onB, p)
	}

	// Before they resume, the parked turns (and their sessions, which have
	// had no task since) are open on a: the count that says a drained
	// below counts them.
	c.waitOpenOn(ctx, t, "a", func(n int64) bool { return n >= parked })

	// The parked turns, approved now, finish on a: every workflow task of
	// theirs completed there, before the deploy and after it.
	mark = time.Now()
	for _, p := range append(onA, onB...) {
		if err := d.approve(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range append(onA, onB...) {
		want := "a"
		if i >= len(onA) {
			want = "b"
		}
		builds, err := c.tasksOn(ctx, p.workflowID)
		if err != nil {
			t.Fatal(err)
		}
		if len(builds) < 2 || strings.Count(strings.Join(builds, ""), want) != len(builds) {
			t.Fatalf("%s: workflow tasks completed on builds %v, want all on %s", p.workflowID, builds, want)
		}
	}
	phase(t, fmt.Sprintf("(f) %d parked turns finished on a, %d on b", len(onA), len(onB)), mark)

	// a is drained: nothing open is on it (the sessions moved to b with
	// their next workflow task).
	mark = time.Now()
	c.waitOpenOn(ctx, t, "a", func(n int64) bool { return n == 0 })
	for _, p := range onA {
		if build, beh, err := c.version(ctx, p.session); err != nil || build != "b" || beh != enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE {
			t.Fatalf("session %s on %q %v (%v), want auto-upgraded to b", p.session, build, beh, err)
		}
	}
	a := d.workers["a"]
	a.stop(30 * time.Second)
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("build a's worker exited %d:\n%s", code, a.tail(20))
	}
	phase(t, "(f) build a drained and stopped", mark)

	// With a gone, an old session's next turn runs on b.
	p := onA[0]
	tr, err := d.client().SendAndWait(ctx, p.session, "refund ch_300 for 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	next := parkedTurn{session: p.session, workflowID: turnWorkflowID(t, tr), open: tr.Open, reply: "Refund of ch_300: 3"}
	if build, _, err := c.version(ctx, next.workflowID); err != nil || build != "b" {
		t.Fatalf("old session's new turn on %q (%v), want b", build, err)
	}
	if err := d.approve(ctx, next); err != nil {
		t.Fatal(err)
	}
	t.Logf("(f) deploy drill: %d turns parked on build a finished there after b became current; %d new turns ran on b; a drained (no open workflow on it) and stopped; an old session's next turn ran on b; %.1fs in all (worker logs under %s)",
		len(onA), len(onB)+1, time.Since(start).Seconds(), filepath.Join(c.logs, "worker-drill-*.log"))
}

// waitOpenOn waits until the number of open workflows on the drill's build
// satisfies ok: the count docs/deploy.md gives operators. Visibility lags
// the executions a little.
func (c *cluster) waitOpenOn(ctx context.Context, t *testing.T, build string, ok func(int64) bool) {
	query := fmt.Sprintf("TemporalWorkerDeploymentVersion = '%s:%s' AND ExecutionStatus = 'Running'", drillQueue, build)
	for {
		n, err := c.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		if err != nil {
			t.Fatalf("count %s: %v", query, err)
		}
		if ok(n.GetCount()) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: count %d", query, n.GetCount())
		}
		time.Sleep(300 * time.Millisecond)
	}
}
