// Package devtest gives tests a real Temporal dev server.
//
// Share one server between all tests of a package (started lazily, on the
// first Shared call, and stopped when the package's tests end):
//
//	func TestMain(m *testing.M) { devtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		srv := devtest.Shared(t)
//		c := devtest.Client(t, srv)
//		tq := devtest.TaskQueue(t) // unique per test, so tests don't steal each other's tasks
//		...
//	}
//
// or start a private one (stopped by t.Cleanup), e.g. to restart it (its
// state is kept in a SQLite file, so it survives the restart):
//
//	srv := devtest.Start(t, devserver.Options{})
//
// Every server gets its own free ports, so packages tested in parallel
// (`go test ./...`) don't collide. Servers use devserver.TuningFast unless the
// options say otherwise. When the Temporal CLI is missing, tests fail with the
// command that builds it.
package devtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/devserver"
)

// Option adjusts the options of the shared server (see Main).
type Option func(*devserver.Options)

var (
	sharedMu   sync.Mutex
	sharedOpts = devserver.Options{Tuning: devserver.TuningFast}
	shared     *devserver.Server
	sharedDir  string // the shared server's SQLite file lives here
	sharedErr  error
	mainUsed   bool
)

// Main runs the package's tests (m.Run) and then stops the shared server, if
// a test started one, and exits. Call it from TestMain. opts adjust the shared
// server's options (default: a SQLite file in a temporary directory of stateRoot,
// devserver.TuningFast, free ports).
//
// The file, not the dev server's in-memory default: an in-memory server
// loses its database now and then under load (every request then fails with
// "Namespace default is not found"; temporalio/temporal#3784), and a
// package's shared server takes minutes of load.
func Main(m *testing.M, opts ...Option) {
	sharedMu.Lock()
	for _, o := range opts {
		o(&sharedOpts)
	}
	mainUsed = true
	sharedMu.Unlock()

	code := m.Run()

	sharedMu.Lock()
	srv, dir := shared, sharedDir
	shared = nil
	sharedMu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devtest: stopping the shared Temporal dev server:", err)
		}
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Shared returns the package's shared dev server, starting it on first use.
// Tests that use it must not stop or restart it; use Start for that. Without
// Main the server is still shared, and on Linux dies with the test binary.
func Shared(t testing.TB) *devserver.Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		opts := sharedOpts
		if err := logTo(&opts); err != nil {
			t.Fatalf("devtest: %v", err)
		}
		if opts.DBFile == "" {
			sharedDir, sharedErr = os.MkdirTemp(stateRoot(), "eve-devtest-")
			opts.DBFile = filepath.Join(sharedDir, "temporal.db")
		}
		if sharedErr == nil {
			shared, sharedErr = devserver.Start(ctx, opts)
		}
	}
	if sharedErr != nil {
		t.Fatalf("devtest: the shared Temporal dev server did not start: %v", sharedErr)
	}
	if !mainUsed {
		t.Logf("devtest: the shared dev server at %s is not stopped at the end; call devtest.Main from TestMain", shared.Addr)
		mainUsed = true // log once
	}
	return shared
}

// logTo sends the shared server's log to the file EVE_DEVTEST_LOG names (at
// EVE_DEVTEST_LOG_LEVEL, default "warn"), for a failure that only the
// server can explain. The file is appended to: packages tested in parallel
// may share it.
func logTo(opts *devserver.Options) error {
	path := os.Getenv("EVE_DEVTEST_LOG")
	if path == "" || opts.Stderr != nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("EVE_DEVTEST_LOG: %w", err)
	}
	// Never closed: the server writes to it until the package's tests end.
	opts.Stderr, opts.Stdout = f, f
	if lvl := os.Getenv("EVE_DEVTEST_LOG_LEVEL"); lvl != "" {
		opts.LogLevel = lvl
	}
	return nil
}

// stateRoot is where test servers keep their SQLite files: /dev/shm (a
// tmpfs) where there is one, so a commit never waits on the disk. A CI run
// whose disk was busy writing back the build caches stalled a dev server's
// SQLite for seconds, and Temporal reports a namespace lookup that timed
// out as "Namespace default is not found" (its nsregistry says so in a
// TODO). The state still survives a restart of the server.
func stateRoot() string {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp(shm, "eve-devtest-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return shm
		}
	}
	return os.TempDir()
}

// stateDir is a directory of stateRoot removed when the test ends.
func stateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(stateRoot(), "eve-devtest-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Start starts a private dev server for this test and stops it in t.Cleanup.
// A zero opts.Tuning (TuningDefault) is taken as devserver.TuningFast, since
// tests want speed; use StartDefault for the server's own untuned defaults.
// An empty opts.DBFile is a SQLite file in stateDir, for the reason Main
// gives; StartInMemory is the dev server's in-memory default.
func Start(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	if opts.Tuning == devserver.TuningDefault {
		opts.Tuning = devserver.TuningFast
	}
	if opts.DBFile == "" {
		opts.DBFile = filepath.Join(stateDir(t), "temporal.db")
	}
	return start(t, opts)
}

// StartDefault is Start with the server's own (untuned) defaults; its state,
// too, is kept in a file.
func StartDefault(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	opts.Tuning = devserver.TuningDefault
	if opts.DBFile == "" {
		opts.DBFile = filepath.Join(stateDir(t), "temporal.db")
	}
	return start(t, opts)
}

// StartInMemory is Start with the server's state in memory, for tests of
// what that means (it is gone after a restart). Keep such tests short: see
// Main.
func StartInMemory(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	if opts.Tuning == devserver.TuningDefault {
		opts.Tuning = devserver.TuningFast
	}
	opts.DBFile = ""
	return start(t, opts)
}

func start(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		t.Fatalf("devtest: the Temporal dev server did not start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("devtest: stopping the Temporal dev server: %v", err)
		}
	})
	return srv
}

// Client dials srv and closes the client in t.Cleanup.
func Client(t testing.TB, srv *devserver.Server) client.Client {
	t.Helper()
	c, err := srv.Dial(client.Options{})
	if err != nil {
		t.Fatalf("devtest: dialing the Temporal dev server at %s: %v", srv.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

var (
	tqSeq     atomic.Int64
	tqInvalid = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)
)

// TaskQueue returns a task queue name unique to this test (and this process),
// so tests sharing a server never pick up each other's tasks.
func TaskQueue(t testing.TB) string {
	name := tqInvalid.ReplaceAllString(t.Name(), "_")
	if len(name) > 100 {
		name = name[:100]
	}
	return strings.Trim(name, "_") + fmt.Sprintf("-%d-%d", os.Getpid(), tqSeq.Add(1))
}
