// Command stallbench measures what clients that never finish their request
// bodies cost everyone else (docs/performance.md, "Stalled bodies"): one
// API server on a Temporal dev server, a baseline of message round trips
// (POST /eve/v1/session with a first message, the answer 202), then N
// connections that send headers and half a body and stall — half of them
// without credentials, half with a valid key — and the same round trips
// while they hang. It prints both latencies, the ratio, how many stalled
// requests were answered at once (401) and how long the rest took to be cut
// off (408 at the body read timeout).
//
//	go run ./cmd/stallbench -n 1000
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

func main() {
	n := flag.Int("n", 1000, "stalled connections")
	samples := flag.Int("samples", 200, "round trips per measurement")
	timeout := flag.Duration("body-timeout", 10*time.Second, "the API server's body read timeout")
	flag.Parse()
	if err := run(*n, *samples, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "stallbench:", err)
		os.Exit(1)
	}
}

func run(n, samples int, bodyTimeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := srv.Dial(client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	const tq = "stallbench"
	m, err := scripted.Parse([]byte(`default: "Hello."`))
	if err != nil {
		return err
	}
	a := &agent.Agent{Name: "stall", Model: m, Tools: tools.NewRegistry(), LocalModel: true}
	w := worker.New(c, tq, worker.Options{})
	if err := agent.Register(w, a, agent.Host{Store: srv.PayloadStore(), Client: c}); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	h, err := api.New(api.Options{
		Sessions:      &sessions.Service{Client: c, TaskQueue: tq},
		Keys:          map[string]*auth.Principal{"bench-key": {ID: "bench", Type: auth.TypeUser}},
		ServerOptions: api.ServerOptions{BodyReadTimeout: bodyTimeout},
	})
	if err != nil {
		return err
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	addr := strings.TrimPrefix(hs.URL, "http://")

	roundTrip := func(ctx context.Context, _ int) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/eve/v1/session", bytes.NewReader([]byte(`{"message":"hello"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer bench-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("create: %d", resp.StatusCode)
		}
		return nil
	}
	base, err := benchkit.Latency(ctx, samples, 10, roundTrip)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}

	// N stalled requests: headers and half a body, then nothing.
	var at401, at408, other atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	var last atomic.Int64
	for i := range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("stalled connection %d: %w", i, err)
		}
		cred := ""
		if i%2 == 1 {
			cred = "Authorization: Bearer bench-key\r\n"
		}
		fmt.Fprintf(conn, "POST /eve/v1/session HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n%s\r\n{\"message\":", addr, cred)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(bodyTimeout + 30*time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			switch {
			case err == nil && strings.Contains(line, " 401 "):
				at401.Add(1)
			case err == nil && strings.Contains(line, " 408 "):
				at408.Add(1)
			default:
				other.Add(1)
			}
			last.Store(int64(time.Since(start)))
		}()
	}
	during, err := benchkit.Latency(ctx, samples, 0, roundTrip)
	if err != nil {
		return fmt.Errorf("during the stall: %w", err)
	}
	wg.Wait()

	fmt.Printf("stalled bodies: %d connections against one API server (body read timeout %s)\n", n, bodyTimeout)
	fmt.Printf("  round trip (create + first message) alone:        %s\n", base)
	fmt.Printf("  round trip while they stall:                      %s\n", during)
	fmt.Printf("  p50 ratio %.2fx, p99 ratio %.2fx\n", float64(during.P50)/float64(base.P50), float64(during.P99)/float64(base.P99))
	fmt.Printf("  stalled without a key: %d answered 401 at once; with a key: %d cut off with 408; other: %d; all closed after %s\n",
		at401.Load(), at408.Load(), other.Load(), time.Duration(last.Load()).Round(10*time.Millisecond))
	return nil
}
