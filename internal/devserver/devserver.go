// Package devserver starts, stops and restarts a local Temporal dev server
// (`temporal server start-dev` from the Temporal CLI, pinned at v1.5.1, dev server
// v1.29.1) for `eve dev`, tests and benchmarks.
//
// The server is a separate binary built from the Go module proxy into ./bin
// (`make bin/temporal`, as test/temporal-cli/go.mod pins it: the CLI with a
// newer SQLite driver); this package never downloads anything. Embedding the
// server as a Go library does not build beside SDK v1.51 (see docs/architecture.md).
//
// Every server started here runs in its own process group and, on Linux, is
// killed by the kernel when the process that started it dies (Pdeathsig), so a
// test binary that panics or times out never leaves a server behind.
package devserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/eve-temporal/eve/payloadstore"
)

// BinaryEnv names the environment variable that overrides where the Temporal CLI is.
const BinaryEnv = "EVE_TEMPORAL_BIN"

// PinnedCLIVersion is the Temporal CLI version `make bin/temporal` installs.
const PinnedCLIVersion = "v1.5.1"

// ErrBinaryNotFound is returned (wrapped) by FindBinary when no Temporal CLI is found.
var ErrBinaryNotFound = errors.New("temporal CLI not found")

// FindBinary returns the Temporal CLI to run: $EVE_TEMPORAL_BIN if set, else
// bin/temporal in the module root (the nearest directory at or above the working
// directory that holds go.mod).
func FindBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrBinaryNotFound, BinaryEnv, p, err)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	// The nearest module root's bin/temporal, else an enclosing module's
	// (an app in examples/ of the eve repository uses the repository's),
	// else temporal on PATH.
	var firstErr error
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			bin := filepath.Join(dir, "bin", "temporal")
			if st, err := os.Stat(bin); err == nil && !st.IsDir() {
				return bin, nil
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("%w at %s: run `make bin/temporal` (builds the pinned Temporal CLI %s from the Go module proxy), or set %s",
					ErrBinaryNotFound, bin, PinnedCLIVersion, BinaryEnv)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%w: no go.mod at or above %s to find bin/temporal in: run `make bin/temporal` (builds the pinned Temporal CLI %s from the Go module proxy) in the eve repository, or set %s",
		ErrBinaryNotFound, wd, PinnedCLIVersion, BinaryEnv)
}

// Tuning selects the dynamic config the server starts with.
type Tuning int

const (
	// TuningDefault leaves the dev server's own defaults alone (what a
	// production cluster starts with before its operators tune it).
	TuningDefault Tuning = iota
	// TuningFast applies FastDynamicConfig (and, with a DBFile, FastSQLitePragmas):
	// the settings eve picks for its embedded default. See docs/performance.md.
	TuningFast
)

func (t Tuning) String() string {
	switch t {
	case TuningDefault:
		return "default"
	case TuningFast:
		return "fast"
	}
	return "Tuning(" + strconv.Itoa(int(t)) + ")"
}

// FastDynamicConfig returns the `--dynamic-config-value` KEY=VALUE pairs that
// TuningFast passes to the dev server, in a stable order. docs/performance.md
// has the measurements behind each one.
func FastDynamicConfig() []string {
	return []string{
		// The history service's transfer-queue reader polls at most 20 times a
		// second by default, so every task going through the transfer queue
		// (activity tasks, workflow tasks after an activity completes) waited up
		// to 50 ms.
		"history.transferProcessorMaxPollRPS=200",
		// Same limit for the timer queue (timers, timeouts, retries with backoff).
		"history.timerProcessorMaxPollRPS=200",
		// One partition per task queue: with the default 4, a task and the poller
		// waiting for it often sit on different partitions and meet only after
		// forwarding, which shows as multi-second p99 stalls once the reader is fast.
		"matching.numTaskqueueReadPartitions=1",
		"matching.numTaskqueueWritePartitions=1",
		// Activities scheduled by a workflow task may be handed back to the
		// worker in the workflow-task-completed response ("eager activity
		// execution"), skipping the transfer queue and matching entirely.
		"system.enableActivityEagerExecution=true",
	}
}

// FastSQLitePragmas returns the `--sqlite-pragma` KEY=VALUE pairs TuningFast
// adds when the server keeps its state in a file (Options.DBFile): a
// write-ahead log, fsync'ed at checkpoints only. A crash of the server process
// loses nothing committed; a power loss may lose the last transactions, never
// the file. In-memory servers ignore them.
func FastSQLitePragmas() []string {
	return []string{
		"journal_mode=wal",
		"synchronous=normal",
	}
}

// Options configures Start.
type Options struct {
	// BinPath is the Temporal CLI; "" means FindBinary().
	BinPath string
	// Host is the IP the frontend (and UI) bind to; default 127.0.0.1.
	Host string
	// Port is the frontend gRPC port; 0 picks a free port.
	Port int
	// UI enables the Web UI (the server runs --headless otherwise).
	UI bool
	// UIPort is the Web UI port; 0 picks a free port (when UI is set).
	UIPort int
	// DBFile keeps the server state in this SQLite file so it survives restarts;
	// "" means in-memory.
	DBFile string
	// Namespace is created at launch (besides "default") and used by Dial;
	// "" means "default".
	Namespace string
	// Tuning selects the dynamic config (TuningDefault or TuningFast).
	Tuning Tuning
	// Stdout and Stderr receive the server's output; nil discards it (the last
	// lines of stderr are still kept for error messages, see Server.Logs).
	Stdout, Stderr io.Writer
	// LogLevel is the server's --log-level; default "warn".
	LogLevel string
	// ExtraArgs are appended to `temporal server start-dev ...` (for example
	// more "--dynamic-config-value", "k=v" pairs, which override TuningFast's).
	ExtraArgs []string
	// StartTimeout bounds how long Start waits for the frontend; default 60 s.
	StartTimeout time.Duration
	// PayloadStore receives the payloads that clients from Dial offload (and
	// is what Server.PayloadStore returns for agents and subprocesses). nil
	// means a fresh file store: <dir of DBFile>/payloads with a DBFile (so
	// it lives as long as the server's state), else a temporary directory
	// removed by Stop.
	PayloadStore payloadstore.Store
}

// Server is a running dev server started by Start.
type Server struct {
	// Addr is the frontend's host:port (TEMPORAL_ADDRESS).
	Addr string
	// UIAddr is the Web UI's http://host:port, or "" when headless.
	UIAddr string
	// Namespace is the namespace Dial uses.
	Namespace string

	opts Options // resolved: BinPath, Host, Port, UIPort set

	store    payloadstore.Store
	storeTmp string // removed by Stop

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	waitErr error
	logs    *ringBuffer
	// healing is held while a wedged server restarts (wedge.go); heals
	// counts those restarts; stopped: Stop was called, nothing restarts.
	healing sync.Mutex
	heals   int
	stopped bool
}

// Start runs `temporal server start-dev` with opts and waits until its frontend
// answers (and the namespace exists). The caller must Stop the server.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.BinPath == "" {
		bin, err := FindBinary()
		if err != nil {
			return nil, err
		}
		opts.BinPath = bin
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.DBFile != "" {
		abs, err := filepath.Abs(opts.DBFile)
		if err != nil {
			return nil, err
		}
		opts.DBFile = abs
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("devserver: creating the directory for %s: %w", abs, err)
		}
	}
	s := &Server{Namespace: opts.Namespace, logs: newRingBuffer(64 << 10), store: opts.PayloadStore}
	if s.store == nil {
		var spec string
		if opts.DBFile != "" {
			spec = "file:" + filepath.Join(filepath.Dir(opts.DBFile), "payloads")
		} else {
			dir, err := os.MkdirTemp("", "eve-payloads-")
			if err != nil {
				return nil, fmt.Errorf("devserver: a directory for payloads: %w", err)
			}
			s.storeTmp, spec = dir, "file:"+dir
		}
		store, err := payloadstore.Open(ctx, spec)
		if err != nil {
			s.removeStoreTmp()
			return nil, fmt.Errorf("devserver: %w", err)
		}
		s.store = store
	}

	// A port we picked can be taken between the check and the server's bind
	// (another package's tests pick too); pick again a few times.
	pickPort, pickUI := opts.Port == 0, opts.UI && opts.UIPort == 0
	var lastErr error
	for attempt := 0; attempt < 4; attempt++ {
		o := opts
		var err error
		if pickPort {
			if o.Port, err = FreePort(o.Host); err != nil {
				return nil, err
			}
		}
		if pickUI {
			if o.UIPort, err = FreePort(o.Host); err != nil {
				return nil, err
			}
		}
		s.opts = o
		lastErr = s.start(ctx)
		if lastErr == nil {
			return s, nil
		}
		if ctx.Err() != nil || !(pickPort || pickUI) || !s.exitedEarly() || !s.portProblem() {
			break
		}
	}
	s.removeStoreTmp()
	return nil, lastErr
}

// Args returns the command line (without the binary) Start runs for opts,
// whose ports must be set. Exposed for `eve dev --print-command` and docs.
func Args(opts Options) []string {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	args := []string{"server", "start-dev",
		"--ip", host,
		"--port", strconv.Itoa(opts.Port),
	}
	if opts.UI {
		if opts.UIPort != 0 {
			args = append(args, "--ui-port", strconv.Itoa(opts.UIPort))
		}
	} else {
		args = append(args, "--headless")
	}
	if opts.DBFile != "" {
		args = append(args, "--db-filename", opts.DBFile)
	}
	if opts.Namespace != "" && opts.Namespace != "default" {
		args = append(args, "--namespace", opts.Namespace)
	}
	if opts.Tuning == TuningFast {
		for _, kv := range FastDynamicConfig() {
			args = append(args, "--dynamic-config-value", kv)
		}
		if opts.DBFile != "" {
			for _, kv := range FastSQLitePragmas() {
				args = append(args, "--sqlite-pragma", kv)
			}
		}
	}
	level := opts.LogLevel
	if level == "" {
		level = "warn"
	}
	args = append(args, "--log-level", level)
	return append(args, opts.ExtraArgs...)
}

func (s *Server) start(ctx context.Context) error {
	o := s.opts
	s.Addr = net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	s.UIAddr = ""
	if o.UI {
		s.UIAddr = "http://" + net.JoinHostPort(o.Host, strconv.Itoa(o.UIPort))
	}

	// The server must outlive ctx (ctx only bounds the start), so no CommandContext.
	cmd := exec.Command(o.BinPath, Args(o)...)
	cmd.Stdout = writerOrDiscard(o.Stdout)
	cmd.Stderr = s.stderr(o)
	cmd.SysProcAttr = sysProcAttr(o.DBFile != "")
	cmd.WaitDelay = 2 * time.Second // don't hang on pipes kept open by grandchildren
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Linux sends the parent-death signal when the *thread* that forked the
		// server exits, and Go ends a thread when a goroutine locked to it
		// returns. Fork from a locked thread that lives exactly as long as the
		// server, so no unrelated goroutine can end it early.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.mu.Lock()
		s.cmd, s.done, s.waitErr = cmd, done, nil
		s.mu.Unlock()
		started <- nil
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("devserver: starting %s: %w", o.BinPath, err)
	}

	wctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := s.waitReady(wctx, done); err != nil {
		_ = s.stop()
		return fmt.Errorf("devserver: %s %s: %w%s", o.BinPath, strings.Join(Args(o), " "), err, s.LogTail(4000))
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, done <-chan struct{}) error {
	var last error
	for {
		select {
		case <-done:
			s.mu.Lock()
			err := s.waitErr
			s.mu.Unlock()
			return fmt.Errorf("server exited before it was ready (%v)", err)
		default:
		}
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(attempt, s.Addr, s.Namespace)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("frontend at %s not ready: %v (%w)", s.Addr, last, ctx.Err())
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready checks the frontend's health and that the namespace exists.
func ready(ctx context.Context, addr, namespace string) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	return err
}

// Reachable reports whether a Temporal frontend answers a health check at addr
// within a second (or ctx's deadline, if sooner).
func Reachable(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err == nil
}

// Dial returns a client for this server, with HostPort and (unless set)
// Namespace, Logger (WarnLogger) and ExternalStorage (to PayloadStore)
// filled in. Its requests are shielded from their callers' cancellation
// (shieldCancellation), which can wedge the server.
func (s *Server) Dial(opts client.Options) (client.Client, error) {
	opts.HostPort = s.Addr
	if len(opts.ExternalStorage.Drivers) == 0 {
		opts.ExternalStorage = payloadstore.ExternalStorage(s.store)
	}
	if opts.Namespace == "" {
		opts.Namespace = s.Namespace
	}
	if opts.Logger == nil {
		opts.Logger = WarnLogger()
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, ShieldOption())
	return client.Dial(opts)
}

// PayloadStore is the store Dial's clients offload large payloads to. Give
// it to workers (agent.Host.Store) and, as EVE_PAYLOAD_STORE=Location(), to
// the eve processes started against this server.
func (s *Server) PayloadStore() payloadstore.Store { return s.store }

// PayloadStoreEnv is payloadstore.EnvVar=PayloadStore().Location(), for the
// environment of subprocesses.
func (s *Server) PayloadStoreEnv() string {
	return payloadstore.EnvVar + "=" + s.store.Location()
}

func (s *Server) removeStoreTmp() {
	if s.storeTmp != "" {
		os.RemoveAll(s.storeTmp)
		s.storeTmp = ""
	}
}

// Options returns the options the server runs with (ports and binary resolved).
func (s *Server) Options() Options { return s.opts }

// DBFile returns the SQLite file the server keeps its state in, or "" (in-memory).
func (s *Server) DBFile() string { return s.opts.DBFile }

// PID returns the server process's id, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.done:
		return 0
	default:
	}
	return s.cmd.Process.Pid
}

// Logs returns the last 64 KiB the server wrote to stderr.
func (s *Server) Logs() string { return s.logs.String() }

// Stop ends the server: SIGTERM, then SIGKILL if it has not exited after 10 s.
// Graceful stop leaves a DBFile consistent, so Start with the same DBFile
// continues where it left off. Stop on a stopped server is a no-op. It
// removes the temporary payload directory (see Options.PayloadStore).
func (s *Server) Stop() error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.healing.Lock() // a restart of a wedged server finishes first
	defer s.healing.Unlock()
	err := s.stop()
	s.mu.Lock()
	s.removeStoreTmp()
	s.mu.Unlock()
	return err
}

func (s *Server) stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = terminate(cmd.Process)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = kill(cmd.Process)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("devserver: pid %d did not exit after SIGKILL", cmd.Process.Pid)
	}
	return fmt.Errorf("devserver: pid %d ignored SIGTERM for 10 s and was killed", cmd.Process.Pid)
}

// Restart stops the server and starts it again on the same ports with the same
// options. With a DBFile, workflows and their histories survive; in-memory
// servers come back empty.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.stop(); err != nil {
		return err
	}
	var err error
	// The old process's listeners are closed once it exited; retry briefly in
	// case the kernel has not released a port yet.
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.start(ctx); err == nil || ctx.Err() != nil || !s.portProblem() {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// Kill ends the server with SIGKILL at once, as a crash would. Tests use it to
// prove that state in a DBFile survives a crash, not only a graceful stop.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = kill(cmd.Process)
	<-done
	return nil
}

// Done returns a channel closed when the current server process exits.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *Server) exitedEarly() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (s *Server) portProblem() bool {
	l := strings.ToLower(s.logs.String())
	return strings.Contains(l, "address already in use") || strings.Contains(l, "port") && strings.Contains(l, "in use") ||
		strings.Contains(l, "can't set")
}

// LogTail is the end of the server's stderr, at most n bytes, after a
// newline and a heading: for error messages ("" when it logged nothing).
func (s *Server) LogTail(n int) string {
	t := strings.TrimSpace(s.logs.String())
	if t == "" {
		return ""
	}
	if len(t) > n {
		t = "..." + t[len(t)-n:]
	}
	return "\nthe dev server's stderr ends:\n" + t
}

// FreePort returns a TCP port on host that nothing listens on right now. It
// picks from the kernel's ephemeral range by binding port 0.
func FreePort(host string) (int, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: finding a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ringBuffer keeps the last max bytes written to it.
type ringBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newRingBuffer(max int) *ringBuffer { return &ringBuffer{max: max} }

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(p), nil
}

func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.Clone(r.buf))
}

// WarnLogger returns an SDK logger that writes warnings and errors to stderr
// and drops the rest (the SDK's default logger prints every worker start).
func WarnLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// quietLogger drops the SDK client's logs (readiness probes fail by design).
type quietLogger struct{}

func (quietLogger) Debug(string, ...interface{}) {}
func (quietLogger) Info(string, ...interface{})  {}
func (quietLogger) Warn(string, ...interface{})  {}
func (quietLogger) Error(string, ...interface{}) {}

var _ log.Logger = quietLogger{}
