package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/payloadstore/s3test"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// keyLog remembers the keys a process put, and those it got before it had
// put them itself (written by another process).
type keyLog struct {
	payloadstore.Store
	mu           sync.Mutex
	put, foreign map[string]bool
}

func (k *keyLog) Put(ctx context.Context, key string, data []byte) error {
	err := k.Store.Put(ctx, key, data)
	if err == nil {
		k.mu.Lock()
		k.put[key] = true
		k.mu.Unlock()
	}
	return err
}

func (k *keyLog) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := k.Store.Get(ctx, key)
	if err == nil {
		k.mu.Lock()
		if !k.put[key] {
			k.foreign[key] = true
		}
		k.mu.Unlock()
	}
	return b, err
}

// An API server (`eve serve`, a subprocess) and a worker (this process)
// share an S3 payload store through EVE_PAYLOAD_STORE: a message too large
// for history goes from the API server to the worker through the store,
// and its message.received event comes back to the API server's stream
// the same way.
func TestPayloadStoreAcrossProcesses(t *testing.T) {
	s3 := s3test.Start(t)
	s3.SetEnv(t)
	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base, err := payloadstore.Open(ctx, s3.Spec("e2e"))
	if err != nil {
		t.Fatal(err)
	}
	store := &keyLog{Store: base, put: map[string]bool{}, foreign: map[string]bool{}}

	// The worker, in this process.
	tq := devtest.TaskQueue(t)
	c, err := srv.Dial(tclient.Options{ExternalStorage: payloadstore.ExternalStorage(store)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, tq, worker.Options{})
	if err := agent.Register(w, a, agent.Host{Store: store}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The API server, in its own process, told the store by EVE_PAYLOAD_STORE.
	bin := eveBinary(t)
	port, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	sctx, stopServe := context.WithCancel(context.Background())
	cmd := exec.CommandContext(sctx, bin, "serve", "--address", srv.Addr, "--namespace", srv.Namespace,
		"--task-queue", tq, "--addr", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), s3.Env()...)
	cmd.Env = append(cmd.Env, payloadstore.EnvVar+"="+store.Location(), "EVE_API_KEY=", "EVE_API_KEYS_FILE=")
	var logs bytes.Buffer
	var logMu sync.Mutex
	cmd.Stdout = lockedWriter{&logMu, &logs}
	cmd.Stderr = lockedWriter{&logMu, &logs}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stopServe()
		<-exited
		if t.Failed() {
			logMu.Lock()
			t.Logf("eve serve output:\n%s", logs.String())
			logMu.Unlock()
		}
	}()
	api := client.New("http://" + addr)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if h, err := api.Health(ctx); err == nil && h.OK {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("eve serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("eve serve did not answer /eve/v1/health within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A message well above the offload threshold (and as large as a
	// session accepts).
	size := min(300<<10, signals.MaxMessageBytes)
	msg := strings.Repeat("0123456789abcdef", size/16)
	turn, err := api.SendAndWait(ctx, "", msg, nil)
	if err != nil {
		t.Fatalf("send a %d-byte message: %v", len(msg), err)
	}
	if turn.Status != client.TurnCompleted {
		t.Fatalf("turn = %+v", turn)
	}
	evs, _, err := api.Events(ctx, turn.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ev := range evs {
		if ev.Type != protocol.MessageReceived {
			continue
		}
		var d protocol.MessageReceivedData
		if err := ev.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Message != msg {
			t.Fatalf("message.received holds %d bytes, not the %d-byte message sent", len(d.Message), len(msg))
		}
		found = true
	}
	if !found {
		t.Fatalf("no message.received event in %s", eventTypes(evs))
	}

	// The worker read objects it did not write: the API server wrote them.
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.foreign) == 0 {
		t.Fatalf("the worker read no object the API server wrote (it wrote %d objects itself)", len(store.put))
	}
	if len(store.put) == 0 {
		t.Fatal("the worker wrote nothing to the store")
	}
}

func eventTypes(evs []protocol.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Type)
	}
	return b.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
