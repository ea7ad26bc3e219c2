package devserver_test

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/payloadstore"
)

func TestFindBinaryEnv(t *testing.T) {
	f := filepath.Join(t.TempDir(), "temporal")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(devserver.BinaryEnv, f)
	got, err := devserver.FindBinary()
	if err != nil || got != f {
		t.Fatalf("FindBinary() = %q, %v; want %q", got, err, f)
	}
	t.Setenv(devserver.BinaryEnv, filepath.Join(t.TempDir(), "missing"))
	if _, err := devserver.FindBinary(); !errors.Is(err, devserver.ErrBinaryNotFound) {
		t.Fatalf("FindBinary() with a missing $%s: err = %v", devserver.BinaryEnv, err)
	}
}

func TestFindBinaryModuleRoot(t *testing.T) {
	t.Setenv(devserver.BinaryEnv, "")
	root := t.TempDir()
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	_, err := devserver.FindBinary()
	if !errors.Is(err, devserver.ErrBinaryNotFound) || !strings.Contains(err.Error(), "make bin/temporal") {
		t.Fatalf("FindBinary() without bin/temporal: err = %v; want ErrBinaryNotFound telling to run make bin/temporal", err)
	}
	bin := filepath.Join(root, "bin", "temporal")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := devserver.FindBinary()
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir may sit behind a symlink; compare resolved paths.
	want, _ := filepath.EvalSymlinks(bin)
	if g, _ := filepath.EvalSymlinks(got); g != want {
		t.Fatalf("FindBinary() = %q; want %q", got, bin)
	}
}

func TestArgs(t *testing.T) {
	args := devserver.Args(devserver.Options{Port: 7999, DBFile: "/tmp/x.db", Tuning: devserver.TuningFast, Namespace: "eve", ExtraArgs: []string{"--x"}})
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"server start-dev", "--ip 127.0.0.1", "--port 7999", "--headless", "--db-filename /tmp/x.db",
		"--namespace eve", "--log-level warn", "--sqlite-pragma journal_mode=wal",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("Args() = %q; missing %q", joined, want)
		}
	}
	for _, kv := range devserver.FastDynamicConfig() {
		if !strings.Contains(joined, "--dynamic-config-value "+kv) {
			t.Errorf("Args() = %q; missing dynamic config %q", joined, kv)
		}
	}
	if args[len(args)-1] != "--x" {
		t.Errorf("ExtraArgs must come last (to override): %q", joined)
	}
	def := strings.Join(devserver.Args(devserver.Options{Port: 1, UI: true, UIPort: 2}), " ")
	if strings.Contains(def, "dynamic-config") || strings.Contains(def, "--headless") || !strings.Contains(def, "--ui-port 2") {
		t.Errorf("Args(default tuning, UI) = %q", def)
	}
	if !slices.Contains(devserver.FastDynamicConfig(), "history.transferProcessorMaxPollRPS=200") {
		t.Error("FastDynamicConfig lacks the transfer queue poll rate")
	}
}

func TestStartMissingBinary(t *testing.T) {
	_, err := devserver.Start(context.Background(), devserver.Options{BinPath: filepath.Join(t.TempDir(), "nope")})
	if err == nil {
		t.Fatal("Start with a missing binary succeeded")
	}
}

// TestRestartKeepsWorkflows starts a server with a SQLite file, starts a
// workflow no worker will run, restarts (gracefully, then by crash) and finds
// the workflow again.
func TestRestartKeepsWorkflows(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "state", "temporal.db")
	srv := devtest.Start(t, devserver.Options{DBFile: db})
	if !devserver.Reachable(ctx, srv.Addr) {
		t.Fatalf("Reachable(%s) = false right after Start", srv.Addr)
	}
	addr, pid := srv.Addr, srv.PID()
	if pid == 0 {
		t.Fatal("PID() = 0 for a running server")
	}

	c, err := srv.Dial(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "durable-1", TaskQueue: "nobody-polls"}, "NoSuchWorkflow", "hello")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	describe := func(step string) {
		t.Helper()
		c, err := srv.Dial(client.Options{})
		if err != nil {
			t.Fatalf("%s: dial: %v", step, err)
		}
		defer c.Close()
		d, err := c.DescribeWorkflowExecution(ctx, "durable-1", "")
		if err != nil {
			t.Fatalf("%s: DescribeWorkflowExecution: %v", step, err)
		}
		if got := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run.GetRunID() {
			t.Fatalf("%s: run ID %s, want %s", step, got, run.GetRunID())
		}
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Addr != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, srv.Addr)
	}
	if srv.PID() == pid || srv.PID() == 0 {
		t.Fatalf("Restart: PID %d (was %d)", srv.PID(), pid)
	}
	describe("after a graceful restart")

	// A crash (SIGKILL) must not lose committed state either.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if devserver.Reachable(ctx, srv.Addr) {
		t.Fatal("Reachable after Kill")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	describe("after a crash and restart")

	// Payloads live beside the SQLite file, as long as the server's state.
	if got, want := srv.PayloadStore().Location(), "file:"+filepath.Join(filepath.Dir(db), "payloads"); got != want {
		t.Errorf("PayloadStore().Location() = %q, want %q", got, want)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(db), "payloads")); err != nil {
		t.Errorf("the payload directory beside the SQLite file is gone after Stop: %v", err)
	}
	if devserver.Reachable(ctx, srv.Addr) {
		t.Fatal("Reachable after Stop")
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestDevtestStartKeepsStateInAFile: a test's private server keeps its state
// in a SQLite file unless the test asks for memory, since an in-memory server
// can lose its database under load (temporalio/temporal#3784).
func TestDevtestStartKeepsStateInAFile(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{})
	if srv.DBFile() == "" {
		t.Fatal("devtest.Start without a DBFile started an in-memory server")
	}
	if _, err := os.Stat(srv.DBFile()); err != nil {
		t.Fatalf("the server's SQLite file: %v", err)
	}
}

// TestInMemoryRestartForgets documents that an in-memory server restarts empty.
func TestInMemoryRestartForgets(t *testing.T) {
	ctx := context.Background()
	srv := devtest.StartInMemory(t, devserver.Options{Namespace: "eve-test"})
	if srv.Namespace != "eve-test" {
		t.Fatalf("Namespace = %q", srv.Namespace)
	}
	c := devtest.Client(t, srv)
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "gone", TaskQueue: "nobody-polls"}, "NoSuchWorkflow"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c2 := devtest.Client(t, srv)
	_, err := c2.DescribeWorkflowExecution(ctx, "gone", "")
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("DescribeWorkflowExecution after an in-memory restart: %v; want NotFound", err)
	}

	// An in-memory server's payloads go to a temporary directory that
	// survives Restart and goes with Stop.
	dir, ok := strings.CutPrefix(srv.PayloadStore().Location(), "file:")
	if !ok {
		t.Fatalf("PayloadStore().Location() = %q, want file:<temp dir>", srv.PayloadStore().Location())
	}
	if err := srv.PayloadStore().Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary payload directory %s is still there after Stop (%v)", dir, err)
	}
}

func TestReachableNothingThere(t *testing.T) {
	port, err := devserver.FreePort("")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if devserver.Reachable(context.Background(), "127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatal("Reachable on a free port")
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Reachable took %v", d)
	}
}

// TestServerDiesWithParent runs this test binary again as a child that starts
// a server and then panics, and checks that the server does not outlive it.
func TestServerDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux-only")
	}
	if os.Getenv("DEVSERVER_TEST_CHILD") == "1" {
		// The parent's temp dir holds the payloads: a panicking child
		// removes no temporary directory of its own.
		store, err := payloadstore.Open(context.Background(), "file:"+os.Getenv("DEVSERVER_TEST_PAYLOADS"))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		srv, err := devserver.Start(context.Background(), devserver.Options{PayloadStore: store})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		fmt.Printf("PID %d\n", srv.PID())
		panic("child test panics with a running server")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithParent$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DEVSERVER_TEST_CHILD=1", "DEVSERVER_TEST_PAYLOADS="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "PID "); ok {
			pid, _ = strconv.Atoi(p)
		}
		if strings.HasPrefix(line, "ERR ") {
			t.Fatalf("child: %s", line)
		}
	}
	_ = cmd.Wait() // the child panicked: a non-zero exit is expected
	if pid == 0 {
		t.Fatal("the child did not report a server PID")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Signal 0 checks existence; a zombie (not yet reaped by init) counts as gone.
		err := syscall.Kill(pid, 0)
		if err != nil || isZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("server pid %d outlived its parent by 10 s", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// The repository's bin/temporal runs its dev server on a SQLite driver that
// recovers from an interrupted operation (test/temporal-cli/go.mod): with
// modernc.org/sqlite v1.34.1, which `go install` of the CLI takes, one could
// leave the server's only connection interrupted for good, and every later
// request failed.
func TestBuiltCLISQLiteDriver(t *testing.T) {
	if os.Getenv(devserver.BinaryEnv) != "" {
		t.Skipf("$%s names the CLI: it may be built elsewhere", devserver.BinaryEnv)
	}
	bin, err := devserver.FindBinary()
	if err != nil {
		t.Skipf("no bin/temporal: %v", err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("the build of %s: %v", bin, err)
	}
	for _, d := range info.Deps {
		if d.Path == "modernc.org/sqlite" {
			if !atLeast(d.Version, 1, 44, 3) {
				t.Fatalf("%s runs on modernc.org/sqlite %s; want v1.44.3 or later: rebuild it with `rm bin/temporal && make bin/temporal`", bin, d.Version)
			}
			return
		}
	}
	t.Fatalf("%s was built without modernc.org/sqlite", bin)
}

// atLeast reports whether version v (vMAJOR.MINOR.PATCH) is at least
// major.minor.patch.
func atLeast(v string, major, minor, patch int) bool {
	var got [3]int
	if _, err := fmt.Sscanf(v, "v%d.%d.%d", &got[0], &got[1], &got[2]); err != nil {
		return false
	}
	return slices.Compare(got[:], []int{major, minor, patch}) >= 0
}
