// Package stubmatch matches tool calls against eve's tool stub rules
// (protocol.ToolStub): the API server checks the matchers when a session is
// created, and the turn workflow matches calls with the same code.
package stubmatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
)

// unsupported are the keywords eve refuses in a matcher: its matchers are a
// reference-free subset of JSON Schema 2020-12.
var unsupported = []string{"$ref", "$dynamicRef", "$defs", "definitions", "patternProperties", "format",
	"multipleOf", "minContains", "maxContains", "uniqueItems", "dependencies", "dependentRequired", "dependentSchemas"}

// Check compiles every matcher of every rule; the error names the rule and
// the matcher.
func Check(rules []protocol.ToolStub) error {
	for _, r := range rules {
		for _, prop := range sortedKeys(r.Match) {
			raw := r.Match[prop]
			if kw := findUnsupported(raw); kw != "" {
				return fmt.Errorf("tool stub %q: matcher %q uses %q, which tool stubs do not support (eve's matchers are a reference-free subset of JSON Schema)", r.ID, prop, kw)
			}
			if _, err := compile(r.ID, prop, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// Match returns the first rule for the tool whose matchers all hold for the
// input, or nil.
func Match(rules []protocol.ToolStub, tool string, input json.RawMessage) *protocol.ToolStub {
	for i, r := range rules {
		if r.Tool == tool && matches(r, input) {
			return &rules[i]
		}
	}
	return nil
}

// matches checks every matcher: the property exists and satisfies its
// schema, without coercion. A matcher that does not compile (Check
// refused those before the session started) does not match.
func matches(r protocol.ToolStub, input json.RawMessage) bool {
	if len(r.Match) == 0 {
		return true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
		return false
	}
	for _, prop := range sortedKeys(r.Match) {
		v, ok := obj[prop]
		if !ok {
			return false
		}
		s, err := compile(r.ID, prop, r.Match[prop])
		if err != nil || s.Validate(v) != nil {
			return false
		}
	}
	return true
}

func compile(ruleID, prop string, raw json.RawMessage) (*schema.Schema, error) {
	s, err := schema.Compile(fmt.Sprintf("stub-%d.json", len(ruleID)+len(prop)), bytes.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("tool stub %q: could not create matcher %q: %w", ruleID, prop, err)
	}
	return s, nil
}

// findUnsupported returns the first unsupported keyword anywhere in a
// matcher, or "".
func findUnsupported(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var walk func(any) string
	walk = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if slices.Contains(unsupported, k) {
					return k
				}
				if kw := walk(x[k]); kw != "" {
					return kw
				}
			}
		case []any:
			for _, e := range x {
				if kw := walk(e); kw != "" {
					return kw
				}
			}
		}
		return ""
	}
	return walk(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
