package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

//go:embed rules.yaml
var rules []byte

// Agent is the shop agent: one tool of every kind and its scripted rules.
func Agent() (*agent.Agent, error) {
	m, err := scripted.Parse(rules)
	if err != nil {
		return nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(LookupProduct(), RefundOrder(), ChooseShipping(), PackOrder()); err != nil {
		return nil, err
	}
	a := &agent.Agent{Name: "shop", Model: m, Tools: reg, LocalModel: true}
	if url := os.Getenv("SHOP_SUPPLIER_MCP_URL"); url != "" {
		set, err := Supplier(url)
		if err != nil {
			return nil, err
		}
		a.Resolvers = append(a.Resolvers, set.Resolver())
	}
	return a, nil
}

// Supplier is a connection: the tools of the supplier's MCP server
// (streamable HTTP at url, SHOP_SUPPLIER_MCP_URL), offered to the model
// as supplier__<tool>. Discovery runs in an activity once per session,
// and every call is an activity; docs/connections.md.
func Supplier(url string) (*connections.Set, error) {
	return connections.Static(&connections.Connection{
		Name:        "supplier",
		Description: "The supplier's stock.",
		MCP:         &connections.MCP{URL: url},
		Allow:       []string{"stock"},
	})
}

// Product is lookup_product's output.
type Product struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int    `json:"priceCents"`
}

var products = map[string]Product{
	"mug":    {SKU: "mug", Name: "mug", PriceCents: 1200},
	"poster": {SKU: "poster", Name: "poster", PriceCents: 2500},
}

// LookupProduct is a plain tool: it runs as a Temporal activity.
func LookupProduct() *tools.Tool {
	t := tools.Func("lookup_product", "Look up a product's name and price by SKU.",
		func(ctx *tools.Context, in struct {
			SKU string `json:"sku"`
		}) (Product, error) {
			p, ok := products[strings.ToLower(in.SKU)]
			if !ok {
				return Product{}, tools.NonRetryable(fmt.Errorf("no product %q", in.SKU))
			}
			return p, nil
		})
	t.Idempotent = true // a read: safe to retry
	return t
}

// RefundOrder is approval-gated: a person approves every call.
func RefundOrder() *tools.Tool {
	t := tools.Func("refund_order", "Refund an order. A person approves every refund.",
		func(ctx *tools.Context, in struct {
			OrderID string `json:"orderId"`
		}) (map[string]any, error) {
			return map[string]any{"status": "refunded", "orderId": in.OrderID, "idempotencyKey": ctx.IdempotencyKey}, nil
		})
	t.Approval = approval.Always()
	return t
}

// ChooseShipping is a client tool: the app's user answers it.
func ChooseShipping() *tools.Tool {
	return tools.DefineClient("choose_shipping", "Ask the customer how to ship an order.",
		json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"]}`),
		tools.Client{Request: tools.InputRequest{
			Prompt:  "How should we ship it?",
			Display: protocol.DisplaySelect,
			Options: []protocol.InputOption{{ID: "standard", Label: "Standard"}, {ID: "express", Label: "Express"}},
		}})
}

// PackOrder is delegated: a warehouse job packs the order and completes
// the call through its completion URL (a signed URL on the API server, so
// the job needs no other credential). Here the "warehouse" is a goroutine;
// a real one would enqueue the action (its ID is the idempotency key) and
// complete it from another process, possibly days later.
func PackOrder() *tools.Tool {
	return tools.DefineDelegated("pack_order", "Pack an order in the warehouse and report the box it is in.",
		json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string","minLength":1}},"required":["orderId"],"additionalProperties":false}`),
		json.RawMessage(`{"type":"object","properties":{"status":{"const":"packed"},"box":{"type":"string"}},"required":["status","box"]}`),
		tools.Delegated{
			Deadline: time.Hour,
			Delegate: func(ctx *tools.Context, input json.RawMessage, a tools.Action) (tools.Pending, error) {
				var in struct {
					OrderID string `json:"orderId"`
				}
				if err := json.Unmarshal(input, &in); err != nil {
					return tools.Pending{}, tools.NonRetryable(err)
				}
				go warehouseJob(a.Completion, in.OrderID)
				return a.Pending(), nil
			},
		})
}

func warehouseJob(c tools.Completion, orderID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	time.Sleep(200 * time.Millisecond) // packing
	if err := actions.Complete(ctx, c, map[string]any{"status": "packed", "box": "box-" + orderID}); err != nil {
		fmt.Println("warehouse job:", err)
	}
}
