package workerhost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/metrics"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/payloadstore"
)

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
// metricsAddr unless empty) and, when EVE_OTEL_EXPORTER is set, tracing.
// Large payloads go to tc's payload store (tc.Store), which New gives the
// worker's agent. close releases all of it.
func Dial(ctx context.Context, logger *slog.Logger, tc config.Temporal, metricsAddr string) (c client.Client, metricsURL string, close func(), err error) {
	m, err := metrics.New()
	if err != nil {
		return nil, "", nil, err
	}
	tp, err := tracing.FromEnv(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	var interceptors []interceptor.ClientInterceptor
	if tp != nil {
		ic, err := tracing.Interceptor(tp.Tracer("eve"))
		if err != nil {
			return nil, "", nil, err
		}
		interceptors = append(interceptors, ic)
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
		addr, err := m.Serve(ctx, metricsAddr)
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
