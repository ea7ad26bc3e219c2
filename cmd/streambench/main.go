// Command streambench measures what open streams cost: N follow streams on
// N idle sessions, through one API server, first with change notifications
// (the in-process bus, as in eve dev; EVE_NOTIFY across processes) and then
// polling (no bus: one reader per session). For each it prints the CPU of
// this process (API server + worker) and of the Temporal dev server while
// the streams idle, the Temporal queries per second they cause, and new
// event → stream latency.
//
//	go run ./cmd/streambench -n 1000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/benchkit"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func main() {
	n := flag.Int("n", 1000, "open streams (one per idle session)")
	idle := flag.Duration("idle", 10*time.Second, "how long the streams idle while CPU and queries are measured")
	samples := flag.Int("samples", 20, "new event → stream latency samples")
	modes := flag.String("modes", "push,poll", "what to measure: push (change notifications), poll (no bus), or both")
	flag.Parse()
	raiseFileLimit()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		fatal(err)
	}
	defer srv.Stop()
	var rows []row
	for _, mode := range strings.Split(*modes, ",") {
		r, err := measure(ctx, srv, mode, *n, *idle, *samples)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", mode, err))
		}
		rows = append(rows, r)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tstreams\teve CPU (% of a core)\tTemporal CPU\tqueries/s idle\tnew event → stream p50\tp99")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.1f%%\t%.1f\t%s\t%s\n", r.mode, r.streams, r.selfCPU, r.serverCPU, r.qps, r.p50, r.p99)
	}
	tw.Flush()
	fmt.Println("push: change notifications (in-process bus); poll: no bus, one reader per session polling.")
	fmt.Println("CPU and queries are measured while every stream idles; latency is a message sent → its turn.completed on the stream.")
}

type row struct {
	mode               string
	streams            int
	selfCPU, serverCPU float64
	qps                float64
	p50, p99           time.Duration
}

const rules = `
rules:
  - match: ".*"
    reply: "ok"
`

func measure(ctx context.Context, srv *devserver.Server, mode string, n int, idle time.Duration, samples int) (row, error) {
	var queries atomic.Int64
	c, err := srv.Dial(client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(sessions.CountQueries(&queries))}}})
	if err != nil {
		return row{}, err
	}
	defer c.Close()
	tq := "streambench-" + mode
	var bus *notify.Local
	if mode == "push" {
		bus = notify.NewLocal()
	}
	m, err := scripted.Parse([]byte(rules))
	if err != nil {
		return row{}, err
	}
	a := &agent.Agent{Name: "streams", Model: m, Tools: tools.NewRegistry(), LocalModel: true, Store: srv.PayloadStore()}
	if bus != nil {
		a.Notifier = bus
	}
	w := worker.New(c, tq, worker.Options{})
	if err := agent.Register(w, a); err != nil {
		return row{}, err
	}
	if err := w.Start(); err != nil {
		return row{}, err
	}
	defer w.Stop()
	opts := api.Options{Sessions: &sessions.Service{Client: c, TaskQueue: tq}, MaxStreamsPerPrincipal: -1}
	if bus != nil {
		opts.Notify = bus
	}
	h, err := api.New(opts)
	if err != nil {
		return row{}, err
	}
	hs := httptest.NewServer(h)
	defer hs.Close()

	// N sessions, each with one finished turn.
	svc := &sessions.Service{Client: c, TaskQueue: tq}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := svc.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "hello", Wait: true})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = res.SessionID
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return row{}, fmt.Errorf("create sessions: %w", err)
	}

	// One follow stream per session, from its tail.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	completed := make([]chan string, n) // turn.completed delivery ids, per stream
	opened := make(chan error, n)
	for i, id := range ids {
		completed[i] = make(chan string, 16)
		go func() {
			req, _ := http.NewRequestWithContext(sctx, "GET", hs.URL+"/eve/v1/session/"+id+"/stream?startIndex=-1", nil)
			resp, err := hc.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				opened <- fmt.Errorf("stream %s: %s", id, resp.Status)
				return
			}
			opened <- nil
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 4<<20)
			for sc.Scan() {
				var e protocol.Event
				if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == protocol.TurnCompleted && len(e.Meta.DeliveryIDs) > 0 {
					completed[i] <- e.Meta.DeliveryIDs[0]
				}
			}
		}()
	}
	for range ids {
		if err := <-opened; err != nil {
			return row{}, err
		}
	}
	// Let the streams settle (their first reads, the fast-poll window).
	time.Sleep(3 * time.Second)

	q0 := queries.Load()
	cpu := benchkit.StartCPU(srv.PID())
	time.Sleep(idle)
	serverCPU, selfCPU, _ := cpu.Delta()
	qps := float64(queries.Load()-q0) / idle.Seconds()

	// New event → stream: a message to one session, until its stream shows
	// the turn completed.
	var lat []time.Duration
	for s := range samples {
		i := s % n
		start := time.Now()
		res, err := svc.Send(ctx, ids[i], signals.SendRequest{Message: "again"})
		if err != nil {
			return row{}, err
		}
		for dlv := range completed[i] {
			if dlv == res.DeliveryID {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return row{mode: mode, streams: n, qps: qps,
		selfCPU:   100 * selfCPU.Seconds() / idle.Seconds(),
		serverCPU: 100 * serverCPU.Seconds() / idle.Seconds(),
		p50:       lat[len(lat)/2].Round(time.Millisecond), p99: lat[len(lat)*99/100].Round(time.Millisecond)}, nil
}

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "streambench:", strings.TrimSpace(err.Error()))
	os.Exit(1)
}
