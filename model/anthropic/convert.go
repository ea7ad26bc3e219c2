package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/eve-temporal/eve/model"
)

// missingResult is the tool_result sent for a call whose result is not in
// the conversation (the API rejects a tool_use without one).
const missingResult = `{"error":"no result was recorded for this call","code":"tool.result_missing"}`

// params builds the Messages request for one step.
func (m *Model) params(req model.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:     sdk.Model(m.model),
		MaxTokens: int64(m.maxTokens),
		Messages:  messages(req.Messages),
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tp, err := tool(t)
		if err != nil {
			return p, &Error{Message: err.Error(), Hint: "fix the tool's input schema"}
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	return p, nil
}

// messages converts eve's conversation: user text; assistant text and
// tool_use blocks; tool results as tool_result blocks in a user message.
// Consecutive messages of one role are merged (tool results first, as the
// API requires), empty text is dropped, and a tool_use whose result is
// missing gets an error result so the request stays valid.
func messages(msgs []model.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	for i, msg := range msgs {
		switch msg.Role {
		case model.RoleUser:
			if msg.Text != "" {
				add(sdk.MessageParamRoleUser, sdk.NewTextBlock(msg.Text))
			}
		case model.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Text))
			}
			for _, c := range msg.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, objectInput(c.Input), c.Name))
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
			if len(msg.ToolCalls) > 0 {
				var results []model.ToolResult
				if i+1 < len(msgs) && msgs[i+1].Role == model.RoleTool {
					results = msgs[i+1].ToolResults
				}
				add(sdk.MessageParamRoleUser, toolResults(msg.ToolCalls, results)...)
			}
		case model.RoleTool:
			// Sent with the assistant message that made the calls.
		}
	}
	return out
}

// toolResults answers every call, in call order.
func toolResults(calls []model.ToolCall, results []model.ToolResult) []sdk.ContentBlockParamUnion {
	byID := make(map[string]model.ToolResult, len(results))
	for _, r := range results {
		byID[r.CallID] = r
	}
	blocks := make([]sdk.ContentBlockParamUnion, 0, len(calls))
	for _, c := range calls {
		r, ok := byID[c.ID]
		if !ok {
			r = model.ToolResult{CallID: c.ID, Name: c.Name, Output: json.RawMessage(missingResult), IsError: true}
		}
		blocks = append(blocks, toolResult(r))
	}
	return blocks
}

// toolResult is one tool_result block: the output JSON as its text, and
// is_error for failures and denials.
func toolResult(r model.ToolResult) sdk.ContentBlockParamUnion {
	content := strings.TrimSpace(string(r.Output))
	if content == "" {
		content = "null"
	}
	b := sdk.ToolResultBlockParam{
		ToolUseID: r.CallID,
		Content:   []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: content}}},
	}
	if r.Note != "" {
		b.Content = append(b.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: r.Note}})
	}
	if r.IsError {
		b.IsError = sdk.Bool(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &b}
}

// objectInput is a tool_use input as the API accepts it: a JSON object.
// Anything else the model produced (see toolBlock.input, and the openai
// package's malformed arguments) is sent back as {"$raw": "..."}, the shape
// the runtime shows in events.
func objectInput(in json.RawMessage) json.RawMessage {
	s := strings.TrimSpace(string(in))
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	raw := s
	var str string
	if json.Unmarshal([]byte(s), &str) == nil {
		raw = str
	}
	b, _ := json.Marshal(map[string]string{"$raw": raw})
	return b
}

// tool converts a descriptor to Anthropic's {name, description, input_schema}.
func tool(t model.ToolDescriptor) (*sdk.ToolParam, error) {
	schema := map[string]any{}
	if s := strings.TrimSpace(string(t.InputSchema)); s != "" && s != "null" {
		if err := json.Unmarshal([]byte(s), &schema); err != nil {
			return nil, fmt.Errorf("tool %s: input schema is not a JSON object: %v", t.Name, err)
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return nil, fmt.Errorf("tool %s: input schema must have type object, not %v", t.Name, typ)
	}
	is := sdk.ToolInputSchemaParam{Properties: schema["properties"]}
	if is.Properties == nil {
		is.Properties = map[string]any{}
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				is.Required = append(is.Required, s)
			}
		}
	}
	for k, v := range schema {
		switch k {
		case "type", "properties", "required":
			continue
		}
		if is.ExtraFields == nil {
			is.ExtraFields = map[string]any{}
		}
		is.ExtraFields[k] = v
	}
	tp := &sdk.ToolParam{Name: t.Name, InputSchema: is}
	if t.Description != "" {
		tp.Description = sdk.String(t.Description)
	}
	return tp, nil
}
