package cli

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/tools"
)

// Each command that serves the agent closes its resolvers (a connection
// set's stdio servers) when it stops: here when it fails to reach
// Temporal, the same deferred close as after a stop by signal.
func TestCommandsCloseResolvers(t *testing.T) {
	for _, name := range []string{"worker", "serve", "mcp"} {
		t.Run(name, func(t *testing.T) {
			var closed atomic.Int32
			app := App{Name: "eve", TaskQueue: config.DefaultTaskQueue, Agent: func() (*agent.Agent, error) {
				a, err := demo.Agent()
				if err != nil {
					return nil, err
				}
				a.Resolvers = append(a.Resolvers, tools.Resolver{Name: "conns", Scope: tools.ScopeSession,
					Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) { return nil, nil },
					Close:   func() error { closed.Add(1); return nil }})
				return a, nil
			}}
			root := NewRootCommand(app)
			root.SetIn(&bytes.Buffer{})
			root.SetOut(&bytes.Buffer{})
			root.SetErr(&bytes.Buffer{})
			// Nothing listens on port 1: the command fails to dial.
			args := []string{name, "--address", "127.0.0.1:1"}
			if name == "worker" {
				args = append(args, "--metrics-addr", "")
			}
			root.SetArgs(args)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := root.ExecuteContext(ctx); err == nil {
				t.Fatalf("eve %s against nothing succeeded", name)
			}
			if got := closed.Load(); got != 1 {
				t.Fatalf("eve %s closed the resolver %d times, want 1", name, got)
			}
		})
	}
}
