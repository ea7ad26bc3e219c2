// Command inboxbench measures listing the inbox: it parks N sessions on an
// approval (each turn publishes its request to Visibility), then lists
// every open request through GET /eve/v1/inbox, page by page, and counts
// the Visibility queries that took (ListWorkflowExecutions calls on the
// wire), beside the raw SDK's ListWorkflow doing the same paging and
// decoding the same memos.
//
//	go run ./cmd/inboxbench -n 10000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	eveclient "github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func main() {
	n := flag.Int("n", 10000, "open requests (parked sessions) to list")
	page := flag.Int("page", sessions.DefaultInboxPageSize, "turns per page (?limit=)")
	conc := flag.Int("c", 16, "sessions parked concurrently")
	flag.Parse()
	if err := run(context.Background(), *n, *page, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		os.Exit(1)
	}
}

// listCalls counts ListWorkflowExecutions calls on a client's connection.
type listCalls struct{ n atomic.Int64 }

func (l *listCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasSuffix(method, "/ListWorkflowExecutions") {
		l.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func run(ctx context.Context, n, pageSize, conc int) error {
	srv, err := devserver.Start(ctx, devserver.Options{Tuning: devserver.TuningFast})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := srv.Dial(client.Options{Logger: devserver.WarnLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := visibility.Register(ctx, c, "default"); err != nil {
		return err
	}
	m, err := scripted.Parse([]byte("rules:\n  - match: refund\n    steps:\n      - calls: [{tool: refund}]\n      - reply: done\n"))
	if err != nil {
		return err
	}
	reg := tools.NewRegistry()
	reg.MustRegister(&tools.Tool{Name: "refund", Description: "Refund.", InputSchema: json.RawMessage(`{"type":"object"}`), Approval: approval.Always(),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil }})
	tq := fmt.Sprintf("inboxbench-%d", time.Now().UnixNano())
	w := worker.New(c, tq, worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	})
	if err := agent.Register(w, &agent.Agent{Name: "inbox", Model: m, Tools: reg, LocalModel: true}, agent.Host{Store: srv.PayloadStore(), Client: c, SearchAttributes: true, InboxAttributes: true}); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	svc := &sessions.Service{Client: c, TaskQueue: tq}
	fmt.Printf("parking %d sessions on an approval...\n", n)
	st, err := benchkit.Throughput(ctx, conc, n, func(ctx context.Context, _ int) error {
		// A loaded machine may time a park out; one retry (a new session;
		// the first may park too, so the listing counts what is open).
		var err error
		for try := 0; try < 2; try++ {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			var res signals.SendResult
			res, err = svc.CreateAndSend(cctx, "", nil, signals.SendRequest{Message: "refund", Wait: true})
			cancel()
			if err == nil && (res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting) {
				err = fmt.Errorf("not parked: %+v", res.Outcome)
			}
			if err == nil {
				return nil
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("parked %d in %s (%.1f/s)\n", n, st.Wall.Round(time.Second), st.PerSec)

	// The listing side: its own connection, whose List calls are counted.
	var calls listCalls
	lc, err := srv.Dial(client.Options{Logger: devserver.WarnLogger(), ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)}}})
	if err != nil {
		return err
	}
	defer lc.Close()
	query := sessions.InboxQuery{}.Query()
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		cnt, err := lc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return err
		}
		if cnt.GetCount() >= int64(n) {
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("visibility lists %d of %d parked turns after 2 minutes", cnt.GetCount(), n)
		}
	}
	apiSrv, err := api.New(api.Options{Sessions: &sessions.Service{Client: lc, TaskQueue: tq}})
	if err != nil {
		return err
	}
	defer apiSrv.Close()
	hs := httptest.NewServer(apiSrv)
	defer hs.Close()
	ec := eveclient.New(hs.URL)

	dc := converter.GetDefaultDataConverter()
	eveList := func(cursor string) (int, string, error) {
		p, err := ec.Inbox(ctx, eveclient.InboxFilter{Limit: pageSize, Cursor: cursor})
		return len(p.Items), p.NextCursor, err
	}
	rawList := func(cursor string) (int, string, error) {
		resp, err := lc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(pageSize), NextPageToken: []byte(cursor)})
		if err != nil {
			return 0, "", err
		}
		items := 0
		for _, e := range resp.GetExecutions() {
			var memo signals.InboxMemo
			if f, ok := e.GetMemo().GetFields()[signals.MemoInbox]; ok && dc.FromPayload(f, &memo) == nil {
				items += len(memo.Items)
			}
		}
		return items, string(resp.GetNextPageToken()), nil
	}
	// Each twice, alternating; the second round counts (warm caches).
	var eve, raw listing
	for round := 0; round < 2; round++ {
		if raw, err = measure(&calls, rawList); err != nil {
			return fmt.Errorf("raw SDK: %w", err)
		}
		if eve, err = measure(&calls, eveList); err != nil {
			return fmt.Errorf("eve: %w", err)
		}
	}
	fmt.Printf("\nlisting %d open requests (%d parked), %d turns a page:\n", eve.items, n, pageSize)
	fmt.Printf("%-38s %-8s %-7s %-19s %-12s %-10s %s\n", "", "items", "pages", "Visibility queries", "per session", "wall", "per page")
	for _, r := range []struct {
		name string
		l    listing
	}{{"raw SDK ListWorkflow (+ memo decode)", raw}, {"eve GET /eve/v1/inbox", eve}} {
		fmt.Printf("%-38s %-8d %-7d %-19d %-12.4f %-10s %s\n", r.name, r.l.items, r.l.pages, r.l.queries, float64(r.l.queries)/float64(n),
			r.l.wall.Round(time.Millisecond), (r.l.wall / time.Duration(max(r.l.pages, 1))).Round(10*time.Microsecond))
	}
	fmt.Printf("eve / raw: %.2f× the queries, %.2f× the time; one query a page, where one a session would take %d\n",
		float64(eve.queries)/float64(max(raw.queries, 1)), float64(eve.wall)/float64(max(raw.wall, 1)), n)
	if eve.items < n || eve.items != raw.items || eve.queries != int64(eve.pages) {
		return fmt.Errorf("eve listed %d requests (raw %d, parked %d) in %d queries for %d pages", eve.items, raw.items, n, eve.queries, eve.pages)
	}
	return nil
}

type listing struct {
	items, pages int
	queries      int64
	wall         time.Duration
}

// measure follows a cursor to the end, counting the List calls it made.
func measure(calls *listCalls, page func(cursor string) (int, string, error)) (listing, error) {
	var l listing
	before := calls.n.Load()
	start := time.Now()
	cursor := ""
	for {
		items, next, err := page(cursor)
		if err != nil {
			return l, err
		}
		l.items += items
		l.pages++
		if next == "" {
			break
		}
		cursor = next
	}
	l.wall = time.Since(start)
	l.queries = calls.n.Load() - before
	return l, nil
}
