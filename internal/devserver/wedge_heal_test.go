package devserver_test

import (
	"context"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/devserver"
)

// Requests cancelled within a few milliseconds, many at once, wedge the dev
// server's SQLite connection (every query then fails with "interrupted
// (9)"); the server restarts itself with its state, and answers again.
func TestWedgedServerHeals(t *testing.T) {
	var log lockedBuffer
	srv, err := devserver.Start(context.Background(), devserver.Options{DBFile: filepath.Join(t.TempDir(), "t.db"), Tuning: devserver.TuningFast, Stderr: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	// A plain client, not Dial's: its cancellations reach the server.
	c, err := client.Dial(client.Options{HostPort: srv.Addr, Logger: devserver.WarnLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "w", TaskQueue: "nobody"}, "X"); err != nil {
		t.Fatal(err)
	}
	storm(c, 60*time.Second, func() bool { return srv.Heals() > 0 })
	if srv.Heals() == 0 {
		t.Skipf("the server did not wedge within a minute of cancelled requests (nothing to heal); its log:\n%s", tail(log.String()))
	}
	// The restarted server answers, with the workflow it had.
	deadline := time.Now().Add(60 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.DescribeWorkflowExecution(dctx, "w", "")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healed server does not answer: %v\n%s", err, tail(log.String()))
		}
		time.Sleep(200 * time.Millisecond) // polling a restarted server, not a barrier
	}
	if !strings.Contains(log.String(), "is wedged") || !strings.Contains(log.String(), "is back") {
		t.Fatalf("the heal is not in the server's log:\n%s", tail(log.String()))
	}
}

// Dial's clients keep their cancellations from the server: the same storm
// through one does not wedge it.
func TestShieldedClientsDoNotWedge(t *testing.T) {
	var log lockedBuffer
	srv, err := devserver.Start(context.Background(), devserver.Options{DBFile: filepath.Join(t.TempDir(), "t.db"), Tuning: devserver.TuningFast, Stderr: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := srv.Dial(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "w", TaskQueue: "nobody"}, "X"); err != nil {
		t.Fatal(err)
	}
	storm(c, 10*time.Second, func() bool { return srv.Heals() > 0 })
	if srv.Heals() > 0 || strings.Count(log.String(), "interrupted (9)") > 10 {
		t.Fatalf("shielded requests wedged the server (%d heals):\n%s", srv.Heals(), tail(log.String()))
	}
}

// storm describes workflow w from 16 goroutines with deadlines of up to
// 3 ms, for d or until stop.
func storm(c client.Client, d time.Duration, stop func() bool) {
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && !stop() {
				cctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.Intn(3000))*time.Microsecond)
				c.DescribeWorkflowExecution(cctx, "w", "")
				cancel()
			}
		}()
	}
	wg.Wait()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
