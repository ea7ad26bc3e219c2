package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// eve-park/http+sa is the park as an app drives it: the session created
// with its message over HTTP (an API server configured as eve's hosts
// configure theirs: the message in the start request, the search
// attributes known), the park read from the stream, the approval posted
// over HTTP. Timed from the approval's POST until the session's last event
// is session.waiting (polled every 2 ms); counted like the other park rows
// (start, park, respond, done). The eve-park rows create with
// sessions.Service's Update (Wait), which waits for the park in the
// session: one billable Update more than this path.
func init() {
	scenarios = append(scenarios, scenario{name: "eve-park/http+sa", baseline: "raw-park/regular", latency: true, hops: true,
		configs: []string{"fast"}, setup: withSearchAttributes(eveParkHTTP)})
}

func eveParkHTTP(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	m, err := scripted.Parse([]byte(benchRules))
	if err != nil {
		return nil, nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(weatherTool(false, true)); err != nil {
		return nil, nil, err
	}
	tq := env.Queue("eve-park-http-sa")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	if err := agent.Register(w, &agent.Agent{Name: "bench", Model: m, Tools: reg}, agent.Host{Store: env.Store, SearchAttributes: true, InboxAttributes: true, Client: env.Client}); err != nil {
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq, StartWithMessage: true, SearchAttributes: true}
	h, err := api.New(api.Options{Sessions: svc})
	if err != nil {
		w.Stop()
		return nil, nil, err
	}
	hs := httptest.NewServer(h)
	hc := &http.Client{}
	cleanup := func() { hs.Close(); w.Stop() }
	return func(ctx context.Context, i int) (time.Duration, error) {
		id, err := httpCreate(ctx, hc, hs.URL)
		if err != nil {
			return 0, err
		}
		if hopsRequested(ctx) {
			recordHop(ctx, id)
		}
		if err := waitEventEvery(ctx, svc, id, protocol.TurnWaiting, 5*time.Millisecond); err != nil {
			return 0, err
		}
		start := time.Now()
		body := `{"inputResponses":[{"requestId":"apr_call_1_0","optionId":"approve"}]}`
		req, err := http.NewRequestWithContext(ctx, "POST", hs.URL+"/eve/v1/session/"+id, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("approve: HTTP %d", resp.StatusCode)
		}
		if err := waitEventEvery(ctx, svc, id, protocol.SessionWaiting, 2*time.Millisecond); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}, cleanup, nil
}

// waitEventEvery is waitEvent polling every d.
func waitEventEvery(ctx context.Context, svc *sessions.Service, id, typ string, d time.Duration) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := svc.Events(ctx, id, 0)
		if err == nil && len(evs) > 0 && evs[len(evs)-1].Type == typ {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: no %s (%v)", id, typ, err)
		}
		time.Sleep(d)
	}
}
