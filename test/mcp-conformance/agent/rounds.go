package main

// The suite's multi round-trip fixtures (SEP-2322): tools with
// ClientInput that ask the calling MCP client for input through
// tools.AskClient, round by round.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// elicited is an elicitation answer's content.
type elicited struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

func stringSchema(field string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{field: map[string]any{"type": "string"}}, "required": []string{field}}
}

// answer reads field of elicitation id's answer ("" when missing).
func answer(c *protocol.ClientRound, id, field string) (string, bool) {
	var e elicited
	if !c.Response(id, &e) || e.Action != "accept" {
		return "", false
	}
	v, ok := e.Content[field]
	if !ok {
		return "", false
	}
	return fmt.Sprint(v), true
}

// sampled is a sampling answer's text.
func sampled(c *protocol.ClientRound, id string) (string, bool) {
	var r struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if !c.Response(id, &r) {
		return "", false
	}
	return r.Content.Text, true
}

// rootsOf is a roots/list answer's URIs.
func rootsOf(c *protocol.ClientRound, id string) ([]string, bool) {
	var r struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	if !c.Response(id, &r) {
		return nil, false
	}
	var out []string
	for _, x := range r.Roots {
		out = append(out, x.URI)
	}
	return out, true
}

func needClient(ctx *tools.Context) error {
	if ctx.Client == nil {
		return tools.NonRetryable(fmt.Errorf("%s asks its MCP client for input: call it over MCP", ctx.ToolName))
	}
	return nil
}

func roundTool(name, desc string, fn func(*tools.Context, *protocol.ClientRound) (string, error)) *tools.Tool {
	t := tools.Func(name, desc, func(ctx *tools.Context, _ none) (string, error) {
		if err := needClient(ctx); err != nil {
			return "", err
		}
		return fn(ctx, ctx.Client)
	})
	t.ClientInput = true
	return t
}

var askName = map[string]protocol.ClientRequest{"user_name": tools.Elicit("What is your name?", stringSchema("name"))}

// greetByName asks for the user's name (again, while the answer lacks it).
func greetByName(_ *tools.Context, c *protocol.ClientRound) (string, error) {
	if name, ok := answer(c, "user_name", "name"); ok {
		return fmt.Sprintf("Hello, %s!", name), nil
	}
	return "", tools.AskClient(askName, nil)
}

func roundFixtures() []*tools.Tool {
	elicit := roundTool("test_input_required_result_elicitation", "Asks the client for the user's name, then greets.", greetByName)
	sampling := roundTool("test_input_required_result_sampling", "Asks the client's model for the capital of France.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			if text, ok := sampled(c, "capital_question"); ok {
				return "The model answered: " + text, nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{"capital_question": tools.Sample("What is the capital of France?", 100)}, nil)
		})
	roots := roundTool("test_input_required_result_list_roots", "Asks the client for its roots.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			if uris, ok := rootsOf(c, "client_roots"); ok {
				return "The client's roots: " + strings.Join(uris, ", "), nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{"client_roots": tools.ListRoots()}, nil)
		})
	type confirmState struct {
		Asked string `json:"asked"`
	}
	confirm := func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
		var st confirmState
		if _, ok := answer(c, "confirm", "ok"); ok && json.Unmarshal(c.State, &st) == nil && st.Asked == "confirm" {
			return "state-ok: the request state came back as it was sent", nil
		}
		return "", tools.AskClient(map[string]protocol.ClientRequest{"confirm": tools.Elicit("Please confirm", map[string]any{
			"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"},
		})}, confirmState{Asked: "confirm"})
	}
	state := roundTool("test_input_required_result_request_state", "Round-trips its request state.", confirm)
	tampered := roundTool("test_input_required_result_tampered_state", "Refuses an altered request state.", confirm)
	multiple := roundTool("test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots at once.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			name, okName := answer(c, "user_name", "name")
			greeting, okGreeting := sampled(c, "greeting")
			uris, okRoots := rootsOf(c, "client_roots")
			if okName && okGreeting && okRoots {
				return fmt.Sprintf("%s, %s (roots %s)", greeting, name, strings.Join(uris, ", ")), nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{
				"user_name":    tools.Elicit("What is your name?", stringSchema("name")),
				"greeting":     tools.Sample("Generate a greeting", 50),
				"client_roots": tools.ListRoots(),
			}, struct{}{})
		})
	type steps struct {
		Step int    `json:"step"`
		Name string `json:"name,omitempty"`
	}
	multiRound := roundTool("test_input_required_result_multi_round", "Asks for a name, then a colour.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			var st steps
			_ = json.Unmarshal(c.State, &st)
			if st.Step == 1 {
				if name, ok := answer(c, "step1", "name"); ok {
					return "", tools.AskClient(map[string]protocol.ClientRequest{"step2": tools.Elicit("Step 2: What is your favorite color?", stringSchema("color"))}, steps{Step: 2, Name: name})
				}
			}
			if st.Step == 2 {
				if color, ok := answer(c, "step2", "color"); ok {
					return fmt.Sprintf("%s likes %s", st.Name, color), nil
				}
				return "", tools.AskClient(map[string]protocol.ClientRequest{"step2": tools.Elicit("Step 2: What is your favorite color?", stringSchema("color"))}, st)
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{"step1": tools.Elicit("Step 1: What is your name?", stringSchema("name"))}, steps{Step: 1})
		})
	// Asks only for what the client can answer.
	capabilities := roundTool("test_input_required_result_capabilities", "Asks only what the client declared it can answer.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			if text, ok := sampled(c, "summary"); ok {
				return "sampled: " + text, nil
			}
			if name, ok := answer(c, "user_name", "name"); ok {
				return "Hello, " + name, nil
			}
			ask := map[string]protocol.ClientRequest{}
			if c.Declares("sampling") {
				ask["summary"] = tools.Sample("Summarize the day in one line", 50)
			}
			if c.Declares("elicitation") {
				ask["user_name"] = tools.Elicit("What is your name?", stringSchema("name"))
			}
			if len(ask) == 0 {
				return "the client declared neither sampling nor elicitation: nothing to ask", nil
			}
			return "", tools.AskClient(ask, nil)
		})
	// Always samples: a client that did not declare sampling is refused
	// (MissingRequiredClientCapability) before anything is asked.
	missing := roundTool("test_missing_capability", "Needs the client's sampling capability.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			if text, ok := sampled(c, "sample"); ok {
				return "sampled: " + text, nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{"sample": tools.Sample("Say hello", 20)}, nil)
		})
	// Gathers a name in a round, then works on as a task (run.mjs marks it
	// a required task tool).
	withTask := roundTool("test_tool_with_task", "Asks for a name, then works on it as a task.",
		func(ctx *tools.Context, c *protocol.ClientRound) (string, error) {
			name, ok := answer(c, "user_name", "name")
			if !ok {
				return "", tools.AskClientBeforeTask(askName, nil)
			}
			if err := sleep(ctx, time.Second); err != nil {
				return "", err
			}
			return fmt.Sprintf("Hello, %s! (asked before the task began)", name), nil
		})
	// Asks two questions at once inside its task (input_required), which
	// the client may answer one tasks/update at a time.
	multiInput := roundTool("multi_input", "Asks two questions at once, as a task.",
		func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			first, ok1 := answer(c, "first", "name")
			second, ok2 := answer(c, "second", "name")
			if ok1 && ok2 {
				return fmt.Sprintf("answers: %s, %s", first, second), nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{
				"first":  tools.Elicit("First: what is your name?", stringSchema("name")),
				"second": tools.Elicit("Second: what is your friend's name?", stringSchema("name")),
			}, nil)
		})
	return append([]*tools.Tool{elicit, sampling, roots, state, tampered, multiple, multiRound, capabilities, missing, withTask, multiInput}, midCallFixtures()...)
}

type messageIn struct {
	Message string `json:"message"`
}

type promptIn struct {
	Prompt string `json:"prompt"`
}

// elicitResult reads an elicitation answer as the suite prints it.
func elicitResult(c *protocol.ClientRound, id string) (string, bool) {
	var e elicited
	if !c.Response(id, &e) {
		return "", false
	}
	b, _ := json.Marshal(e.Content)
	return fmt.Sprintf("action=%s, content=%s", e.Action, b), true
}

// midCallFixtures are the suite's tools that ask the client while the
// call runs (2025-11-25: the SDK puts the request to the session's
// client; 2026-07-28: an InputRequiredResult).
func midCallFixtures() []*tools.Tool {
	elicit := tools.Func("test_elicitation", "Asks the user the given message.", func(ctx *tools.Context, in messageIn) (string, error) {
		if err := needClient(ctx); err != nil {
			return "", err
		}
		if r, ok := elicitResult(ctx.Client, "user"); ok {
			return "User response: " + r, nil
		}
		return "", tools.AskClient(map[string]protocol.ClientRequest{"user": tools.Elicit(in.Message, map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		})}, nil)
	})
	elicit.ClientInput = true
	sample := tools.Func("test_sampling", "Asks the client's model the given prompt.", func(ctx *tools.Context, in promptIn) (string, error) {
		if err := needClient(ctx); err != nil {
			return "", err
		}
		if text, ok := sampled(ctx.Client, "llm"); ok {
			return "LLM response: " + text, nil
		}
		return "", tools.AskClient(map[string]protocol.ClientRequest{"llm": tools.Sample(in.Prompt, 100)}, nil)
	})
	sample.ClientInput = true
	form := func(name, desc string, schema map[string]any) *tools.Tool {
		return roundTool(name, desc, func(_ *tools.Context, c *protocol.ClientRound) (string, error) {
			if r, ok := elicitResult(c, "form"); ok {
				return "Elicitation completed: " + r, nil
			}
			return "", tools.AskClient(map[string]protocol.ClientRequest{"form": tools.Elicit("Please fill in the form", schema)}, nil)
		})
	}
	defaults := form("test_elicitation_sep1034_defaults", "Asks with defaults for every primitive type.", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":     map[string]any{"type": "string", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "default": 30},
			"score":    map[string]any{"type": "number", "default": 95.5},
			"status":   map[string]any{"type": "string", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "default": true},
		},
	})
	titled := func(prefix string, labels ...string) []any {
		var out []any
		for i, l := range labels {
			out = append(out, map[string]any{"const": fmt.Sprintf("%s%d", prefix, i+1), "title": l})
		}
		return out
	}
	enums := form("test_elicitation_sep1330_enums", "Asks with each enum form.", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled("value", "First Option", "Second Option", "Third Option")},
			"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
			"titledMulti":    map[string]any{"type": "array", "items": map[string]any{"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")}},
		},
	})
	// Asks for input with an InputRequiredResult, never with a request of
	// its own on the response stream.
	streaming := roundTool("test_streaming_elicitation", "Asks the user for a name.", greetByName)
	return []*tools.Tool{elicit, sample, defaults, enums, streaming}
}
