package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/tools"
)

// A tool's progress reports reach the MCP client as notifications/progress
// while the call runs: the tool runs in a worker's activity, its reports
// are heartbeats on the real dev server, and the MCP server relays them.
// The tool moves to its next step only once the client has seen the last,
// so every report is observed before the call answers.
func TestMCPProgressRelay(t *testing.T) {
	env := evetest.New(t)
	next := make(chan struct{})
	steps := []float64{10, 60, 90}
	progress := tools.Func("progress", "Reports three steps.", func(ctx *tools.Context, _ struct{}) (string, error) {
		for _, p := range steps {
			// Re-reported while it waits: the heartbeat keeps the attempt
			// alive, and the same report is no new notification.
			tick := time.NewTicker(300 * time.Millisecond)
		wait:
			for {
				ctx.ReportProgress(p, 100, "step")
				select {
				case <-next:
					break wait
				case <-tick.C:
				case <-ctx.Done():
					tick.Stop()
					return "", ctx.Err()
				}
			}
			tick.Stop()
		}
		return "done", nil
	})
	// The worker sends a heartbeat at most evetest.HeartbeatThrottle after
	// the report (startExecutionWorker): the timeout is slack for a loaded
	// machine, not a pace. An attempt that timed out would start over at
	// the first step, which this test would read as a repeated report.
	progress.HeartbeatTimeout = 5 * time.Second
	a := evetest.Agent(t, `rules: []`, progress)
	a.Name = "ops"
	startExecutionWorker(t, env, a)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "mcp_user"})
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			ctx := env.Ctx(90 * time.Second)
			got := make(chan *mcp.ProgressNotificationParams, 10)
			cs := mcpConnectWith(t, ctx, s, transport, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				got <- r.Params
			}})
			params := &mcp.CallToolParams{Name: "ops.progress", Arguments: map[string]any{}}
			params.SetProgressToken("tok-" + transport)
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(ctx, params)
				done <- answer{res, err}
			}()
			for i, want := range steps {
				select {
				case n := <-got:
					if n.ProgressToken != "tok-"+transport || n.Progress != want || n.Total != 100 || n.Message != "step" {
						t.Fatalf("notification %d = %+v, want progress %g of 100", i, n, want)
					}
				case a := <-done:
					t.Fatalf("the call answered before progress %g: %+v %v", want, a.res, a.err)
				case <-ctx.Done():
					t.Fatalf("no notification for progress %g", want)
				}
				next <- struct{}{}
			}
			select {
			case a := <-done:
				if a.err != nil || a.res.IsError || mcpText(a.res) != "done" {
					t.Fatalf("call: %+v %v", a.res, a.err)
				}
			case <-ctx.Done():
				t.Fatal("the call did not answer")
			}
			select {
			case n := <-got:
				t.Fatalf("a notification after the answer: %+v", n)
			default:
			}
		})
	}
}
