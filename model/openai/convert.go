package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/eve-temporal/eve/model"
)

// missingResult is the tool message sent for a call whose result is not in
// the conversation (the API rejects a tool call without one).
const missingResult = `{"error":"no result was recorded for this call","code":"tool.result_missing"}`

// params builds the Chat Completions request for one step.
func (m *Model) params(req model.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.model),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	p.Messages = append(p.Messages, messages(req.Messages)...)
	if m.maxTokens > 0 {
		p.MaxCompletionTokens = sdk.Int(int64(m.maxTokens))
	}
	for _, t := range req.Tools {
		fn, err := function(t)
		if err != nil {
			return p, &Error{Message: err.Error(), Hint: "fix the tool's input schema"}
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

// messages converts eve's conversation: user text; assistant text and
// function tool calls; each tool result as a role "tool" message whose
// content is the result's output JSON. Failures and denials need no flag:
// their output is an {"error": ..., "code": ...} object. A call whose result
// is missing gets an error result so the request stays valid.
func messages(msgs []model.Message) []sdk.ChatCompletionMessageParamUnion {
	var out []sdk.ChatCompletionMessageParamUnion
	for i, msg := range msgs {
		switch msg.Role {
		case model.RoleUser:
			if msg.Text != "" {
				out = append(out, sdk.UserMessage(msg.Text))
			}
		case model.RoleAssistant:
			if msg.Text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			a := sdk.ChatCompletionAssistantMessageParam{}
			if msg.Text != "" {
				a.Content.OfString = sdk.String(msg.Text)
			}
			for _, c := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: arguments(c.Input)},
					},
				})
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
			if len(msg.ToolCalls) > 0 {
				var results []model.ToolResult
				if i+1 < len(msgs) && msgs[i+1].Role == model.RoleTool {
					results = msgs[i+1].ToolResults
				}
				out = append(out, toolMessages(msg.ToolCalls, results)...)
			}
		case model.RoleTool:
			// Sent right after the assistant message that made the calls.
		}
	}
	return out
}

// toolMessages answers every call, in call order.
func toolMessages(calls []model.ToolCall, results []model.ToolResult) []sdk.ChatCompletionMessageParamUnion {
	byID := make(map[string]model.ToolResult, len(results))
	for _, r := range results {
		byID[r.CallID] = r
	}
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(calls))
	for _, c := range calls {
		content := missingResult
		r, ok := byID[c.ID]
		if ok {
			content = strings.TrimSpace(string(r.Output))
			if content == "" {
				content = "null"
			}
		}
		if ok && r.Note != "" {
			out = append(out, sdk.ToolMessage([]sdk.ChatCompletionContentPartTextParam{{Text: content}, {Text: r.Note}}, c.ID))
			continue
		}
		out = append(out, sdk.ToolMessage(content, c.ID))
	}
	return out
}

// arguments is a call's input as the arguments string: the JSON text, or,
// for input kept as a JSON string (see CallInput), the text the model wrote.
func arguments(in json.RawMessage) string {
	s := strings.TrimSpace(string(in))
	if strings.HasPrefix(s, `"`) {
		var raw string
		if json.Unmarshal([]byte(s), &raw) == nil {
			return raw
		}
	}
	if s == "" {
		return "{}"
	}
	return s
}

// function converts a descriptor to a function tool's definition.
func function(t model.ToolDescriptor) (shared.FunctionDefinitionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		fn.Description = sdk.String(t.Description)
	}
	schema := map[string]any{}
	if s := strings.TrimSpace(string(t.InputSchema)); s != "" && s != "null" {
		if err := json.Unmarshal([]byte(s), &schema); err != nil {
			return fn, fmt.Errorf("tool %s: input schema is not a JSON object: %v", t.Name, err)
		}
	}
	if typ, ok := schema["type"]; !ok {
		schema["type"] = "object"
	} else if typ != "object" {
		return fn, fmt.Errorf("tool %s: input schema must have type object, not %v", t.Name, typ)
	}
	if _, ok := schema["properties"]; !ok {
		schema["properties"] = map[string]any{}
	}
	fn.Parameters = shared.FunctionParameters(schema)
	return fn, nil
}
