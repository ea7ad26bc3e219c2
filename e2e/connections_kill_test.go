package e2e

import (
	"cmp"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

const connectionKillRules = `
rules:
  - match: once
    steps:
      - calls: [{tool: once__trigger-long-running-operation, input: {duration: 4, steps: 4}}]
      - reply: "{{result.once__trigger-long-running-operation.code}}{{result.once__trigger-long-running-operation.content}}"
  - match: again
    steps:
      - calls: [{tool: again__trigger-long-running-operation, input: {duration: 4, steps: 4}}]
      - reply: "{{result.again__trigger-long-running-operation.code}}{{result.again__trigger-long-running-operation.content}}"
  - match: research
    steps:
      - calls: [{tool: task__simulate-research-query, input: {topic: "worker loss"}}]
      - reply: "{{result.task__simulate-research-query.code}}{{result.task__simulate-research-query.content}}"
`

// connectionKillAgent has two connections to one server: "again" as the
// server declares (the long-running tool is readOnly and idempotent, so
// retried), "once" with Retry overriding it to run at most once, and
// "task" for a tool the server runs as an MCP task (not idempotent).
func connectionKillAgent(mcpURL string) *agent.Agent {
	m, err := scripted.Parse([]byte(connectionKillRules))
	if err != nil {
		panic(err)
	}
	const tool = "trigger-long-running-operation"
	// The attempt lost with the killed worker ends at the timeout; the one
	// after it runs the 4 s operation within it, with room for a loaded
	// machine (an attempt that timed out too would be a third call).
	const timeout = 12 * time.Second
	set, err := connections.Static(
		&connections.Connection{Name: "again", MCP: &connections.MCP{URL: mcpURL}, Allow: []string{tool}, Timeout: timeout},
		&connections.Connection{Name: "once", MCP: &connections.MCP{URL: mcpURL}, Allow: []string{tool}, Timeout: timeout,
			Retry: map[string]bool{tool: false}},
		&connections.Connection{Name: "task", MCP: &connections.MCP{URL: mcpURL}, Allow: []string{"simulate-research-query"}},
	)
	if err != nil {
		panic(err)
	}
	return &agent.Agent{Name: "conn-kill", Model: m, Tools: tools.NewRegistry(), LocalModel: true, Resolvers: []tools.Resolver{set.Resolver()}}
}

// A worker killed (SIGKILL) in the middle of a remote call: the turn
// finishes on another worker; a call the server declares idempotent is
// sent again, one that must not be repeated is not (the model reads that
// it timed out). A call waiting for the server's task follows the same
// task from the new worker: tools/call is sent once.
func TestConnectionWorkerKilledMidCall(t *testing.T) {
	upstream := everythingHTTP(t)
	for _, tc := range []struct {
		msg    string
		killAt string
		calls  int
		reply  string
	}{
		{"once", "", 1, protocol.CodeToolTimeout},
		{"again", "", 2, "Long running operation completed"},
		// Killed once the server named its task (and the call follows it).
		{"research", "tasks/get", 1, "Research Report: worker loss"},
		// Killed before: the call may have started a task, and is not repeated.
		{"research", "tools/call", 1, "TOOL_EXECUTION_FAILED"},
	} {
		t.Run(tc.msg+"/"+cmp.Or(tc.killAt, "tools/call"), func(t *testing.T) {
			counter := &methodLog{first: make(chan struct{}), at: cmp.Or(tc.killAt, "tools/call")}
			first := counter.first
			proxy := httptest.NewServer(counter.handler(upstream))
			t.Cleanup(proxy.Close)
			env := evetest.New(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "EVE_E2E_WORKER_ADDR="+env.Server.Addr, "EVE_E2E_WORKER_TQ="+env.TaskQueue,
				"EVE_E2E_WORKER_AGENT=connection", "EVE_E2E_WORKER_MCP_URL="+proxy.URL+"/mcp", env.Server.PayloadStoreEnv())
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			ctx := env.Ctx(60 * time.Second)
			id, err := env.Sessions.Create(ctx, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: tc.msg}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-first:
			case <-ctx.Done():
				t.Fatal("the call never reached the server")
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			env.StartWorker(connectionKillAgent(proxy.URL + "/mcp"))
			var reply string
			for reply == "" {
				if ctx.Err() != nil {
					t.Fatalf("the turn did not finish; events: %s", evetest.Join(env.Events(env.Ctx(5*time.Second), id)))
				}
				for _, e := range evetest.Of(env.Events(ctx, id), protocol.MessageCompleted) {
					var d protocol.MessageCompletedData
					if err := e.Decode(&d); err != nil {
						t.Fatal(err)
					}
					reply = d.Message
				}
				time.Sleep(50 * time.Millisecond) // polling the events, not a barrier
			}
			calls := counter.count("tools/call")
			if !strings.Contains(reply, tc.reply) || calls != tc.calls {
				t.Fatalf("reply %q after %d calls; want %q after %d", reply, calls, tc.reply, tc.calls)
			}
		})
	}
}
