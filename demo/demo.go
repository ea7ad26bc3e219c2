// Package demo is the example agent that `eve dev` and cmd/worker serve by
// default: a few tools and a scripted model, so everything runs without an
// API key.
package demo

import (
	_ "embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

//go:embed rules.yaml
var rules []byte

// Rules returns the demo's scripted-model rules (YAML).
func Rules() []byte { return rules }

// WeatherInput is get_weather's input.
type WeatherInput struct {
	City string `json:"city" jsonschema:"the city to report on, e.g. Paris"`
}

// Weather is get_weather's output.
type Weather struct {
	City         string `json:"city"`
	Condition    string `json:"condition"`
	TemperatureC int    `json:"temperatureC"`
}

var conditions = []string{"sunny", "cloudy", "rainy", "windy", "foggy"}

// GetWeather returns deterministic mock weather for a city.
func GetWeather() *tools.Tool {
	t := tools.Func("get_weather", "Return the current weather for a city.",
		func(ctx *tools.Context, in WeatherInput) (Weather, error) {
			city := strings.TrimSpace(in.City)
			if city == "" {
				return Weather{}, tools.NonRetryable(fmt.Errorf("city is empty"))
			}
			h := fnv.New32a()
			h.Write([]byte(strings.ToLower(city)))
			n := h.Sum32()
			return Weather{City: city, Condition: conditions[n%uint32(len(conditions))], TemperatureC: int(n%30) + 5}, nil
		})
	// Require a non-empty city in the schema too, so bad input never runs.
	t.InputSchema = []byte(`{"type":"object","properties":{"city":{"type":"string","minLength":1,"description":"the city to report on, e.g. Paris"}},"required":["city"],"additionalProperties":false}`)
	return t
}

// Tools returns the demo agent's tools.
func Tools() []*tools.Tool {
	return []*tools.Tool{GetWeather(), RefundCharge(), TransferFunds(), IssueCredit(), ChoosePlan(), PickAddons(), RunReport(""), Provision(), Deploy(), Research()}
}

// Model returns the demo's scripted model.
func Model() model.Model {
	m, err := scripted.Parse(rules)
	if err != nil {
		panic(fmt.Sprintf("demo rules: %v", err))
	}
	return m
}

// Agent returns the demo agent, ready to register on a worker.
func Agent() (*agent.Agent, error) {
	reg := tools.NewRegistry()
	// publish_notes delegates to the code-only reviewer (reviewer.go).
	if err := reg.Register(append(Tools(), PublishNotes())...); err != nil {
		return nil, err
	}
	researcher, err := Researcher()
	if err != nil {
		return nil, err
	}
	reviewer, err := Reviewer()
	if err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "demo", Model: Model(), Tools: reg, LocalModel: true, RegisterWorker: RegisterProvision,
		Subagents: []*agent.Agent{researcher, reviewer}}, nil
}
