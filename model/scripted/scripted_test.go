package scripted

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/model"
)

func TestStepsCapturesAndResults(t *testing.T) {
	m, err := Parse([]byte(`
name: t
default: "no idea"
rules:
  - match: 'weather in (?P<city>\w+)'
    calls: [{tool: get_weather, input: {city: "{{city}}"}}]
    reply: "{{result.get_weather.condition}} in {{city}}; first={{results.0.condition}}"
  - match: 'broken'
    steps:
      - calls: [{tool: t, inputJSON: '{"n": oops'}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs := []model.Message{{Role: model.RoleUser, Text: "what's the weather in Paris"}}
	r1, err := m.Step(ctx, model.Request{Messages: msgs}, nil)
	if err != nil || len(r1.ToolCalls) != 1 || string(r1.ToolCalls[0].Input) != `{"city":"Paris"}` || r1.FinishReason != model.FinishToolCalls {
		t.Fatalf("step 1 = %+v, %v", r1, err)
	}
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: r1.ToolCalls},
		model.Message{Role: model.RoleTool, ToolResults: []model.ToolResult{{CallID: r1.ToolCalls[0].ID, Name: "get_weather", Output: json.RawMessage(`{"condition":"sunny"}`)}}})
	var streamed strings.Builder
	r2, err := m.Step(ctx, model.Request{Messages: msgs}, func(d string) { streamed.WriteString(d) })
	if err != nil || r2.Text != "sunny in Paris; first=sunny" || r2.FinishReason != model.FinishStop || streamed.String() != r2.Text {
		t.Fatalf("step 2 = %+v (streamed %q), %v", r2, streamed.String(), err)
	}
	r3, _ := m.Step(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hello"}}}, nil)
	if r3.Text != "no idea" {
		t.Fatalf("default = %q", r3.Text)
	}
	r4, err := m.Step(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "broken"}}}, nil)
	if err != nil || !json.Valid(r4.ToolCalls[0].Input) || string(r4.ToolCalls[0].Input) != `"{\"n\": oops"` {
		t.Fatalf("malformed input = %s, %v", r4.ToolCalls[0].Input, err)
	}
}

func TestBadRules(t *testing.T) {
	for _, bad := range []string{
		`rules: [{match: "(", reply: x}]`,
		`rules: [{match: x, steps: [{calls: [{tool: a}], reply: b}]}]`,
		`rules: [{match: x, calls: [{input: {}}]}]`,
		`rules: {`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("rules %q accepted", bad)
		}
	}
}
