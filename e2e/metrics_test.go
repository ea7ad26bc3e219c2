package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/metrics"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/signals"
)

// The worker's /metrics shows the SDK's metrics and eve's own after a turn.
func TestMetricsEndpointShowsEveMetrics(t *testing.T) {
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	srv := devtest.Shared(t)
	c, err := srv.Dial(client.Options{MetricsHandler: m.Handler})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := evetest.NewOn(t, srv)
	env.Client = c
	env.Sessions = &sessions.Service{Client: c, TaskQueue: env.TaskQueue}
	a, _ := demo.Agent()
	env.StartWorker(a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Lima", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	// The send returns once the turn has reported its end, which it does
	// before its workflow completes: wait for that, so the SDK has counted it.
	turn := signals.TurnWorkflowID(res.SessionID, signals.TurnID(0))
	if err := c.GetWorkflow(ctx, turn, "").Get(ctx, nil); err != nil {
		t.Fatalf("turn %s: %v", turn, err)
	}
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`eve_turns_total{`, `status="completed"`,
		`eve_tool_calls_total{`, `tool="get_weather"`,
		`temporal_workflow_completed`,
		// The GenAI metrics (docs/observability.md).
		`gen_ai_client_operation_duration_seconds_bucket{`, `gen_ai_request_model="demo"`, `gen_ai_provider_name="scripted"`,
		`gen_ai_client_token_usage_total{`, `gen_ai_token_type="input"`, `gen_ai_token_type="output"`,
		`gen_ai_execute_tool_duration_seconds_bucket{`, `gen_ai_tool_name="get_weather"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
