package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/internal/schema"
)

// Dialect is the only JSON Schema dialect the catalog accepts.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// schemaRules picks the input or output variant of each schema rule.
type schemaRules struct {
	json, object, dialect, meta, ref, compile, undeclared Rule
}

var (
	inputRules  = schemaRules{RuleInputJSON, RuleInputObject, RuleInputDialect, RuleInputMeta, RuleInputRef, RuleInputCompile, RuleInputUndeclared}
	outputRules = schemaRules{RuleOutputJSON, RuleOutputObject, RuleOutputDialect, RuleOutputMeta, RuleOutputRef, RuleOutputCompile, RuleOutputUndeclared}
)

// compiledSchema is a checked, compiled schema with its canonical bytes and
// its key-ordered tree.
type compiledSchema struct {
	raw  json.RawMessage // compact
	tree *object
	sch  *schema.Schema
}

// schemaCompiler compiles schemas one by one with the project's one
// schema stack (internal/schema); it is not safe for concurrent use (the
// loader builds one per worker).
type schemaCompiler struct {
	c *schema.Compiler
}

func newSchemaCompiler() *schemaCompiler {
	return &schemaCompiler{c: schema.NewCompiler()}
}

// checkSchema applies every schema rule to raw and compiles it. It returns
// nil and at least one problem when raw is not acceptable.
func (sc *schemaCompiler) checkSchema(raw json.RawMessage, rules schemaRules, add func(Rule, string, ...any)) *compiledSchema {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		add(rules.json, "not valid JSON: %v", err)
		return nil
	}
	t, err := parseTree(compact.Bytes())
	if err != nil {
		add(rules.json, "not valid JSON: %v", err)
		return nil
	}
	root, ok := t.(*object)
	if !ok {
		add(rules.object, "schema must be a JSON object, not %s", jsonKind(t))
		return nil
	}
	failed := false
	if typ, _ := root.get("type"); typ != "object" {
		add(rules.object, `root "type" must be "object" (tool arguments and results are JSON objects), got %s`, compactJSON(typ))
		failed = true
	}
	if v, ok := root.get("$schema"); ok {
		if s, _ := v.(string); strings.TrimSuffix(s, "#") != Dialect {
			add(rules.dialect, "$schema must be %q (JSON Schema 2020-12), got %s", Dialect, compactJSON(v))
			return nil
		}
	}
	sch, err := sc.c.Compile("catalog", compact.Bytes())
	if err != nil {
		var me *schema.MetaError
		var re *schema.RefError
		switch {
		case errors.As(err, &me) && len(me.Violations) > 0:
			add(rules.meta, "does not meta-validate against JSON Schema 2020-12: %s", joinViolations(fromSchema(me.Violations)))
		case errors.As(err, &me):
			add(rules.meta, "does not meta-validate against JSON Schema 2020-12: %v", me)
		case errors.As(err, &re):
			add(rules.ref, "$ref to %q cannot be resolved: %v", re.Ref, schema.ErrExternalRef)
		default:
			add(rules.compile, "%v", err)
		}
		return nil
	}
	walkSchemas(root, "", func(node *object, ptr string) {
		props, ok := node.obj("properties")
		if !ok {
			return
		}
		req, _ := node.get("required")
		names, _ := req.([]any)
		if len(names) == 0 {
			return
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas", "patternProperties", "unevaluatedProperties"} {
			if _, ok := node.get(k); ok {
				return
			}
		}
		if ap, ok := node.get("additionalProperties"); ok && ap != false {
			return
		}
		for _, n := range names {
			if s, ok := n.(string); ok {
				if _, declared := props.get(s); !declared {
					add(rules.undeclared, "%s/required names %q, which is not in properties", ptr, s)
					failed = true
				}
			}
		}
	})
	if failed {
		return nil
	}
	return &compiledSchema{raw: compact.Bytes(), tree: root, sch: sch}
}

// walkSchemas calls fn on every object-valued subschema reachable through
// JSON Schema 2020-12 applicator keywords, with its JSON pointer.
func walkSchemas(node *object, ptr string, fn func(node *object, ptr string)) {
	fn(node, ptr)
	for _, k := range node.keys {
		v := node.vals[k]
		switch k {
		case "items", "additionalProperties", "not", "if", "then", "else", "contains",
			"propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema":
			if o, ok := v.(*object); ok {
				walkSchemas(o, ptr+"/"+escapePtr(k), fn)
			}
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if m, ok := v.(*object); ok {
				for _, name := range m.keys {
					if o, ok := m.vals[name].(*object); ok {
						walkSchemas(o, ptr+"/"+escapePtr(k)+"/"+escapePtr(name), fn)
					}
				}
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if arr, ok := v.([]any); ok {
				for i, e := range arr {
					if o, ok := e.(*object); ok {
						walkSchemas(o, fmt.Sprintf("%s/%s/%d", ptr, k, i), fn)
					}
				}
			}
		}
	}
}

func escapePtr(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func jsonKind(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func compactJSON(v any) string {
	if v == nil {
		return "nothing"
	}
	s := string(marshalTree(v))
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// Violation is one way a value breaks a schema.
type Violation struct {
	// InstanceLocation is a JSON pointer into the value ("" is the root).
	InstanceLocation string `json:"instanceLocation"`
	// KeywordLocation is a JSON pointer into the tool's schema, to the
	// keyword that failed (references followed).
	KeywordLocation string `json:"keywordLocation,omitempty"`
	Message         string `json:"message"`
}

func (v Violation) String() string {
	loc := v.InstanceLocation
	if loc == "" {
		loc = "(root)"
	}
	return loc + ": " + v.Message
}

// InputError is returned by ValidateInput (and ValidateOutput) when a value
// breaks the tool's schema. It lists every violation.
type InputError struct {
	Tool string `json:"tool"`
	// Output is true when the value checked was a tool's output.
	Output     bool        `json:"output,omitempty"`
	Violations []Violation `json:"violations"`
}

func (e *InputError) Error() string {
	what := "input"
	if e.Output {
		what = "output"
	}
	return fmt.Sprintf("%s for %s does not match its schema: %s", what, e.Tool, joinViolations(e.Violations))
}

func joinViolations(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// fromSchema converts the schema stack's violations.
func fromSchema(vs []schema.Violation) []Violation {
	out := make([]Violation, len(vs))
	for i, v := range vs {
		out[i] = Violation{InstanceLocation: v.InstanceLocation, KeywordLocation: v.KeywordLocation, Message: v.Message}
	}
	return out
}

// validateValue checks JSON data against a compiled schema.
func validateValue(cs *compiledSchema, tool string, output bool, data json.RawMessage) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = json.RawMessage("{}")
	}
	vs, err := cs.sch.Violations(data)
	if err != nil {
		return &InputError{Tool: tool, Output: output, Violations: []Violation{{Message: "not valid JSON: " + err.Error()}}}
	}
	if len(vs) > 0 {
		return &InputError{Tool: tool, Output: output, Violations: fromSchema(vs)}
	}
	return nil
}

// stripOptionalNulls removes, recursively along properties, items and local
// $refs of the original schema, every property whose value is null and which
// the schema does not require. The OpenAI strict transform turns optional
// properties into required nullable ones, so a strict-mode model sends null
// where the tool's own schema expects the property to be absent.
func stripOptionalNulls(root *object, data json.RawMessage) (json.RawMessage, bool) {
	v, err := parseTree(data)
	if err != nil {
		return data, false
	}
	changed := stripNode(root, root, v, 0)
	if !changed {
		return data, false
	}
	return marshalTree(v), true
}

func stripNode(root, schema *object, v any, depth int) bool {
	if schema == nil || depth > 64 {
		return false
	}
	schema = resolveLocalRef(root, schema)
	changed := false
	switch val := v.(type) {
	case *object:
		props, _ := schema.obj("properties")
		required := map[string]bool{}
		if req, ok := schema.get("required"); ok {
			if arr, ok := req.([]any); ok {
				for _, r := range arr {
					if s, ok := r.(string); ok {
						required[s] = true
					}
				}
			}
		}
		for _, k := range append([]string(nil), val.keys...) {
			pv := val.vals[k]
			if pv == nil && !required[k] && props != nil {
				if _, declared := props.get(k); declared {
					val.del(k)
					changed = true
					continue
				}
			}
			if props != nil {
				if ps, ok := props.obj(k); ok {
					changed = stripNode(root, ps, pv, depth+1) || changed
				}
			}
		}
	case []any:
		if items, ok := schema.obj("items"); ok {
			for _, e := range val {
				changed = stripNode(root, items, e, depth+1) || changed
			}
		}
	}
	return changed
}

// resolveLocalRef follows "#/..." references within root.
func resolveLocalRef(root, schema *object) *object {
	for i := 0; i < 16; i++ {
		ref, ok := schema.str("$ref")
		if !ok || !strings.HasPrefix(ref, "#") {
			return schema
		}
		target := lookupPointer(root, strings.TrimPrefix(ref, "#"))
		if target == nil {
			return schema
		}
		schema = target
	}
	return schema
}

func lookupPointer(root *object, ptr string) *object {
	if ptr == "" {
		return root
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	var cur any = root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case *object:
			next, ok := c.get(tok)
			if !ok {
				return nil
			}
			cur = next
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	o, _ := cur.(*object)
	return o
}
