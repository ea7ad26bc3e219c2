package protocol

import "encoding/json"

// Client input (MCP multi round-trip requests, SEP-2322): a tool may ask
// the MCP client that called it for input (an elicitation, a sampling, its
// roots) by ending a round with tools.AskClient; the client answers and
// calls again, and the next round's tool sees the answers
// (tools.Context.Client). Each round is one execution.

// MCP methods a tool may put to the client.
const (
	ClientElicit    = "elicitation/create"
	ClientSample    = "sampling/createMessage"
	ClientListRoots = "roots/list"
)

// CodeClientInputRequired ends a round whose tool asked its client for
// input (an execution's error code; its output is a ClientInputRequest).
const CodeClientInputRequired = "client_input_required"

// ClientRequest is one request to the client: an MCP method and its
// params, as MCP's inputRequests carry them.
type ClientRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// ClientInputRequest is what a round that asks records: the requests by
// the ids the tool chose, and the state the tool wants back next round.
type ClientInputRequest struct {
	InputRequests map[string]ClientRequest `json:"inputRequests"`
	State         json.RawMessage          `json:"state,omitempty"`
	// BeforeTask: asked before any task exists (tools.AskClientBeforeTask).
	BeforeTask bool `json:"beforeTask,omitempty"`
}

// ClientRound is what a round's tool learns of its client: the answers to
// the last round's requests (by id; absent ids were not answered), the
// state the last round handed back (verified: the client cannot alter
// it), and the capabilities the client declared.
type ClientRound struct {
	Responses    map[string]json.RawMessage `json:"responses,omitempty"`
	State        json.RawMessage            `json:"state,omitempty"`
	Capabilities json.RawMessage            `json:"capabilities,omitempty"`
	// Task: the call runs as an MCP task, which waits (input_required)
	// for the answers to what a round asks and then runs the next round in
	// the same execution; otherwise each round is its own execution.
	Task bool `json:"task,omitempty"`
}

// Declares reports whether the client declared capability name
// ("elicitation", "sampling", "roots").
func (r *ClientRound) Declares(name string) bool {
	if r == nil {
		return false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(r.Capabilities, &caps) != nil {
		return false
	}
	v, ok := caps[name]
	return ok && string(v) != "null"
}

// Response reads the answer to request id into v; false when it was not
// answered (or does not decode).
func (r *ClientRound) Response(id string, v any) bool {
	if r == nil {
		return false
	}
	raw, ok := r.Responses[id]
	return ok && json.Unmarshal(raw, v) == nil
}

// CapabilityOf names the client capability a request method needs.
func CapabilityOf(method string) string {
	switch method {
	case ClientElicit:
		return "elicitation"
	case ClientSample:
		return "sampling"
	case ClientListRoots:
		return "roots"
	}
	return ""
}
