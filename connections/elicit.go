package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// maxElicitTries is how often a person is asked again after an answer
// that breaks the server's requested schema, before the call declines.
const maxElicitTries = 3

// errQuestionCancelled ends a call whose question the turn cancelled.
var errQuestionCancelled = errors.New("the question was cancelled with the turn")

// declineElicitation answers an elicitation outside a call (discovery):
// declaring the capability there lets servers offer the tools that elicit.
func declineElicitation(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

// elicit asks the session's person what a server's elicitation/create asks
// (form mode), as a question of the call (tools.Context.Ask): they answer
// with a JSON object of the requested fields (or, when the form has one
// required field, its value alone), or decline or cancel. An answer that
// breaks the requested schema is asked again, with the error.
func elicit(ctx *tools.Context, c *Connection, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p := req.Params
	if p.Mode == "url" {
		return elicitURL(ctx, c, p)
	}
	raw, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("elicitation: the requested schema is not JSON: %w", err)
	}
	var form struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	_ = json.Unmarshal(raw, &form)
	sch, err := schema.Compile(c.Name+"/elicitation", raw)
	if err != nil {
		return nil, fmt.Errorf("elicitation: the requested schema does not compile: %w", err)
	}
	prompt := elicitPrompt(c, p.Message, form.Properties, form.Required)
	q := tools.InputRequest{Prompt: prompt, Display: protocol.DisplayText, AllowFreeform: true,
		Options: []protocol.InputOption{{ID: "decline", Label: "Decline"}, {ID: "cancel", Label: "Cancel"}}}
	for try := 1; ; try++ {
		ans, err := ctx.Ask(q)
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		switch {
		case ans.Outcome == protocol.OutcomeCancelled:
			// Nobody chose this: the turn was cancelled, or the call ended.
			return nil, errQuestionCancelled
		case ans.Outcome != protocol.OutcomeAnswered || ans.OptionID == "cancel":
			return &mcp.ElicitResult{Action: "cancel"}, nil
		case ans.OptionID == "decline":
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		content, err := elicitContent(ans.Text, form.Required, form.Properties)
		if err == nil {
			err = sch.ValidateValue(content)
		}
		if err == nil {
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		}
		if try == maxElicitTries {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		q.Prompt = fmt.Sprintf("That answer does not fit: %v\n\n%s", err, prompt)
	}
}

// elicitURL asks the session's person to open a page of the server's
// (URL mode: a sign-in, a payment), which eve does not see: they accept
// once they opened it, or decline. Only an https page (or http on a
// loopback host) is shown; any other is declined without asking.
func elicitURL(ctx *tools.Context, c *Connection, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if checkURL(p.URL) != nil {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	ans, err := ctx.Ask(tools.InputRequest{
		Prompt:  fmt.Sprintf("%s asks you to open this page: %s\n\n%s\n\nChoose Opened once you have, or Decline.", c.Name, p.URL, p.Message),
		Display: protocol.DisplaySelect,
		Options: []protocol.InputOption{{ID: "accept", Label: "Opened", Style: "primary"}, {ID: "decline", Label: "Decline"}, {ID: "cancel", Label: "Cancel"}},
	})
	if err != nil {
		return nil, fmt.Errorf("elicitation: %w", err)
	}
	switch {
	case ans.Outcome == protocol.OutcomeCancelled:
		return nil, errQuestionCancelled
	case ans.Outcome == protocol.OutcomeAnswered && ans.OptionID == "accept":
		return &mcp.ElicitResult{Action: "accept"}, nil
	case ans.Outcome == protocol.OutcomeAnswered && ans.OptionID == "decline":
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return &mcp.ElicitResult{Action: "cancel"}, nil
}

// codeURLElicitationRequired is the JSON-RPC error of a request that
// needs URL elicitations first (MCP 2025-11-25).
const codeURLElicitationRequired = -32042

// maxURLRounds bounds how often one call is sent again after a
// URL-elicitation-required error.
const maxURLRounds = 3

// elicitRequired asks the person to open each page a -32042 error names;
// an error unless they accept every one.
func elicitRequired(ctx *tools.Context, c *Connection, we *jsonrpc.Error) error {
	var data struct {
		Elicitations []mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || len(data.Elicitations) == 0 {
		return remoteError("the server needs a page opened first and did not say which: %s", we.Message)
	}
	for i := range data.Elicitations {
		res, err := elicitURL(ctx, c, &data.Elicitations[i])
		if err != nil {
			return err
		}
		if res.Action != "accept" {
			return remoteError("the server needs a page opened first (%s), and the person chose %s", data.Elicitations[i].URL, res.Action)
		}
	}
	return nil
}

// elicitPrompt is the person's question: the server's message and the
// fields it asks for.
func elicitPrompt(c *Connection, msg string, props map[string]map[string]any, required []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s asks: %s\n", c.Name, msg)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := props[n]
		line := "- " + n
		if t, _ := f["type"].(string); t != "" {
			line += " (" + t
			if contains(required, n) {
				line += ", required"
			}
			line += ")"
		}
		if d, _ := f["description"].(string); d != "" {
			line += ": " + d
		}
		b.WriteString(line + "\n")
	}
	if len(required) == 1 {
		fmt.Fprintf(&b, "Answer with a JSON object of these fields, or with the value of %q alone; or decline.", required[0])
	} else {
		b.WriteString("Answer with a JSON object of these fields; or decline.")
	}
	return b.String()
}

// elicitContent reads an answer: a JSON object, or the one required
// field's value.
func elicitContent(text string, required []string, props map[string]map[string]any) (map[string]any, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "{") {
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
		return m, nil
	}
	if len(required) != 1 {
		return nil, fmt.Errorf("answer with a JSON object of the fields")
	}
	name := required[0]
	var v any = text
	if t, _ := props[name]["type"].(string); t != "string" {
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("%s: %q is not a %s", name, text, t)
		}
	}
	return map[string]any{name: v}, nil
}
