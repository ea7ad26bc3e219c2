package workerhost

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/metrics"
)

// Two workers on one host: the second finds the default metrics address
// taken by the first, serves on a free port and logs it. A taken address
// that was chosen is an error that says how to fix it.
func TestMetricsFallBackWhenTheDefaultIsTaken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newMetrics := func() *metrics.Metrics {
		t.Helper()
		m, err := metrics.New()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// The first worker holds what the test calls the default (a real
	// default, 127.0.0.1:9464, may be anybody's on this machine).
	first, err := serveMetrics(ctx, nil, newMetrics(), "127.0.0.1:0", config.DefaultMetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	def := first.String()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	second, err := serveMetrics(ctx, logger, newMetrics(), def, def)
	if err != nil {
		t.Fatalf("second worker on the taken default: %v", err)
	}
	if second.String() == def {
		t.Fatalf("second worker serves on %s too", def)
	}
	for _, a := range []net.Addr{first, second} {
		resp, err := http.Get("http://" + a.String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/metrics: %s", a, resp.Status)
		}
	}
	if url := "http://" + second.String() + "/metrics"; !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), url) {
		t.Fatalf("the fallback's log does not warn with %s:\n%s", url, logs.String())
	}

	_, err = serveMetrics(ctx, logger, newMetrics(), def, config.DefaultMetricsAddr)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "EVE_METRICS_ADDR") {
		t.Fatalf("a chosen address that is taken: %v, want an error naming EVE_METRICS_ADDR", err)
	}
}
