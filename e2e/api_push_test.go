package e2e

// Streams by push (issue 14): idle streams make no queries; an answer
// posted to one API server reaches a stream on another through the
// PostgreSQL bus; a burst of creates against absent workers is never a 5xx.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/notify/pgtest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// openStream follows a session's stream from start; events arrive on the
// channel until ctx ends, and each blank line (the first line, then
// heartbeats) as an event of type "".
func openStream(t *testing.T, ctx context.Context, base, key, id string, start int) <-chan protocol.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/eve/v1/session/%s/stream?startIndex=%d", base, id, start), nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	ch := make(chan protocol.Event, 1000)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				ch <- protocol.Event{}
				continue
			}
			var e protocol.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				ch <- e
			}
		}
	}()
	return ch
}

// waitEvent reads ch until an event of type typ (or fails after d).
func waitEvent(t *testing.T, ch <-chan protocol.Event, typ string, d time.Duration) protocol.Event {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-ch:
			if e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within %s", typ, d)
		}
	}
}

// Idle open streams cost no query: the API server's client counts
// QueryWorkflow calls while they idle. A message still streams at once.
func TestAPIIdleStreamsMakeNoQueries(t *testing.T) {
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	var queries atomic.Int64
	c, err := env.Server.Dial(client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(sessions.CountQueries(&queries))}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	svc := &sessions.Service{Client: c, TaskQueue: env.TaskQueue}
	e := newAPIEnv(t, env, func(o *api.Options) { o.Sessions = svc })
	ctx := e.Ctx(60 * time.Second)
	var streams []<-chan protocol.Event
	var idsOpen []string
	for range 5 {
		id, err := e.C.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idsOpen = append(idsOpen, id)
		for range 2 {
			ch := openStream(t, ctx, e.URL, "", id, 0)
			waitEvent(t, ch, protocol.SessionStarted, 10*time.Second)
			streams = append(streams, ch)
		}
	}
	// Settle (a feed may still re-read after its first notification),
	// then nothing is asked of Temporal while the streams idle.
	prev := queries.Load()
	for quiet, deadline := 0, time.Now().Add(60*time.Second); quiet < 2; {
		time.Sleep(time.Second)
		if n := queries.Load(); n == prev {
			quiet++
		} else {
			prev, quiet = n, 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle streams still query Temporal after 60 s (%d queries)", prev)
		}
	}
	time.Sleep(3 * time.Second)
	if n := queries.Load() - prev; n != 0 {
		t.Fatalf("%d queries while 10 streams idled for 3 s, want 0", n)
	}
	// A message reaches both streams of its session.
	if _, err := e.C.Send(ctx, idsOpen[0], "hello"); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, streams[0], protocol.TurnCompleted, 20*time.Second)
	waitEvent(t, streams[1], protocol.TurnCompleted, 20*time.Second)
}

// Two API servers over one dev server, workers and servers joined by the
// PostgreSQL bus: an answer posted to one reaches a stream on the other.
// Only a notification can bring it there: B's feed never polls while a bus
// tells it of changes, so the wait's bound is for a loaded machine, and
// the time it took is logged.
func TestAPITwoServersPostgres(t *testing.T) {
	url := pgtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bus := func() notify.Bus {
		b, err := notify.OpenPostgres(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(a, agent.Host{Notifier: bus()})
	busA, busB := bus(), bus()
	srvA := newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys; o.Bus = busA })
	srvB := newAPIEnv(t, env, func(o *api.Options) {
		o.Keys = apiTestKeys
		o.Bus = busB
		o.HeartbeatInterval = 50 * time.Millisecond
	})
	alice := srvA.as("key-alice")
	tctx := srvA.Ctx(60 * time.Second)
	turn := parkOver(t, tctx, alice, "", "refund ch_1 for 10")
	evs, _, err := srvB.as("key-alice").Events(tctx, turn.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	onB := openStream(t, tctx, srvB.URL, "key-alice", turn.SessionID, len(evs))
	// A stream writes heartbeats only once it is subscribed to B's feed:
	// the first blank line opens the response, the second is a heartbeat.
	waitEvent(t, onB, "", 10*time.Second)
	waitEvent(t, onB, "", 10*time.Second)
	_, err = alice.Respond(tctx, turn.SessionID, protocol.InputResponse{RequestID: turn.Open[0].RequestID, OptionID: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	posted := time.Now()
	waitEvent(t, onB, protocol.InputResolved, 30*time.Second)
	t.Logf("answer posted to A → stream on B: %s", time.Since(posted))
	waitEvent(t, onB, protocol.TurnCompleted, 10*time.Second)
}

// A burst of 1,000 creates at concurrency 100 with no worker on the task
// queue: every answer is 2xx, 429 or 503 (with Retry-After), none after
// the request deadline.
func TestAPIOverloadNever5xx(t *testing.T) {
	env := evetest.New(t) // no worker
	e := newAPIEnv(t, env, func(o *api.Options) { o.RequestTimeout = time.Second })
	ctx := e.Ctx(90 * time.Second)
	var mu sync.Mutex
	statuses := map[int]int{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				body := `{}`
				if i%2 == 0 {
					body = `{"message":"hello"}`
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", e.URL+"/eve/v1/session", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				resp.Body.Close()
				took := time.Since(start)
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				switch {
				case resp.StatusCode >= 200 && resp.StatusCode < 300:
				case resp.StatusCode == 429 || resp.StatusCode == 503:
					if resp.Header.Get("Retry-After") == "" {
						t.Errorf("%d without Retry-After", resp.StatusCode)
					}
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
				if took > 10*time.Second {
					t.Errorf("answered after %s", took)
				}
			}
		}()
	}
	for i := range 1000 {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("statuses: %v", statuses)
}
