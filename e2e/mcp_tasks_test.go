package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
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
	return post2026(t, url, method, name, params)
}

func post2026(t *testing.T, url, method, name string, params map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
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

// approvalEnv serves the demo agent (refund_charge asks a person to
// approve every call) over MCP, on a worker that runs executions.
func approvalEnv(t *testing.T) (*evetest.Env, *toolsapi.Service, string) {
	t.Helper()
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	startExecutionWorker(t, env, a)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	return env, svc, hs.URL
}

// An approval-gated tool is offered over MCP: as a task it waits for the
// caller's approval (input_required, an elicitation form); tasks/update
// approves it and it runs, or denies it and it does not. A plain call is
// refused, saying why.
func TestMCPApprovalOverTasks(t *testing.T) {
	env, svc, url := approvalEnv(t)
	ctx := env.Ctx(60 * time.Second)
	const tool = "demo.refund_charge"
	if st, res, rerr := modernCallPlain(t, url, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{"chargeId": "ch_0", "amount": 1}}); st != 200 || rerr != nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "approval") {
		t.Fatalf("plain call: %d %v %v", st, res, rerr)
	}
	for _, tc := range []struct {
		answer map[string]any
		want   string
	}{
		{map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}, `"refunded":5`},
		{map[string]any{"action": "decline"}, "denied by alice"},
	} {
		_, created, rerr := modernCall(t, url, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{"chargeId": "ch_9", "amount": 5}})
		if rerr != nil || created["resultType"] != "task" {
			t.Fatalf("create: %v %v", created, rerr)
		}
		id := created["taskId"].(string)
		var got map[string]any
		for got["status"] != "input_required" {
			if ctx.Err() != nil {
				t.Fatalf("the task never asked: %v", got)
			}
			_, got, rerr = modernCall(t, url, "tasks/get", id, map[string]any{"taskId": id})
			if rerr != nil || (got["status"] != "working" && got["status"] != "input_required") {
				t.Fatalf("tasks/get: %v %v", got, rerr)
			}
		}
		req := got["inputRequests"].(map[string]any)["approval"].(map[string]any)
		if req["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(req["params"]), "refund_charge") {
			t.Fatalf("input request = %v", req)
		}
		// Another user cannot answer it.
		stranger, _ := mcpserver.New(mcpserver.Options{Tools: svc, UserID: "mallory"})
		shs := httptest.NewServer(stranger.HTTPHandler(nil))
		if _, _, rerr := modernCall(t, shs.URL, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{"approval": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}); rpcCode(rerr) != -32602 {
			t.Fatalf("a stranger's answer: %v", rerr)
		}
		shs.Close()
		if _, ack, rerr := modernCall(t, url, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{"approval": tc.answer}}); rerr != nil || ack["resultType"] != "complete" || len(ack) != 1 {
			t.Fatalf("tasks/update: %v %v", ack, rerr)
		}
		if _, err := svc.Wait(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		_, got, rerr = modernCall(t, url, "tasks/get", id, map[string]any{"taskId": id})
		if rerr != nil || got["status"] != "completed" || !strings.Contains(mustJSON(got["result"]), tc.want) {
			t.Fatalf("after %v: %v %v", tc.answer, got, rerr)
		}
		denied := tc.answer["action"] != "accept"
		if isErr, _ := got["result"].(map[string]any)["isError"].(bool); isErr != denied {
			t.Fatalf("after %v: isError %v", tc.answer, isErr)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// modernCallPlain is modernCall without the tasks extension.
func modernCallPlain(t *testing.T, url, method, name string, params map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	return post2026(t, url, method, name, params)
}

// A 2026-07-28 client that can elicit gets an approval-gated tool's
// approval as an InputRequiredResult (SEP-2322): the Go SDK's client asks
// its elicitation handler and retries with the answer; approved, the tool
// runs; declined, it does not.
func TestMCPApprovalAsInputRequired(t *testing.T) {
	env, _, url := approvalEnv(t)
	ctx := env.Ctx(60 * time.Second)
	for _, tc := range []struct {
		action string
		want   string
		isErr  bool
	}{{"accept", `"refunded":7`, false}, {"decline", "denied by alice", true}} {
		var asked string
		c := mcp.NewClient(&mcp.Implementation{Name: "elicits", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = req.Params.Message
				return &mcp.ElicitResult{Action: tc.action, Content: map[string]any{"confirm": tc.action == "accept"}}, nil
			},
		})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.refund_charge", Arguments: map[string]any{"chargeId": "ch_7", "amount": 7}})
		cs.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(asked, "refund_charge") {
			t.Fatalf("%s: the client was asked %q", tc.action, asked)
		}
		if res.IsError != tc.isErr || !strings.Contains(mustJSON(res), tc.want) {
			t.Fatalf("%s: %s", tc.action, mustJSON(res))
		}
	}
}
