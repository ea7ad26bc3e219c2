package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// modernCall sends one stateless (MCP 2026-07-28) request that negotiates
// the tasks extension, with the SEP-2243 headers, and returns the HTTP
// status, the result and the error.
func modernCall(t *testing.T, url, method, name string, params map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpserver.TasksExtension: map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return resp.StatusCode, out.Result, out.Error
}

// A task outlives the eve mcp instance that created it: instance A starts
// the task (an execution workflow) and goes away; instance B, which shares
// nothing with A but Temporal, reads it and cancels it.
func TestMCPTaskSurvivesItsInstance(t *testing.T) {
	e := newTapiEnv(t, nil)
	instance := func() (*httptest.Server, *toolsapi.Service) {
		svc, err := toolsapi.New(toolsapi.Options{Client: e.Client, TaskQueue: e.TaskQueue, Agent: e.agent})
		if err != nil {
			t.Fatal(err)
		}
		s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "mcp_user"})
		if err != nil {
			t.Fatal(err)
		}
		return httptest.NewServer(s.HTTPHandler(nil)), svc
	}
	a, _ := instance()
	st, created, rerr := modernCall(t, a.URL, "tools/call", "ops.report", map[string]any{"name": "ops.report", "arguments": map[string]any{"spec": "outlive"}})
	if st != 200 || rerr != nil || created["resultType"] != "task" || created["status"] != mcpserver.TaskWorking {
		t.Fatalf("create: %d %v %v", st, created, rerr)
	}
	id := created["taskId"].(string)
	select {
	case <-e.jobs: // the delegated job started: the execution runs
	case <-time.After(20 * time.Second):
		t.Fatal("no job")
	}
	a.CloseClientConnections()
	a.Close() // instance A is gone

	b, svcB := instance()
	t.Cleanup(b.Close)
	st, got, rerr := modernCall(t, b.URL, "tasks/get", id, map[string]any{"taskId": id})
	if st != 200 || rerr != nil || got["status"] != mcpserver.TaskWorking || got["createdAt"] != created["createdAt"] || got["resultType"] != "complete" {
		t.Fatalf("tasks/get on B: %d %v %v (created %v)", st, got, rerr, created)
	}
	if st, ack, rerr := modernCall(t, b.URL, "tasks/cancel", id, map[string]any{"taskId": id}); st != 200 || rerr != nil || ack["resultType"] != "complete" || len(ack) != 1 {
		t.Fatalf("tasks/cancel on B: %d %v %v", st, ack, rerr)
	}
	// Wait for the workflow to end (Temporal long-poll), then read it.
	if res, err := svcB.Wait(e.Ctx(30*time.Second), id, 0); err != nil || res.Status.Terminal() == false {
		t.Fatalf("wait: %+v %v", res, err)
	}
	if _, got, rerr = modernCall(t, b.URL, "tasks/get", id, map[string]any{"taskId": id}); rerr != nil || got["status"] != mcpserver.TaskCancelled {
		t.Fatalf("after cancel: %v %v", got, rerr)
	}
	// Unknown ids are invalid params; another user's task is unknown.
	if st, _, rerr := modernCall(t, b.URL, "tasks/get", "exec_nope", map[string]any{"taskId": "exec_nope"}); st != 400 || rpcCode(rerr) != -32602 {
		t.Fatalf("unknown task: %d %v", st, rerr)
	}
	svcC, _ := toolsapi.New(toolsapi.Options{Client: e.Client, TaskQueue: e.TaskQueue, Agent: e.agent})
	other, _ := mcpserver.New(mcpserver.Options{Tools: svcC, UserID: "someone_else"})
	ohs := httptest.NewServer(other.HTTPHandler(nil))
	t.Cleanup(ohs.Close)
	if _, _, rerr := modernCall(t, ohs.URL, "tasks/get", id, map[string]any{"taskId": id}); rpcCode(rerr) != -32602 {
		t.Fatalf("another user read the task: %v", rerr)
	}
}
