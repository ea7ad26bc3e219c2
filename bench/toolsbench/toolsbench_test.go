package toolsbench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
	"github.com/eve-temporal/eve/internal/toolsapi"
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
