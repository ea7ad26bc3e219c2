package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Tool stubs, as eve defines them (eve's docs: evals/tool-stubs): a session
// created with "stubs" replaces the execution of matching tool calls with a
// recorded response or error. The rules are fixed when the session is
// created; the first rule whose tool and match fit a call wins; a rule's
// "outcomes" are used in sequence, repeating the last; a call no rule
// matches runs the real tool.

// MaxToolStubs is the most rules a session may have (eve's limit).
const MaxToolStubs = 100

// Limits on a stubs array's size, eve's: JSON nodes, nesting depth and
// characters (strings and keys).
const (
	maxStubNodes = 20000
	maxStubDepth = 32
	maxStubChars = 1_000_000
)

// ToolStub is one rule.
type ToolStub struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Match maps input properties to JSON Schemas each must satisfy; every
	// listed property must exist.
	Match    map[string]json.RawMessage `json:"match,omitempty"`
	Outcome  *ToolStubOutcome           `json:"outcome,omitempty"`
	Outcomes []ToolStubOutcome          `json:"outcomes,omitempty"`
}

// ToolStubOutcome is exactly one of a response (the tool's result) or a
// throw (the tool fails with that message).
type ToolStubOutcome struct {
	Response json.RawMessage `json:"response,omitempty"`
	Throw    *ToolStubThrow  `json:"throw,omitempty"`
}

// ToolStubThrow is an error a stubbed call raises.
type ToolStubThrow struct {
	Message string `json:"message"`
	Name    string `json:"name,omitempty"`
}

// At returns the outcome of the rule's n-th matching call (0-based): a
// sequence repeats its last entry.
func (r ToolStub) At(n int) ToolStubOutcome {
	if r.Outcome != nil {
		return *r.Outcome
	}
	return r.Outcomes[min(n, len(r.Outcomes)-1)]
}

// ActionStub marks an action.result whose call a stub settled: the rule
// and the position in its sequence (0-based). The real tool did not run.
type ActionStub struct {
	RuleID   string `json:"ruleId"`
	Position int    `json:"position"`
}

// StubsVerification is the answer of GET /eve/v1/session/{id}/stubs:
// Error is null unless stub playback failed; MatchedRuleIDs are the rules
// that settled at least one call, in the order they first did.
type StubsVerification struct {
	Error          *string  `json:"error"`
	MatchedRuleIDs []string `json:"matchedRuleIds"`
}

// reservedStubTools cannot be stubbed (eve's catalog tools).
var reservedStubTools = []string{"eve__search", "eve__tool", "eve__skill"}

// ParseToolStubs reads and checks the structure of a "stubs" array as eve
// does: every error names the rule (by id, or by its place when it has
// none). It does not compile the match schemas (the API server does).
func ParseToolStubs(raw json.RawMessage) ([]ToolStub, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("'stubs' is not JSON: %w", err)
	}
	if err := boundStubs(doc); err != nil {
		return nil, err
	}
	items, ok := doc.([]any)
	if !ok {
		return nil, fmt.Errorf("expected 'stubs' to be an array of rules {id, tool, match?, outcome | outcomes}")
	}
	if len(items) > MaxToolStubs {
		return nil, fmt.Errorf("'stubs' has %d rules; the limit is %d rules per session (eve's limit): merge rules with match, or split the eval into sessions", len(items), MaxToolStubs)
	}
	var rawRules []json.RawMessage
	if err := json.Unmarshal(raw, &rawRules); err != nil {
		return nil, fmt.Errorf("expected 'stubs' to be an array of rules: %w", err)
	}
	out := make([]ToolStub, 0, len(rawRules))
	seen := map[string]bool{}
	for i, rr := range rawRules {
		r, err := parseStub(rr)
		name := fmt.Sprintf("tool stub %d", i+1)
		if r.ID != "" {
			name = fmt.Sprintf("tool stub %q", r.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("duplicate tool stub id %q", r.ID)
		}
		seen[r.ID] = true
		out = append(out, r)
	}
	return out, nil
}

func parseStub(raw json.RawMessage) (ToolStub, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return ToolStub{}, fmt.Errorf("expected an object {id, tool, match?, outcome | outcomes}")
	}
	var r ToolStub
	_ = json.Unmarshal(fields["id"], &r.ID)
	for k := range fields {
		switch k {
		case "id", "tool", "match", "outcome", "outcomes":
		default:
			return r, fmt.Errorf("unknown field %q: a rule has id, tool, match, and outcome or outcomes", k)
		}
	}
	if err := json.Unmarshal(fields["id"], &r.ID); err != nil || r.ID == "" {
		return r, fmt.Errorf("expected 'id' to be a non-empty string")
	}
	if err := json.Unmarshal(fields["tool"], &r.Tool); err != nil || r.Tool == "" {
		return r, fmt.Errorf("expected 'tool' to be a non-empty string")
	}
	last := r.Tool[strings.LastIndex(r.Tool, "/")+1:]
	for _, t := range reservedStubTools {
		if last == t {
			return r, fmt.Errorf("cannot stub %s: stub the tool it reaches", t)
		}
	}
	if m, ok := fields["match"]; ok {
		if err := json.Unmarshal(m, &r.Match); err != nil {
			return r, fmt.Errorf("expected 'match' to map input properties to JSON Schemas (objects or booleans)")
		}
		for p, s := range r.Match {
			t := bytes.TrimSpace(s)
			if len(t) == 0 || (t[0] != '{' && !bytes.Equal(t, []byte("true")) && !bytes.Equal(t, []byte("false"))) {
				return r, fmt.Errorf("matcher %q: expected a JSON Schema (an object or a boolean)", p)
			}
		}
	}
	o, hasOne := fields["outcome"]
	os, hasMany := fields["outcomes"]
	switch {
	case hasOne == hasMany:
		return r, fmt.Errorf("use exactly one of 'outcome' or 'outcomes'")
	case hasOne:
		out, err := parseOutcome(o)
		if err != nil {
			return r, fmt.Errorf("outcome: %w", err)
		}
		r.Outcome = &out
	default:
		var list []json.RawMessage
		if err := json.Unmarshal(os, &list); err != nil || len(list) == 0 {
			return r, fmt.Errorf("expected 'outcomes' to be a non-empty array of outcomes")
		}
		for i, e := range list {
			out, err := parseOutcome(e)
			if err != nil {
				return r, fmt.Errorf("outcomes[%d]: %w", i, err)
			}
			r.Outcomes = append(r.Outcomes, out)
		}
	}
	return r, nil
}

func parseOutcome(raw json.RawMessage) (ToolStubOutcome, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return ToolStubOutcome{}, fmt.Errorf("expected {response} or {throw: {message, name?}}")
	}
	resp, hasResp := fields["response"]
	th, hasThrow := fields["throw"]
	if hasResp == hasThrow || len(fields) != 1 {
		return ToolStubOutcome{}, fmt.Errorf("expected exactly one of 'response' or 'throw'")
	}
	if hasResp {
		return ToolStubOutcome{Response: append(json.RawMessage(nil), bytes.TrimSpace(resp)...)}, nil
	}
	var tf map[string]json.RawMessage
	if err := json.Unmarshal(th, &tf); err != nil || tf == nil {
		return ToolStubOutcome{}, fmt.Errorf("expected 'throw' to be {message, name?}")
	}
	t := &ToolStubThrow{}
	for k := range tf {
		if k != "message" && k != "name" {
			return ToolStubOutcome{}, fmt.Errorf("throw: unknown field %q (want message and optionally name)", k)
		}
	}
	if err := json.Unmarshal(tf["message"], &t.Message); err != nil || tf["message"] == nil {
		return ToolStubOutcome{}, fmt.Errorf("throw: expected 'message' to be a string")
	}
	if n, ok := tf["name"]; ok {
		if err := json.Unmarshal(n, &t.Name); err != nil || t.Name == "" {
			return ToolStubOutcome{}, fmt.Errorf("throw: expected 'name' to be a non-empty string")
		}
	}
	return ToolStubOutcome{Throw: t}, nil
}

// boundStubs applies eve's size limits and refuses __proto__ keys.
func boundStubs(doc any) error {
	type item struct {
		v     any
		depth int
	}
	stack := []item{{doc, 0}}
	nodes, chars := 0, 0
	tooBig := fmt.Errorf("'stubs' exceeds eve's size or nesting limit (%d JSON nodes, depth %d, %d characters)", maxStubNodes, maxStubDepth, maxStubChars)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nodes++
		if nodes > maxStubNodes || it.depth > maxStubDepth {
			return tooBig
		}
		switch v := it.v.(type) {
		case string:
			chars += len(v)
		case map[string]any:
			for k, c := range v {
				if k == "__proto__" {
					return fmt.Errorf("'stubs' cannot contain the key __proto__")
				}
				chars += len(k)
				stack = append(stack, item{c, it.depth + 1})
			}
		case []any:
			for _, c := range v {
				stack = append(stack, item{c, it.depth + 1})
			}
		}
		if chars > maxStubChars {
			return tooBig
		}
	}
	return nil
}
