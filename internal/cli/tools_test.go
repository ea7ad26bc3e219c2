package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/tools"
)

// toolsEnv is the demo agent's worker (executions included) and the tools
// API over HTTP.
func toolsEnv(t *testing.T) (*evetest.Env, string) {
	t.Helper()
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	// run_report spools job files; give it a directory and completion URLs.
	reg := tools.NewRegistry()
	for _, tl := range demo.Tools() {
		if tl.Name == "run_report" {
			tl = demo.RunReport(t.TempDir())
		}
		reg.MustRegister(tl)
	}
	a.Tools = reg
	actions, _, _ := env.Actions()
	w := worker.New(env.Client, env.TaskQueue, worker.Options{})
	if err := agent.Register(w, a, agent.Host{Store: env.Server.PayloadStore(), Actions: actions}); err != nil { // executions too
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return env, hs.URL
}

func TestToolsCommands(t *testing.T) {
	_, url := toolsEnv(t)
	out, err := runEve(t, "", "tools", "list", "--url", url)
	if err != nil || !strings.Contains(out, "demo.get_weather") || !strings.Contains(out, "demo.run_report") || !strings.Contains(out, "async") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = runEve(t, "", "tools", "get", "--url", url, "--format", "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	bundle := decodeOut[struct {
		Tools   []catalog.AnthropicTool `json:"tools"`
		NameMap catalog.ToolNameMap     `json:"nameMap"`
	}](t, out)
	if len(bundle.Tools) == 0 || bundle.NameMap.WireToCanonical["demo_get_weather"] != "demo.get_weather" {
		t.Fatalf("get: %s", out)
	}
	out, err = runEve(t, "", "tools", "get", "--url", url, "demo.choose_plan")
	if err != nil || !strings.Contains(out, `"executable": false`) {
		t.Fatalf("get one: %v %s", err, out)
	}
	out, err = runEve(t, "", "tools", "search", "--url", url, "weather", "for", "a", "city")
	if err != nil || !strings.Contains(strings.SplitN(out, "\n", 3)[1], "demo.get_weather") {
		t.Fatalf("search: %v\n%s", err, out)
	}
	out, err = runEve(t, "", "tools", "exec", "--url", url, "--user", "u1", "--key", "k1", "demo.get_weather", `{"city":"Paris"}`)
	if err != nil {
		t.Fatal(err)
	}
	first := decodeOut[catalog.ExecutionResult](t, out)
	if first.Status != catalog.StatusSucceeded || !strings.Contains(string(first.Output), "Paris") {
		t.Fatalf("exec: %s", out)
	}
	out, _ = runEve(t, `{"city":"Paris"}`, "tools", "exec", "--url", url, "--user", "u1", "--key", "k1", "demo.get_weather", "-")
	if again := decodeOut[catalog.ExecutionResult](t, out); again.ID != first.ID {
		t.Fatalf("same key, new execution: %s vs %s", again.ID, first.ID)
	}
	out, err = runEve(t, "", "tools", "status", "--url", url, first.ID)
	if err != nil || decodeOut[catalog.ExecutionResult](t, out).Status != catalog.StatusSucceeded {
		t.Fatalf("status: %v %s", err, out)
	}
	out, err = runEve(t, "", "tools", "run", "--url", url, "demo.get_weather", "--input", `{"city":"Oslo"}`)
	if err != nil || decodeOut[map[string]any](t, out)["city"] != "Oslo" {
		t.Fatalf("run: %v %s", err, out)
	}
	_, err = runEve(t, "", "tools", "exec", "--url", url, "demo.get_weather", `{"town":"Oslo"}`)
	mustFail(t, err, "does not match its schema", "town", "missing property")
	_, err = runEve(t, "", "tools", "exec", "--url", url, "demo.choose_plan", `{"accountId":"a"}`)
	mustFail(t, err, "client tool")
	_, err = runEve(t, "", "tools", "exec", "--url", url, "demo.get_weather", `[1]`)
	mustFail(t, err, "JSON object")
	// An async tool returns at once; cancel it.
	out, err = runEve(t, "", "tools", "exec", "--url", url, "demo.run_report", `{"name":"sales"}`)
	if err != nil {
		t.Fatal(err)
	}
	rep := decodeOut[catalog.ExecutionResult](t, out)
	if rep.Status.Terminal() {
		t.Fatalf("async exec: %s", out)
	}
	out, err = runEve(t, "", "tools", "cancel", "--url", url, rep.ID)
	if err != nil || decodeOut[catalog.ExecutionResult](t, out).Status != catalog.StatusCanceled {
		t.Fatalf("cancel: %v %s", err, out)
	}
}

// eve mcp on stdio, driven by the Go SDK's client.
func TestMCPCommandStdio(t *testing.T) {
	env, _ := toolsEnv(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	root := newRootCommand()
	root.SetIn(inR)
	root.SetOut(outW)
	var errOut bytes.Buffer
	root.SetErr(&errOut)
	root.SetArgs([]string{"mcp", "--address", env.Server.Addr, "--namespace", env.Server.Namespace, "--task-queue", env.TaskQueue, "--user", "cli"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr: %s)", err, errOut.String())
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "demo.deploy,demo.get_weather,demo.issue_credit,demo.publish_notes,demo.refund_charge,demo.research,demo.transfer_funds" { // refund_charge and transfer_funds are approval-gated: offered, a plain call refused; publish_notes delegates to the reviewer, so a call outside a turn is refused
		t.Fatalf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.get_weather", Arguments: map[string]any{"city": "Lima"}})
	if err != nil || res.IsError {
		t.Fatalf("call = %+v %v", res, err)
	}
	var w demo.Weather
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &w); err != nil || w.City != "Lima" {
		t.Fatalf("weather = %+v %v", w, err)
	}
	cs.Close()
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("eve mcp: %v (stderr: %s)", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("eve mcp did not stop when stdin closed")
	}
}
