package main

import (
	_ "embed"
	"encoding/json"
	"os"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

//go:embed rules.yaml
var rules []byte

// DefaultEndpoint is the Nexus endpoint the agent calls, unless
// PAYMENTS_ENDPOINT names another. An operator creates it once; it names
// the handler's namespace and task queue, which the agent never sees.
const DefaultEndpoint = "payments"

// Agent is the payments agent: one Nexus tool.
func Agent() (*agent.Agent, error) {
	endpoint := os.Getenv("PAYMENTS_ENDPOINT")
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	return NewAgent(endpoint)
}

// NewAgent is Agent calling the given endpoint.
func NewAgent(endpoint string) (*agent.Agent, error) {
	m, err := scripted.Parse(rules)
	if err != nil {
		return nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(RefundTool(endpoint)); err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "payments", Model: m, Tools: reg, LocalModel: true}, nil
}

// RefundTool offers the operation payments/refund behind endpoint to the
// model. The operation's schedule-to-close timeout is the call's deadline.
func RefundTool(endpoint string) *tools.Tool {
	return tools.DefineNexus("refund", "Refund a card charge in full (the payments team's refund saga).",
		json.RawMessage(`{"type":"object","properties":{"charge":{"type":"string","pattern":"^ch_\\w+$"}},"required":["charge"],"additionalProperties":false}`),
		json.RawMessage(`{"type":"object","properties":{"refundId":{"type":"string"},"amount":{"type":"integer"},"currency":{"type":"string"}},"required":["refundId","amount","currency"]}`),
		tools.Nexus{Endpoint: endpoint, Service: ServiceName, Operation: RefundOperation, ScheduleToClose: 10 * time.Minute})
}
