package tools

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/eve-temporal/eve/protocol"
)

// ClientInputRequired is the error AskClient returns: Execute ends the
// round with it, and the MCP server puts the requests to the client that
// called (an InputRequiredResult); the client's answers start the next
// round. Only a tool with Tool.ClientInput set may return it, and only
// when Context.Client is set (the caller is an MCP client); elsewhere the
// call fails, saying why.
type ClientInputRequired struct {
	Requests map[string]protocol.ClientRequest
	State    json.RawMessage
	// BeforeTask: see AskClientBeforeTask.
	BeforeTask bool
}

func (e *ClientInputRequired) Error() string {
	ids := make([]string, 0, len(e.Requests))
	for id, r := range e.Requests {
		ids = append(ids, id+" ("+r.Method+")")
	}
	sort.Strings(ids)
	return "the tool asks its MCP client for input: " + strings.Join(ids, ", ")
}

// AskClient asks the calling MCP client for input: requests by ids the
// tool chooses (the next round's Context.Client.Responses use them), and
// state, encoded as JSON, that the next round gets back unaltered as
// Context.Client.State (nil: none). Return it from Execute.
func AskClient(requests map[string]protocol.ClientRequest, state any) error {
	if len(requests) == 0 {
		return fmt.Errorf("tools.AskClient: no requests")
	}
	e := &ClientInputRequired{Requests: requests}
	if state != nil {
		b, err := json.Marshal(state)
		if err != nil {
			return fmt.Errorf("tools.AskClient: encode the state: %w", err)
		}
		e.State = b
	}
	return e
}

// AskClientBeforeTask is AskClient for input a task needs before it
// begins: a task-augmented call is answered with the requests (an
// InputRequiredResult) instead of a task, and the task begins with the
// round that does not ask. AskClient in a task instead keeps the task
// waiting (input_required) until the client answers through tasks/update.
// Outside tasks the two are the same.
func AskClientBeforeTask(requests map[string]protocol.ClientRequest, state any) error {
	err := AskClient(requests, state)
	if e, ok := err.(*ClientInputRequired); ok {
		e.BeforeTask = true
	}
	return err
}

// Elicit is an elicitation request: a message and the schema of the
// answer's content.
func Elicit(message string, requestedSchema any) protocol.ClientRequest {
	return clientRequest(protocol.ClientElicit, map[string]any{"mode": "form", "message": message, "requestedSchema": requestedSchema})
}

// Sample is a sampling request: one user message, at most maxTokens.
func Sample(text string, maxTokens int) protocol.ClientRequest {
	return clientRequest(protocol.ClientSample, map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text}}},
		"maxTokens": maxTokens,
	})
}

// ListRoots asks the client for its roots.
func ListRoots() protocol.ClientRequest {
	return clientRequest(protocol.ClientListRoots, map[string]any{})
}

func clientRequest(method string, params any) protocol.ClientRequest {
	b, _ := json.Marshal(params) // maps of JSON values always encode
	return protocol.ClientRequest{Method: method, Params: b}
}
