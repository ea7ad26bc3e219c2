package eve_test

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os/signal"
	"syscall"

	"github.com/eve-temporal/eve"
	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// A whole app: its tools, its model, and a main that hands the agent to
// eve.Main. The binary then runs `shop dev` (dev server, worker and API
// server), `shop worker`, `shop serve`, `shop mcp`, `shop session send ...`
// and the other commands, with eve's flags and environment.
func ExampleMain() {
	newAgent := func() (*agent.Agent, error) {
		m, err := scripted.Parse([]byte(`
name: shop
default: "Ask me about a price."
rules:
  - match: 'price of (?P<item>\w+)'
    calls: [{tool: lookup_product, input: {sku: "{{item}}"}}]
    reply: "{{result.lookup_product.priceCents}} cents."
`))
		if err != nil {
			return nil, err
		}
		// A plain tool (an activity).
		lookup := tools.Func("lookup_product", "Look up a product's price.",
			func(ctx *tools.Context, in struct {
				SKU string `json:"sku"`
			}) (map[string]int, error) {
				return map[string]int{"priceCents": 1200}, nil
			})
		// An approval-gated tool: a person approves every call.
		refund := tools.Func("refund_order", "Refund an order.",
			func(ctx *tools.Context, in struct {
				OrderID string `json:"orderId"`
			}) (string, error) {
				return "refunded", nil
			})
		refund.Approval = approval.Always()
		// A client tool: the app's user answers it.
		shipping := tools.DefineClient("choose_shipping", "Ask how to ship.", json.RawMessage(`{"type":"object"}`),
			tools.Client{Request: tools.InputRequest{Prompt: "How should we ship it?", Display: protocol.DisplaySelect,
				Options: []protocol.InputOption{{ID: "standard", Label: "Standard"}, {ID: "express", Label: "Express"}}}})
		// A delegated tool: a job finishes it through its completion URL.
		pack := tools.DefineDelegated("pack_order", "Pack an order.", json.RawMessage(`{"type":"object"}`), nil,
			tools.Delegated{Delegate: func(ctx *tools.Context, in json.RawMessage, a tools.Action) (tools.Pending, error) {
				go actions.Complete(context.Background(), a.Completion, map[string]string{"box": "b1"}) // a real job runs elsewhere
				return a.Pending(), nil
			}})
		reg := tools.NewRegistry()
		if err := reg.Register(lookup, refund, shipping, pack); err != nil {
			return nil, err
		}
		return &agent.Agent{Name: "shop", Model: m, Tools: reg, LocalModel: true}, nil
	}
	eve.Main(newAgent)
}

// A process that runs a worker for its agent itself: the worker command's
// settings from the environment (TEMPORAL_*, EVE_PAYLOAD_STORE,
// EVE_ACTION_SECRET, EVE_PUBLIC_URL, limits, metrics), graceful stop on
// SIGTERM.
func ExampleNewWorker() {
	var a *agent.Agent // your agent
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w, err := eve.NewWorker(ctx, a, eve.WorkerOptionsFromEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// An API server in your own HTTP stack: the session protocol under
// /eve/v1/, the agent's tools API under /v1/ and completion URLs.
func ExampleNewHandler() {
	var a *agent.Agent // your agent (its tools describe the tools API)
	ctx := context.Background()
	t := eve.TemporalFromEnv()
	c, _, err := eve.Dial(ctx, t, nil) // the same payload store as the workers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	h, err := eve.NewHandler(c, a, eve.ServerOptions{
		TaskQueue:    t.TaskQueue,
		Addr:         "127.0.0.1:4111",
		APIKey:       "a long random key",
		ActionSecret: "the workers' EVE_ACTION_SECRET",
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:4111", h))
}
