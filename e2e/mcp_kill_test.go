package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
)

// mcpMain runs this test binary as `eve mcp` for the demo agent when asked
// to (EVE_E2E_MCP_ARGS, space-separated), so a test can SIGKILL an MCP
// server process.
func mcpMain() bool {
	args := os.Getenv("EVE_E2E_MCP_ARGS")
	if args == "" {
		return false
	}
	cmd := cli.NewRootCommand(cli.App{Name: "eve", Agent: demo.Agent})
	cmd.SetArgs(strings.Fields(args))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// startMCPProcess starts `eve mcp --http` in its own process against the
// test's Temporal and task queue, and returns its URL once it answers.
func startMCPProcess(t *testing.T, temporalAddr, taskQueue, storeEnv string) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), storeEnv, "EVE_E2E_MCP_ARGS=mcp --http "+addr+" --address "+temporalAddr+" --task-queue "+taskQueue+" --user mcp_user")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://" + addr + cli.MCPPath
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return cmd, url
		}
		if time.Now().After(deadline) {
			t.Fatalf("eve mcp at %s never answered: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the listener, bounded above
	}
}

// A task outlives the eve mcp process that created it: process A starts
// the task and is SIGKILLed; process B, which shares nothing with A but
// Temporal, reads it and cancels it.
func TestMCPTaskSurvivesAKilledProcess(t *testing.T) {
	t.Setenv("EVE_JOBS_DIR", t.TempDir()) // run_report's job spool, for both processes
	e := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := e.Actions()
	startExecutionWorkerHost(t, e, a, agent.Host{Actions: cfg})
	tq := e.TaskQueue

	procA, urlA := startMCPProcess(t, e.Server.Addr, tq, e.Server.PayloadStoreEnv())
	const tool = "demo.run_report"
	st, created, rerr := modernCall(t, urlA, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{"name": "sales"}})
	if st != 200 || rerr != nil || created["resultType"] != "task" || created["status"] != mcpserver.TaskWorking {
		t.Fatalf("create on A: %d %v %v", st, created, rerr)
	}
	id := created["taskId"].(string)
	if err := procA.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := procA.Wait(); err == nil || !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("A was not killed: %v", err)
	}

	_, urlB := startMCPProcess(t, e.Server.Addr, tq, e.Server.PayloadStoreEnv())
	st, got, rerr := modernCall(t, urlB, "tasks/get", id, map[string]any{"taskId": id})
	if st != 200 || rerr != nil || got["status"] != mcpserver.TaskWorking || got["createdAt"] != created["createdAt"] {
		t.Fatalf("tasks/get on B: %d %v %v (created %v)", st, got, rerr, created)
	}
	if st, _, rerr := modernCall(t, urlB, "tasks/cancel", id, map[string]any{"taskId": id}); st != 200 || rerr != nil {
		t.Fatalf("tasks/cancel on B: %d %v", st, rerr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, got, rerr = modernCall(t, urlB, "tasks/get", id, map[string]any{"taskId": id})
		if rerr == nil && got["status"] == mcpserver.TaskCancelled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not cancelled: %v %v", got, rerr)
		}
		time.Sleep(100 * time.Millisecond) // polling the task's state, bounded above
	}
}
