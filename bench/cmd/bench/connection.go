package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// eve-turn/connection is eve-turn/regular with the weather tool served by
// an MCP server (streamable HTTP, in this process) through a connection
// instead of authored: the same turn, plus the session's discovery
// (tools/list in the resolve activity) and an MCP session per call.
func init() {
	scenarios = append(scenarios, scenario{
		name: "eve-turn/connection", baseline: "eve-turn/regular", latency: true, throughput: true, hops: true,
		setup: eveConnectionSetup,
	})
}

const connectionBenchRules = `
rules:
  - match: weather
    steps:
      - calls: [{tool: weather__get_weather, input: {city: "Lisbon"}}]
      - reply: "It is {{result.weather__get_weather.structuredContent.condition}} in Lisbon."
`

type weatherIn struct {
	City string `json:"city"`
}

type weatherOut struct {
	City      string `json:"city"`
	Condition string `json:"condition"`
}

// weatherServer serves get_weather over MCP streamable HTTP on a loopback
// port.
func weatherServer() (url string, stop func(), err error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get_weather", Description: "Weather for a city.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in weatherIn) (*mcp.CallToolResult, weatherOut, error) {
			h := fnv.New32a()
			h.Write([]byte(in.City))
			return nil, weatherOut{City: in.City, Condition: []string{"sunny", "cloudy"}[h.Sum32()%2]}, nil
		})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return "http://" + l.Addr().String() + "/mcp", func() { srv.Close() }, nil
}

func eveConnectionSetup(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	m, err := scripted.Parse([]byte(connectionBenchRules))
	if err != nil {
		return nil, nil, err
	}
	url, stopServer, err := weatherServer()
	if err != nil {
		return nil, nil, err
	}
	set, err := connections.Static(&connections.Connection{Name: "weather", MCP: &connections.MCP{URL: url}})
	if err != nil {
		stopServer()
		return nil, nil, err
	}
	tq := env.Queue("eve-connection")
	w := worker.New(env.Client, tq, env.WorkerOptions)
	a := &agent.Agent{Name: "bench", Model: m, Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{set.Resolver()}}
	if err := agent.Register(w, a, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
		stopServer()
		return nil, nil, err
	}
	if err := w.Start(); err != nil {
		stopServer()
		return nil, nil, err
	}
	svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
	stop := func() { w.Stop(); set.Close(); stopServer() }
	return func(ctx context.Context, i int) (time.Duration, error) {
		res, err := svc.CreateAndSend(ctx, hopSession(ctx), nil, signals.SendRequest{Message: "weather", Wait: true})
		if err != nil {
			return 0, err
		}
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted || res.Outcome.Reply == "It is  in Lisbon." {
			return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
		}
		return 0, nil
	}, stop, nil
}
