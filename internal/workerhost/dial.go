package workerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/metrics"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/payloadstore"
)

// DefaultServiceName names a worker's traces unless OTEL_SERVICE_NAME
// does (docs/observability.md).
const DefaultServiceName = "eve-worker"

// dialed maps the clients Dial made to the payload store they offload to,
// so New gives a worker's agent the same store.
var dialed sync.Map // client.Client → payloadstore.Store

// StoreOf returns the payload store of a client Dial made (until it is
// closed), or nil.
func StoreOf(c client.Client) payloadstore.Store {
	if s, ok := dialed.Load(c); ok {
		return s.(payloadstore.Store)
	}
	return nil
}

// Dial connects a worker's client with eve's metrics (served on
// metricsAddr unless empty; see serveMetrics) and, when EVE_OTEL_EXPORTER is set, tracing.
// Large payloads go to tc's payload store (tc.Store), which New gives the
// worker's agent. close releases all of it.
func Dial(ctx context.Context, logger *slog.Logger, tc config.Temporal, metricsAddr string) (c client.Client, metricsURL string, close func(), err error) {
	m, err := metrics.New()
	if err != nil {
		return nil, "", nil, err
	}
	tp, err := tracing.FromEnv(ctx, DefaultServiceName)
	if err != nil {
		return nil, "", nil, err
	}
	var interceptors []interceptor.ClientInterceptor
	if tp != nil {
		interceptors = append(interceptors, tracing.Interceptor(tp.Tracer))
	}
	shutdown := func() {
		if tp != nil {
			tp.Shutdown(context.Background())
		}
	}
	store, err := tc.Store(ctx)
	if err != nil {
		shutdown()
		return nil, "", nil, err
	}
	c, err = tc.Dial(ctx, logger, func(o *client.Options) {
		o.MetricsHandler = m.Handler
		o.Interceptors = interceptors
	})
	if err != nil {
		shutdown()
		return nil, "", nil, err
	}
	if metricsAddr != "" {
		addr, err := serveMetrics(ctx, logger, m, metricsAddr, config.DefaultMetricsAddr)
		if err != nil {
			c.Close()
			shutdown()
			return nil, "", nil, err
		}
		metricsURL = fmt.Sprintf("http://%s/metrics", addr)
	}
	dialed.Store(c, store)
	return c, metricsURL, func() { dialed.Delete(c); c.Close(); shutdown() }, nil
}

// serveMetrics serves m on addr. When addr is the default and another
// process holds it (a second worker on this host), it serves on a free
// loopback port instead and logs its URL, so several workers run on one
// host without flags; an address that was chosen (any other) must be free.
func serveMetrics(ctx context.Context, logger *slog.Logger, m *metrics.Metrics, addr, defaultAddr string) (net.Addr, error) {
	a, err := m.Serve(ctx, addr)
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) || addr != defaultAddr {
		return nil, fmt.Errorf("%w (set EVE_METRICS_ADDR or --metrics-addr to a free host:port, or to empty to turn metrics off)", err)
	}
	a, ferr := m.Serve(ctx, "127.0.0.1:0")
	if ferr != nil {
		return nil, fmt.Errorf("%w; and on a free port: %w", err, ferr)
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("metrics: the default address is taken (another worker on this host?), serving on a free port instead; set EVE_METRICS_ADDR or --metrics-addr to choose one",
		"default", defaultAddr, "url", fmt.Sprintf("http://%s/metrics", a))
	return a, nil
}
