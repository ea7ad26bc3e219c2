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
	"os"
	"sync"
	"testing"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/tools"
)

var (
	big10kOnce sync.Once
	big10k     *toolsapi.Service
	big10kErr  error
)

func service10k(tb testing.TB) *toolsapi.Service {
	tb.Helper()
	big10kOnce.Do(func() {
		big10k, big10kErr = toolsapi.New(toolsapi.Options{Extra: catalogtest.Synthetic(10000), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	})
	if big10kErr != nil {
		tb.Fatal(big10kErr)
	}
	return big10k
}

// BenchmarkGetAnthropic10kHTTP is GET /v1/tools?format=anthropic over
// 10,000 tools, JSON encoding included.
func BenchmarkGetAnthropic10kHTTP(b *testing.B) {
	h := service10k(b).Handler()
	req := httptest.NewRequest(http.MethodGet, "/v1/tools?format=anthropic", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := &CountingWriter{}
		h.ServeHTTP(w, req)
		if w.Status != 200 {
			b.Fatal(w.Status)
		}
		b.SetBytes(w.N)
	}
}

// BenchmarkGetAnthropic10kEncodingJSON is the same bundle through
// encoding/json, for comparison with the handler's encoder.
func BenchmarkGetAnthropic10kEncodingJSON(b *testing.B) {
	s := service10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, _ := s.Get(catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
		if _, err := json.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch10kHTTP is POST /v1/tools/search over 10,000 tools.
func BenchmarkSearch10kHTTP(b *testing.B) {
	h := service10k(b).Handler()
	bodies := make([][]byte, len(BenchQueries))
	for i, q := range BenchQueries {
		bodies[i], _ = json.Marshal(catalog.SearchToolsOptions{Query: q})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tools/search", bytes.NewReader(bodies[i%len(bodies)])))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// callerService10k is service10k's catalog plus a resolver listed per
// caller (a dynamic connection set) that gives every user 5 tools.
func callerService10k(b *testing.B) *toolsapi.Service {
	b.Helper()
	r := tools.Resolver{Name: "tenants", Scope: tools.ScopeSession,
		Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) { return nil, nil },
		CallerCatalog: func(rc tools.ResolveContext) ([]*tools.Tool, error) {
			kit := "t" + rc.Session.Auth.Current.ID
			var ts []*tools.Tool
			for i := range 5 {
				name := fmt.Sprintf("op%d", i)
				t := tools.Func(kit+"__"+name, "Operation "+name+" of the caller's tenant.", func(*tools.Context, struct{}) (string, error) { return "", nil })
				t.Toolkit, t.Remote = kit, &tools.Remote{Connection: kit, Tool: name}
				ts = append(ts, t)
			}
			return ts, nil
		}}
	s, err := toolsapi.New(toolsapi.Options{Extra: catalogtest.Synthetic(10000), Agent: &agent.Agent{Name: "bench", Resolvers: []tools.Resolver{r}},
		MaxCallers: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCallerFirstRead10k is a new caller's first read over 10,000
// shared tools: its 5 own tools listed (in memory) and its catalog
// extended from the shared one. B/op is what a caller's catalog costs.
func BenchmarkCallerFirstRead10k(b *testing.B) {
	s := callerService10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := s.ToolFor(s.UserOf(fmt.Sprint("u", i)), fmt.Sprintf("tu%d.op0", i)); !ok {
			b.Fatal("the caller's tool is missing")
		}
	}
}

// BenchmarkGetAnthropicCaller10kHTTP is GET /v1/tools?format=anthropic
// for a caller with tools of its own (listed once), over 10,000 shared
// tools.
func BenchmarkGetAnthropicCaller10kHTTP(b *testing.B) {
	h := callerService10k(b).Handler()
	req := httptest.NewRequest(http.MethodGet, "/v1/tools?format=anthropic&userId=ana", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := &CountingWriter{}
		h.ServeHTTP(w, req)
		if w.Status != 200 {
			b.Fatal(w.Status)
		}
		b.SetBytes(w.N)
	}
}

// BenchmarkValidateInput is per-call validation on the fixture.
func BenchmarkValidateInput(b *testing.B) {
	c := catalogtest.Catalog()
	in := json.RawMessage(`{"to":["ana@example.com"],"subject":"Q3","body":"Attached."}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.ValidateInput("gmail.send_email", in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBench runs Bench small (set EVE_TOOLS_BENCH=1 for the 10k table).
func TestBench(t *testing.T) {
	opts := BenchOptions{Tools: 500, N: 20, Warmup: 2}
	if os.Getenv("EVE_TOOLS_BENCH") != "" {
		opts = BenchOptions{}
	}
	rows, err := Bench(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows", len(rows))
	}
	var buf bytes.Buffer
	_ = (&benchkit.Table{Rows: rows, Unit: "calls"}).Fprint(&buf)
	t.Log("\n" + buf.String())
}
