// Package toolsbench measures the tools API: the catalog side in process on
// a synthetic catalog (Bench), and sync executions against a running worker
// (BenchExecute). It lives beside toolsapi so that the service itself
// imports no test fixtures.
package toolsbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"time"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// BenchOptions sizes Bench.
type BenchOptions struct {
	// Tools in the synthetic catalog (default 10,000).
	Tools int
	// N timed calls per row (default 200) after Warmup untimed ones
	// (default 20).
	N, Warmup int
}

// BenchSearchTarget is the search p50 the tools API promises at 10,000 tools.
const BenchSearchTarget = 2 * time.Millisecond

// BenchQueries are the search queries Bench cycles through.
var BenchQueries = []string{
	"send email", "create github issue", "find a free time slot for a meeting",
	"post message to slack channel", "refund payment for customer order", "delete repository",
	"list calendar events", "merge pull request squash", "upload file", "invoice",
	"schedule reminder booking", "search messages from ana", "archive ticket", "export report dashboard",
}

// Bench measures the catalog side of the tools API in process, on a
// synthetic catalog of opts.Tools tools (catalogtest.Synthetic): get in
// Anthropic format (the catalog call, and GET /v1/tools with its JSON),
// search (the call and POST /v1/tools/search), and input validation per
// call. Rows have Config "catalog-<n>"; cmd/bench prints them with its table.
func Bench(ctx context.Context, opts BenchOptions) ([]benchkit.Row, error) {
	if opts.Tools <= 0 {
		opts.Tools = 10000
	}
	if opts.N <= 0 {
		opts.N = 200
	}
	if opts.Warmup <= 0 {
		opts.Warmup = 20
	}
	cfg := fmt.Sprintf("catalog-%d", opts.Tools)
	var rows []benchkit.Row
	add := func(name, note string, n int, fn func(ctx context.Context, i int) error) error {
		runtime.GC()
		st, err := benchkit.Latency(ctx, n, min(opts.Warmup, n), fn)
		row := benchkit.Row{Scenario: name, Config: cfg, Latency: st, Note: note}
		if err != nil {
			row.Note = err.Error()
		}
		rows = append(rows, row)
		return err
	}

	began := time.Now()
	svc, err := toolsapi.New(toolsapi.Options{Extra: catalogtest.Synthetic(opts.Tools), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return rows, err
	}
	rows = append(rows, benchkit.Row{Scenario: "tools: load catalog", Config: cfg,
		Latency: benchkit.Stats{N: 1, P50: time.Since(began), P99: time.Since(began), Mean: time.Since(began)},
		Note:    "check + compile + index, once at start"})
	h := svc.Handler()

	if err := add("tools: get anthropic", fmt.Sprintf("Catalog.Get, %d tools (selection cached)", opts.Tools), opts.N, func(ctx context.Context, i int) error {
		res, err := svc.Get(catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
		if err == nil && len(res.Anthropic()) != opts.Tools {
			err = fmt.Errorf("got %d tools", len(res.Anthropic()))
		}
		return err
	}); err != nil {
		return rows, err
	}
	var size int
	req := httptest.NewRequest(http.MethodGet, "/v1/tools?format=anthropic", nil)
	if err := add("tools: GET /v1/tools anthropic", "", max(opts.N/4, 10), func(ctx context.Context, i int) error {
		w := &CountingWriter{}
		h.ServeHTTP(w, req)
		if w.Status != http.StatusOK {
			return fmt.Errorf("status %d", w.Status)
		}
		size = int(w.N)
		return nil
	}); err != nil {
		return rows, err
	}
	rows[len(rows)-1].Note = fmt.Sprintf("in-process handler, %d tools, %.1f MB of JSON (bundle, name map, raw)", opts.Tools, float64(size)/1e6)

	if err := add("tools: search", "", opts.N*5, func(ctx context.Context, i int) error {
		res, err := svc.Search(catalog.SearchToolsOptions{Query: BenchQueries[i%len(BenchQueries)]})
		if err == nil && len(res.Tools) == 0 {
			err = fmt.Errorf("no result for %q", BenchQueries[i%len(BenchQueries)])
		}
		return err
	}); err != nil {
		return rows, err
	}
	r := &rows[len(rows)-1]
	verdict := "met"
	if r.Latency.P50 > BenchSearchTarget {
		verdict = "MISSED"
	}
	r.Note = fmt.Sprintf("Catalog.Search, %d tools, limit 10; target p50 <= %s: %s", opts.Tools, BenchSearchTarget, verdict)

	bodies := make([][]byte, len(BenchQueries))
	for i, q := range BenchQueries {
		bodies[i], _ = json.Marshal(catalog.SearchToolsOptions{Query: q})
	}
	if err := add("tools: POST /v1/tools/search", "in-process handler, JSON in and out", opts.N*2, func(ctx context.Context, i int) error {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/tools/search", bytes.NewReader(bodies[i%len(bodies)]))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return fmt.Errorf("status %d: %s", rec.Code, rec.Body.String())
		}
		return nil
	}); err != nil {
		return rows, err
	}

	// Validation per call, on the fixture's richest schemas.
	fx := catalogtest.Catalog()
	valid := json.RawMessage(`{"to":["ana@example.com","bo@example.com"],"subject":"Q3 report","body":"Attached.","isHtml":false}`)
	invalid := json.RawMessage(`{"to":["not-an-email"],"subject":3,"isHtml":"yes"}`)
	event := json.RawMessage(`{"summary":"Sync","start":{"dateTime":"2026-01-02T10:00:00Z","timeZone":"Europe/Paris"},"end":{"dateTime":"2026-01-02T10:30:00Z"},"attendees":[{"email":"a@example.com"},{"email":"b@example.com","optional":true}],"location":"B2"}`)
	for _, c := range []struct {
		name, tool string
		input      json.RawMessage
		wantErr    bool
	}{
		{"tools: validate input (valid)", "gmail.send_email", valid, false},
		{"tools: validate input (4 violations)", "gmail.send_email", invalid, true},
		{"tools: validate input (nested)", "calendar.create_event", event, false},
	} {
		if err := add(c.name, c.tool+", formats asserted", opts.N*5, func(ctx context.Context, i int) error {
			err := fx.ValidateInput(c.tool, c.input)
			if (err != nil) != c.wantErr {
				return fmt.Errorf("%s: validation error %v, want error %v", c.tool, err, c.wantErr)
			}
			return nil
		}); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// BenchExecute measures sync executions of one tool through svc (a worker
// serving its agent and the execution workflow must be running): each call
// a new execution ("tools: execute"), then repeats of one idempotency key
// ("tools: execute, same key": a join, no new run).
func BenchExecute(ctx context.Context, svc *toolsapi.Service, tool string, input json.RawMessage, n, warmup int) ([]benchkit.Row, error) {
	var rows []benchkit.Row
	st, err := benchkit.Latency(ctx, n, warmup, func(ctx context.Context, i int) error {
		res, err := svc.Execute(ctx, tool, catalog.ExecuteToolOptions{UserID: "bench", Input: input, Mode: catalog.ModeSync})
		if err == nil && res.Status != catalog.StatusSucceeded {
			err = fmt.Errorf("execution %s %s", res.ID, res.Status)
		}
		return err
	})
	rows = append(rows, benchkit.Row{Scenario: "tools: execute (sync)", Latency: st, Note: tool + ", a new execution workflow per call"})
	if err != nil {
		return rows, err
	}
	key := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	st, err = benchkit.Latency(ctx, n, warmup, func(ctx context.Context, i int) error {
		_, err := svc.Execute(ctx, tool, catalog.ExecuteToolOptions{UserID: "bench", Input: input, IdempotencyKey: key, Mode: catalog.ModeSync})
		return err
	})
	rows = append(rows, benchkit.Row{Scenario: "tools: execute, same key", Latency: st, Note: "joins the ended execution: start + describe + result", Baseline: "tools: execute (sync)"})
	return rows, err
}

// CountingWriter is an http.ResponseWriter that counts and drops the body,
// as a fast client would read it.
type CountingWriter struct {
	Status int
	N      int64
	header http.Header
}

func (w *CountingWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *CountingWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
}

func (w *CountingWriter) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	w.N += int64(len(p))
	return len(p), nil
}
