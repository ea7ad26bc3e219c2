// Command unknownbench measures what a burst of sends to unknown session
// ids costs with idle inbox streams open: N streams of GET
// /eve/v1/inbox/events (two users, alternating) on one API server with the
// in-process notification bus (as eve dev runs it), then a third user's
// sends (POST /eve/v1/session/<id>) to made-up, well-formed session ids,
// each a 404. For each N it prints the CPU of this process (the API
// server and the streams' clients) and of the Temporal dev server over the
// burst and a fixed settle time after it, and the Temporal calls the API
// server made. A 404 concerns nobody's inbox, so the cost should not grow
// with N (issue 36).
//
//	go run ./cmd/unknownbench -streams 0,50 -sends 150 -rounds 3
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
)

func main() {
	streams := flag.String("streams", "0,50", "idle inbox streams open during the burst, comma-separated counts (each a row)")
	sends := flag.Int("sends", 150, "sends to unknown session ids in one burst")
	rounds := flag.Int("rounds", 3, "bursts per row (the row shows each, and their median)")
	settle := flag.Duration("settle", 2*time.Second, "measured time after the burst, for work it set off")
	flag.Parse()
	var counts []int
	for _, s := range strings.Split(*streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			fmt.Fprintln(os.Stderr, "unknownbench: -streams: want counts such as 0,50")
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	if err := run(context.Background(), counts, *sends, *rounds, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "unknownbench:", err)
		os.Exit(1)
	}
}

// calls counts the unary Temporal calls on a client's connection.
type calls struct{ n atomic.Int64 }

func (c *calls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.n.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

type sample struct {
	self, server time.Duration
	calls        int64
	wall         time.Duration
}

func run(ctx context.Context, counts []int, sends, rounds int, settle time.Duration) error {
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return err
	}
	defer srv.Stop()
	var n calls
	c, err := srv.Dial(client.Options{Logger: devserver.WarnLogger(), ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(n.intercept)}}})
	if err != nil {
		return err
	}
	defer c.Close()
	keys := map[string]*auth.Principal{
		"key-alice":   {ID: "alice", Type: auth.TypeUser},
		"key-bob":     {ID: "bob", Type: auth.TypeUser},
		"key-mallory": {ID: "mallory", Type: auth.TypeUser},
	}
	apiSrv, err := api.New(api.Options{Sessions: &sessions.Service{Client: c, TaskQueue: "unknownbench"}, Keys: keys,
		Bus: notify.NewLocal(), ServerOptions: api.ServerOptions{MaxStreamsPerPrincipal: -1}})
	if err != nil {
		return err
	}
	defer apiSrv.Close()
	hs := httptest.NewServer(apiSrv)
	defer hs.Close()

	fmt.Printf("unknownbench: %d sends to unknown session ids per burst, %d bursts per row, %s settle; Temporal dev server pid %d\n", sends, rounds, settle, srv.PID())
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "idle inbox streams\tAPI process CPU ms (median)\tper round\tdev server CPU ms (median)\tper round\tTemporal calls (median)\tburst wall (median)\t")
	open := 0
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for _, want := range counts {
		for ; open < want; open++ {
			key := "key-alice"
			if open%2 == 1 {
				key = "key-bob"
			}
			sctx, cancel := context.WithCancel(ctx)
			cancels = append(cancels, cancel)
			if err := openInboxStream(sctx, hs.URL, key); err != nil {
				return fmt.Errorf("stream %d: %w", open+1, err)
			}
		}
		var rows []sample
		for r := 0; r < rounds; r++ {
			time.Sleep(500 * time.Millisecond) // let the previous round's work end
			s, err := burst(ctx, hs.URL, sends, settle, srv.PID(), &n)
			if err != nil {
				return err
			}
			rows = append(rows, s)
		}
		med := func(f func(sample) int64) (int64, string) {
			var v []int64
			for _, s := range rows {
				v = append(v, f(s))
			}
			each := fmt.Sprint(v)
			slices.Sort(v)
			return v[len(v)/2], each
		}
		self, selfEach := med(func(s sample) int64 { return s.self.Milliseconds() })
		server, serverEach := med(func(s sample) int64 { return s.server.Milliseconds() })
		cl, _ := med(func(s sample) int64 { return s.calls })
		wall, _ := med(func(s sample) int64 { return s.wall.Milliseconds() })
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%d\t%d ms\t\n", want, self, selfEach, server, serverEach, cl, wall)
	}
	return tw.Flush()
}

// openInboxStream opens GET /eve/v1/inbox/events as key and reads its
// first event (the server has subscribed it by then); the stream is then
// drained until ctx ends.
func openInboxStream(ctx context.Context, base, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/eve/v1/inbox/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fmt.Errorf("GET /eve/v1/inbox/events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: inbox") {
			break
		}
	}
	go func() {
		defer resp.Body.Close()
		for sc.Scan() {
		}
	}()
	return nil
}

// burst sends n messages to unknown session ids as mallory (each must be
// 404) and measures CPU and Temporal calls over the burst and settle.
func burst(ctx context.Context, base string, n int, settle time.Duration, serverPID int, c *calls) (sample, error) {
	cpu := benchkit.StartCPU(serverPID)
	before := c.n.Load()
	start := time.Now()
	for i := 0; i < n; i++ {
		id := sessions.NewID("ses")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/eve/v1/session/"+id, strings.NewReader(`{"message":"hi"}`))
		req.Header.Set("Authorization", "Bearer key-mallory")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return sample{}, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			return sample{}, fmt.Errorf("send to unknown %s: %s, want 404", id, resp.Status)
		}
	}
	wall := time.Since(start)
	time.Sleep(settle)
	server, self, ok := cpu.Delta()
	if !ok {
		return sample{}, fmt.Errorf("CPU time unreadable (/proc)")
	}
	return sample{self: self, server: server, calls: c.n.Load() - before, wall: wall}, nil
}
