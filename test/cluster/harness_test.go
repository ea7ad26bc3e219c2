//go:build cluster

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/demo"
)

const (
	namespace = "default"
	taskQueue = "eve"
)

// proc is one process the test started; its output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, logDir, name string, env []string, dir, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to grace, then SIGKILL.
func (p *proc) stop(grace time.Duration) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// givenPorts are the ports freePort handed out in this process: the
// kernel may offer a port again once its listener closed.
var givenPorts sync.Map

func freePort(t testing.TB) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := givenPorts.LoadOrStore(port, true); !taken {
			return port
		}
	}
}

// freeLowPort is a free port below 32768: Temporal's SQL schema keeps
// membership ports in a smallint.
func freeLowPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		b := make([]byte, 2)
		rand.Read(b)
		port := 20000 + (int(b[0])<<8|int(b[1]))%12000
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port below 32768")
	return 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// phase logs how long a step took.
func phase(t testing.TB, what string, start time.Time) {
	t.Logf("%-44s %6.1fs", what, time.Since(start).Seconds())
}

// cluster is the topology: PostgreSQL, one Temporal server, two workers,
// two API servers, sharing a payload store, an action secret and a job
// spool.
type cluster struct {
	t    *testing.T
	root string // repository
	dir  string // temporary directory of everything
	logs string

	serverBin, sqlToolBin, cliBin string
	// appBin is test/cluster/clusteragent, the demo agent plus slow_step
	// on eve.Main: the workers (`appBin worker`), the API servers
	// (`appBin serve`) and `appBin doctor`.
	appBin string

	pgBin, pgDir string
	pgPort       int

	serverRoot string
	frontend   string
	server     *proc

	secret, apiKey, payloadDir, jobsDir string
	markersDir                          string // slow_step's marker files
	workers                             [2]*proc
	workerMetrics                       [2]int
	apis                                [2]*proc
	apiPorts                            [2]int
	extra                               []*proc // the deploy drill's (deploy_test.go)

	tc     client.Client
	nsID   string
	runner *jobRunner
}

func binOr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

func newCluster(t *testing.T) *cluster {
	root := repoRoot(t)
	dir, err := os.MkdirTemp("", "eve-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	c := &cluster{
		t: t, root: root, dir: dir, logs: filepath.Join(dir, "logs"),
		serverBin:  binOr("EVE_TEMPORAL_SERVER_BIN", filepath.Join(root, "bin", "temporal-server")),
		sqlToolBin: binOr("EVE_TEMPORAL_SQL_TOOL_BIN", filepath.Join(root, "bin", "temporal-sql-tool")),
		cliBin:     binOr("EVE_TEMPORAL_BIN", filepath.Join(root, "bin", "temporal")),
		secret:     randomHex(32), apiKey: randomHex(24),
		payloadDir: filepath.Join(dir, "payloads"), jobsDir: filepath.Join(dir, "jobs"),
		markersDir: filepath.Join(dir, "markers"),
	}
	os.MkdirAll(c.logs, 0o755)
	os.MkdirAll(c.markersDir, 0o755)
	// Known before any worker starts: EVE_PUBLIC_URL names API server 1.
	c.apiPorts = [2]int{freePort(t), freePort(t)}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(append(append([]*proc{c.server}, c.workers[:]...), c.apis[:]...), c.extra...) {
				if p != nil {
					t.Logf("--- last lines of %s (%s):\n%s", p.name, p.log, p.tail(15))
				}
			}
		}
		c.close()
		if os.Getenv("EVE_CLUSTER_KEEP") != "" { // keep the logs and data to look at
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	for _, b := range []string{c.serverBin, c.sqlToolBin, c.cliBin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%v (run `make test-cluster`, which builds it)", err)
		}
	}
	return c
}

func (c *cluster) close() {
	if c.runner != nil {
		c.runner.stop()
	}
	for _, p := range append(append(c.extra, c.apis[:]...), c.workers[:]...) {
		if p != nil && p.alive() {
			p.stop(5 * time.Second)
		}
	}
	if c.tc != nil {
		c.tc.Close()
	}
	if c.server != nil && c.server.alive() {
		c.server.stop(15 * time.Second)
	}
	if c.pgDir != "" {
		argv := c.asPostgres(filepath.Join(c.pgBin, "pg_ctl"), "-D", filepath.Join(c.pgDir, "data"), "-m", "immediate", "stop")
		exec.Command(argv[0], argv[1:]...).Run()
		os.RemoveAll(c.pgDir)
	}
}

// --- binaries ---------------------------------------------------------------

// buildApp builds the one binary of every eve process: an app on eve.Main
// (test/cluster/clusteragent), whose worker and serve commands are
// cmd/worker's and `eve serve`'s.
func (c *cluster) buildApp() {
	start := time.Now()
	c.appBin = filepath.Join(c.dir, "bin", "clusteragent")
	run(c.t, c.root, os.Environ(), "go", "build", "-o", c.appBin, "./test/cluster/clusteragent")
	phase(c.t, "build clusteragent (demo agent + slow_step)", start)
}

// --- PostgreSQL -------------------------------------------------------------

// asPostgres returns argv running args as the postgres user when root
// (PostgreSQL refuses to run as root).
func (c *cluster) asPostgres(args ...string) []string {
	if os.Geteuid() != 0 {
		return args
	}
	return append([]string{"runuser", "-u", "postgres", "--"}, args...)
}

func findPostgresBin(t testing.TB) string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi < vj
	})
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("PostgreSQL not found (initdb): `make test-cluster` installs Debian's postgresql package")
	return ""
}

func (c *cluster) startPostgres() {
	start := time.Now()
	c.pgBin = findPostgresBin(c.t)
	dir, err := os.MkdirTemp("", "eve-cluster-pg-")
	if err != nil {
		c.t.Fatal(err)
	}
	c.pgDir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			c.t.Fatalf("no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			c.t.Fatal(err)
		}
	}
	c.pgPort = freePort(c.t)
	data := filepath.Join(dir, "data")
	pg := func(args ...string) {
		argv := c.asPostgres(args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			c.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	pg(filepath.Join(c.pgBin, "initdb"), "-D", data, "-U", "temporal", "--auth=trust", "-E", "UTF8", "--no-sync")
	pg(filepath.Join(c.pgBin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c max_connections=300", c.pgPort, dir), "start")
	phase(c.t, fmt.Sprintf("PostgreSQL (%s) on 127.0.0.1:%d", filepath.Base(filepath.Dir(c.pgBin)), c.pgPort), start)
}

// psql runs a query as the temporal user and returns its rows (unaligned,
// fields separated by |).
func (c *cluster) psql(db, query string) [][]string {
	out := run(c.t, c.dir, os.Environ(), filepath.Join(c.pgBin, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(c.pgPort), "-U", "temporal", "-d", db, "-AtX", "-c", query)
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			rows = append(rows, strings.Split(l, "|"))
		}
	}
	return rows
}

// scriptEnv is the environment of deploy/temporal's scripts: the Temporal
// CLI and SQL tool on PATH under the names the admin-tools image has.
func (c *cluster) scriptEnv(extra ...string) []string {
	bin := filepath.Join(c.dir, "tools")
	os.MkdirAll(bin, 0o755)
	os.Symlink(c.cliBin, filepath.Join(bin, "temporal"))
	os.Symlink(c.sqlToolBin, filepath.Join(bin, "temporal-sql-tool"))
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + c.dir}
	return append(env, extra...)
}

// schemaDir is the server module's PostgreSQL schema directory.
func (c *cluster) schemaDir() string {
	out := run(c.t, c.dir, append(os.Environ(), "GOFLAGS=-mod=mod"), "go", "mod", "download", "-json", "go.temporal.io/server@"+serverVersion)
	var m struct{ Dir string }
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Dir == "" {
		c.t.Fatalf("go mod download go.temporal.io/server@%s: %v\n%s", serverVersion, err, out)
	}
	return filepath.Join(m.Dir, "schema", "postgresql", "v12")
}

// setupSchemas runs deploy/temporal/setup-postgres.sh, as compose's
// temporal-schema service does.
func (c *cluster) setupSchemas() {
	start := time.Now()
	out := run(c.t, c.root, c.scriptEnv(
		"POSTGRES_SEEDS=127.0.0.1", "DB_PORT="+strconv.Itoa(c.pgPort), "POSTGRES_USER=temporal", "POSTGRES_PWD=temporal",
		"TEMPORAL_SCHEMA_DIR="+c.schemaDir(),
	), "sh", filepath.Join(c.root, setupPostgresScript))
	if !strings.Contains(out, "schemas ready") {
		c.t.Fatalf("%s: %s", setupPostgresScript, out)
	}
	phase(c.t, "schemas (temporal, temporal_visibility)", start)
}

// --- Temporal server ----------------------------------------------------------

const serverConfig = `# Written by test/cluster: the reference topology's Temporal server.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.Shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:{{.PG}}"
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:{{.PG}}"
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
  frontend:
    rpc: {grpcPort: {{.FrontendGRPC}}, membershipPort: {{.FrontendMembership}}, bindOnLocalHost: true}
  history:
    rpc: {grpcPort: {{.HistoryGRPC}}, membershipPort: {{.HistoryMembership}}, bindOnLocalHost: true}
  matching:
    rpc: {grpcPort: {{.MatchingGRPC}}, membershipPort: {{.MatchingMembership}}, bindOnLocalHost: true}
  worker:
    rpc: {grpcPort: {{.WorkerGRPC}}, membershipPort: {{.WorkerMembership}}, bindOnLocalHost: true}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:{{.FrontendGRPC}}"
dcRedirectionPolicy:
  policy: noop
publicClient:
  hostPort: "127.0.0.1:{{.FrontendGRPC}}"
dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`

func (c *cluster) writeServerConfig() {
	c.serverRoot = filepath.Join(c.dir, "temporal")
	os.MkdirAll(filepath.Join(c.serverRoot, "config"), 0o755)
	vals := map[string]string{
		"Shards": strconv.Itoa(numHistoryShards), "PG": strconv.Itoa(c.pgPort),
		"DynamicConfig": filepath.Join(c.root, dynamicConfigFile),
	}
	for _, k := range []string{"FrontendGRPC", "FrontendMembership", "HistoryGRPC", "HistoryMembership", "MatchingGRPC", "MatchingMembership", "WorkerGRPC", "WorkerMembership"} {
		vals[k] = strconv.Itoa(freeLowPort(c.t))
	}
	c.frontend = "127.0.0.1:" + vals["FrontendGRPC"]
	cfg := serverConfig
	for k, v := range vals {
		cfg = strings.ReplaceAll(cfg, "{{."+k+"}}", v)
	}
	if err := os.WriteFile(filepath.Join(c.serverRoot, "config", "development.yaml"), []byte(cfg), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// startServer starts (or restarts) the Temporal server with all four
// services and waits until the frontend answers.
func (c *cluster) startServer() time.Duration {
	start := time.Now()
	c.server = startProc(c.t, c.logs, "temporal-server", os.Environ(), c.serverRoot, c.serverBin,
		"--root", c.serverRoot, "--config", "config", "--env", "development", "--allow-no-auth",
		"start", "--service", "frontend", "--service", "history", "--service", "matching", "--service", "worker")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if !c.server.alive() {
			c.t.Fatalf("temporal server exited:\n%s", c.server.tail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		hc, err := client.DialContext(ctx, client.Options{HostPort: c.frontend, Namespace: "temporal-system", Logger: quietLogger{}})
		if err == nil {
			_, err = hc.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
			hc.Close()
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("temporal server not ready at %s: %v\n%s", c.frontend, err, c.server.tail(30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start)
}

// createNamespace runs deploy/temporal/create-namespace.sh, as compose's
// temporal-namespace service does (namespace and eve's search attributes).
func (c *cluster) createNamespace() {
	start := time.Now()
	out := run(c.t, c.root, c.scriptEnv("TEMPORAL_ADDRESS="+c.frontend, "TEMPORAL_NAMESPACE="+namespace), "sh", filepath.Join(c.root, createNamespaceScript))
	if !strings.Contains(out, "ready") {
		c.t.Fatalf("%s: %s", createNamespaceScript, out)
	}
	tc, err := client.Dial(client.Options{HostPort: c.frontend, Namespace: namespace, Logger: quietLogger{}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.tc = tc
	ns, err := tc.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		c.t.Fatal(err)
	}
	c.nsID = ns.GetNamespaceInfo().GetId()
	phase(c.t, "namespace and search attributes", start)
}

// --- eve ------------------------------------------------------------------------

func (c *cluster) apiURL(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", c.apiPorts[i]) }

func (c *cluster) eveValues() map[string]string {
	return map[string]string{
		"TEMPORAL_ADDRESS": c.frontend, "TEMPORAL_NAMESPACE": namespace, "EVE_TASK_QUEUE": taskQueue,
		"EVE_ACTION_SECRET": c.secret, "EVE_PUBLIC_URL": c.apiURL(0), "EVE_PAYLOAD_STORE": "file:" + c.payloadDir,
		"EVE_JOBS_DIR": c.jobsDir, "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "",
		"EVE_API_KEY": c.apiKey,
	}
}

func (c *cluster) startWorker(i int) {
	if c.workerMetrics[i] == 0 {
		c.workerMetrics[i] = freePort(c.t)
	}
	v := c.eveValues()
	v["EVE_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", c.workerMetrics[i])
	name := fmt.Sprintf("worker-%d", i+1)
	// The topology's environment, plus slow_step's (test only): where its
	// markers go and the worker's name in them.
	env := append(envFor(c.t, workerEnvKeys, v), "EVE_CLUSTER_MARKERS="+c.markersDir, "EVE_CLUSTER_WORKER="+name)
	c.workers[i] = startProc(c.t, c.logs, name, env, c.dir, c.appBin, "worker")
}

func (c *cluster) startAPI(i int) {
	if c.apiPorts[i] == 0 {
		c.apiPorts[i] = freePort(c.t)
	}
	v := c.eveValues()
	v["EVE_ADDR"] = fmt.Sprintf("127.0.0.1:%d", c.apiPorts[i])
	c.apis[i] = startProc(c.t, c.logs, fmt.Sprintf("api-%d", i+1), envFor(c.t, apiEnvKeys, v), c.dir, c.appBin, "serve")
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.apiURL(i) + "/eve/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if !c.apis[i].alive() || time.Now().After(deadline) {
			c.t.Fatalf("API server %d not ready: %v\n%s", i+1, err, c.apis[i].tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPollers waits until n workers poll both of eve's task queue kinds.
func (c *cluster) waitPollers(n int) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := c.tc.WorkflowService().DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
				Namespace: namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: kind,
			})
			if err != nil || len(resp.GetPollers()) < n {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("fewer than %d pollers on task queue %q", n, taskQueue)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// --- the job runner -------------------------------------------------------------

// jobRunner completes run_report's jobs from the shared spool through their
// completion URLs (what cmd/jobrunner does), unless held.
type jobRunner struct {
	dir       string
	held      atomic.Bool
	completed atomic.Int64
	mu        sync.Mutex
	errs      []error
	cancel    context.CancelFunc
	done      chan struct{}
}

func newJobRunner(dir string) *jobRunner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &jobRunner{dir: dir, cancel: cancel, done: make(chan struct{})}
	os.MkdirAll(dir, 0o755)
	go r.loop(ctx)
	return r
}

func (r *jobRunner) stop() { r.cancel(); <-r.done }

// pending counts jobs spooled and not yet claimed.
func (r *jobRunner) pending() int {
	m, _ := filepath.Glob(filepath.Join(r.dir, "*"+demo.JobExt))
	return len(m)
}

func (r *jobRunner) loop(ctx context.Context) {
	defer close(r.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if r.held.Load() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(r.dir, "*"+demo.JobExt))
		for _, f := range files {
			claimed := strings.TrimSuffix(f, demo.JobExt) + demo.ClaimedExt
			if os.Rename(f, claimed) != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := r.complete(ctx, claimed)
				if err != nil && ctx.Err() == nil {
					r.mu.Lock()
					r.errs = append(r.errs, err)
					r.mu.Unlock()
				}
			}()
		}
	}
}

func (r *jobRunner) complete(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var job demo.ReportJob
	if err := json.Unmarshal(b, &job); err != nil {
		return fmt.Errorf("job %s: %w", path, err)
	}
	var in demo.ReportInput
	json.Unmarshal(job.Input, &in)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := actions.Complete(cctx, job.Action.Completion, demo.Report{Status: "succeeded", Detail: in.Name + ": 42 rows"}); err != nil {
		return fmt.Errorf("complete %s: %w", job.Action.ID, err)
	}
	r.completed.Add(1)
	return nil
}

func (r *jobRunner) errors() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// quietLogger silences the SDK client's logs (the server's restart makes
// them noisy on purpose).
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
