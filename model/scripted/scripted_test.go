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

// TestTemplates: paths walk objects and arrays; a missing last field
// renders empty; anything else that cannot be filled is an error naming
// the template.
func TestTemplates(t *testing.T) {
	echo := `{"content":[{"type":"text","text":"hi"},{"type":"text","text":"there"}],"isError":false,"n":3,"body":null}`
	tests := []struct {
		name, tmpl, want, wantErr string
		failed                    bool // the call failed: its output is {error, code}
	}{
		{name: "failed call: a missing nested path is empty", failed: true, tmpl: "[{{result.echo.body.name}}]{{result.echo.error}}", want: "[]no route"},
		{name: "failed call: code", failed: true, tmpl: "{{result.echo.code}}", want: "TOOL_EXECUTION_FAILED"},
		{name: "failed call: a field of its error string", failed: true, tmpl: "{{result.echo.error.x}}",
			wantErr: `error is a string, not an object or array: it has no "x"`},
		{name: "array index then field", tmpl: "{{result.echo.content.0.text}}", want: "hi"},
		{name: "second item", tmpl: "{{ result.echo.content.1.text }}", want: "there"},
		{name: "whole array as JSON", tmpl: "{{result.echo.content}}", want: `[{"text":"hi","type":"text"},{"text":"there","type":"text"}]`},
		{name: "number", tmpl: "{{result.echo.n}}", want: "3"},
		{name: "boolean", tmpl: "{{result.echo.isError}}", want: "false"},
		{name: "null", tmpl: "{{result.echo.body}}", want: ""},
		{name: "missing last field renders empty", tmpl: "[{{result.echo.error}}]", want: "[]"},
		{name: "results.N with an index", tmpl: "{{results.0.content.1.text}}", want: "there"},
		{name: "capture", tmpl: "{{who}}/{{1}}", want: "bob/bob"},
		{name: "no note", tmpl: "[{{note.echo}}]", want: "[]"},
		{name: "index out of range", tmpl: "{{result.echo.content.2.text}}",
			wantErr: `template {{result.echo.content.2.text}}: content is an array of 2: index 2 is out of range`},
		{name: "field of an array", tmpl: "{{result.echo.content.text}}",
			wantErr: `template {{result.echo.content.text}}: content is an array of 2: index it with a number from 0, not "text"`},
		{name: "negative index", tmpl: "{{result.echo.content.-1}}",
			wantErr: `content is an array of 2: index it with a number from 0, not "-1"`},
		{name: "missing field before the last", tmpl: "{{result.echo.contnet.0.text}}",
			wantErr: `template {{result.echo.contnet.0.text}}: the result has no field "contnet" (fields: body, content, isError, n)`},
		{name: "field of a string", tmpl: "{{result.echo.content.0.text.x}}",
			wantErr: `content.0.text is a string, not an object or array: it has no "x"`},
		{name: "field of a number", tmpl: "{{result.echo.n.x}}",
			wantErr: `n is a number, not an object or array: it has no "x"`},
		{name: "field of null", tmpl: "{{result.echo.body.name}}",
			wantErr: `body is null: it has no "name"`},
		{name: "tool with no result", tmpl: "{{result.ecoh.content}}",
			wantErr: `template {{result.ecoh.content}}: no tool result from ecoh (results from: echo)`},
		{name: "note of a tool with no result", tmpl: "{{note.ecoh}}",
			wantErr: `no tool result from ecoh (results from: echo)`},
		{name: "results.N out of range", tmpl: "{{results.1.content}}",
			wantErr: `template {{results.1.content}}: the latest step has no result 1 (it has 1, numbered from 0)`},
		{name: "unknown name", tmpl: "{{whom}}",
			wantErr: `template {{whom}}: "whom" is not a capture of the rule's match (captures: 0, 1, who) nor result.TOOL, results.N or note.TOOL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Script{Rules: []Rule{{Match: `ask (?P<who>\w+)`, Steps: []Step{
				{Calls: []Call{{Tool: "echo", Input: map[string]any{"to": "{{who}}"}}}},
				{Reply: tc.tmpl},
			}}}})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []model.Message{
				{Role: model.RoleUser, Text: "ask bob"},
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "echo", Input: json.RawMessage(`{"to":"bob"}`)}}},
				{Role: model.RoleTool, ToolResults: []model.ToolResult{{CallID: "c1", Name: "echo", Output: json.RawMessage(echo)}}},
			}
			if tc.failed {
				msgs[2].ToolResults[0] = model.ToolResult{CallID: "c1", Name: "echo", IsError: true, Output: json.RawMessage(`{"error":"no route","code":"TOOL_EXECUTION_FAILED"}`)}
			}
			r, err := m.Step(context.Background(), model.Request{Messages: msgs}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Step = %q, %v; want an error containing %q", r.Text, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != tc.want {
				t.Errorf("reply = %q, want %q", r.Text, tc.want)
			}
		})
	}
}

// TestTemplateErrorInCall: a bad template in a call's input fails the step
// and names the call, in both input forms.
func TestTemplateErrorInCall(t *testing.T) {
	tests := []struct {
		name string
		call Call
		want string
	}{
		{name: "input", call: Call{Tool: "t", Input: map[string]any{"a": []any{"{{nope}}"}}}, want: `scripted call t of rule "go": template {{nope}}: "nope" is not a capture`},
		{name: "inputJSON", call: Call{Tool: "t", InputJSON: `{"a": {{result.x}}}`}, want: `scripted call t of rule "go": template {{result.x}}: no tool result from x: no tool has answered since the user's message`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Script{Rules: []Rule{{Match: "go", Calls: []Call{tc.call}}}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Step(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "go"}}}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Step error = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}
