package catalog

import (
	"encoding/json"
	"fmt"
)

// OpenAI strict mode (Structured Outputs, "strict": true on a function)
// accepts a subset of JSON Schema. The limits and keyword lists below follow
// OpenAI's published "Supported schemas" rules; docs/catalog.md lists them
// with what the transform does about each.
const (
	strictMaxProperties  = 5000   // object properties in total
	strictMaxDepth       = 10     // levels of object nesting
	strictMaxStringBytes = 120000 // property names + $defs names + enum and const values
	strictMaxEnumValues  = 1000   // across all enums
	strictBigEnum        = 250    // an enum with more string values than this...
	strictBigEnumBytes   = 15000  // ...may total at most this many characters
)

// strictAllowed are the keywords strict mode supports.
var strictAllowed = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true,
	"description": true,
	// strings
	"pattern": true, "format": true,
	// numbers
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	// arrays
	"minItems": true, "maxItems": true,
}

// strictDropped are annotations that do not constrain values; the transform
// removes them instead of giving up on strict mode.
var strictDropped = map[string]bool{
	"title": true, "default": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// strictFormats are the string formats strict mode supports.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// strictTransform rewrites an object schema for OpenAI strict mode: every
// object closed (additionalProperties: false), every property required, and
// every property that was optional made nullable. It returns an error naming
// the first construct strict mode forbids, in which case the caller falls
// back to the schema as it is with strict:false.
func strictTransform(root *object) (json.RawMessage, error) {
	st := &strictState{}
	r := cloneTree(root).(*object)
	if _, ok := r.get("anyOf"); ok {
		return nil, fmt.Errorf("the root schema uses anyOf; strict mode needs a plain object at the root")
	}
	r.del("$schema")
	r.del("$id")
	if err := st.node(r, "", 1, true); err != nil {
		return nil, err
	}
	if st.props > strictMaxProperties {
		return nil, fmt.Errorf("the schema has %d object properties; strict mode allows %d", st.props, strictMaxProperties)
	}
	if st.strBytes > strictMaxStringBytes {
		return nil, fmt.Errorf("property names, definition names and enum/const values total %d characters; strict mode allows %d", st.strBytes, strictMaxStringBytes)
	}
	if st.enumValues > strictMaxEnumValues {
		return nil, fmt.Errorf("the schema has %d enum values; strict mode allows %d", st.enumValues, strictMaxEnumValues)
	}
	return marshalTree(r), nil
}

type strictState struct {
	props, strBytes, enumValues int
}

func strictUnsupported(ptr, kw, why string) error {
	if ptr == "" {
		ptr = "(root)"
	}
	return fmt.Errorf("%s uses %q, %s", ptr, kw, why)
}

// node transforms one subschema in place. depth counts object nesting.
func (st *strictState) node(n *object, ptr string, depth int, root bool) error {
	for _, k := range append([]string(nil), n.keys...) {
		switch {
		case strictAllowed[k]:
		case strictDropped[k]:
			n.del(k)
		default:
			return strictUnsupported(ptr, k, "which OpenAI strict mode does not support")
		}
	}
	if ref, ok := n.get("$ref"); ok {
		if s, _ := ref.(string); len(s) == 0 || s[0] != '#' {
			return strictUnsupported(ptr, "$ref", fmt.Sprintf("with value %s; strict mode needs references within the schema (\"#/...\")", compactJSON(ref)))
		}
	}
	if f, ok := n.get("format"); ok {
		if s, _ := f.(string); !strictFormats[s] {
			return strictUnsupported(ptr, "format", fmt.Sprintf("with value %s, which OpenAI strict mode does not support", compactJSON(f)))
		}
	}
	if e, ok := n.get("enum"); ok {
		if err := st.enum(e, ptr); err != nil {
			return err
		}
	}
	if c, ok := n.get("const"); ok {
		if s, ok := c.(string); ok {
			st.strBytes += len(s)
		}
	}
	if defs, ok := n.get("$defs"); ok {
		m, ok := defs.(*object)
		if !ok {
			return strictUnsupported(ptr, "$defs", "which is not an object")
		}
		for _, name := range m.keys {
			st.strBytes += len(name)
			sub, ok := m.vals[name].(*object)
			if !ok {
				return strictUnsupported(ptr+"/$defs/"+escapePtr(name), "true/false schema", "which OpenAI strict mode does not support")
			}
			if err := st.node(sub, ptr+"/$defs/"+escapePtr(name), depth, false); err != nil {
				return err
			}
		}
	}
	if alts, ok := n.get("anyOf"); ok {
		arr, _ := alts.([]any)
		for i, e := range arr {
			sub, ok := e.(*object)
			if !ok {
				return strictUnsupported(fmt.Sprintf("%s/anyOf/%d", ptr, i), "true/false schema", "which OpenAI strict mode does not support")
			}
			if err := st.node(sub, fmt.Sprintf("%s/anyOf/%d", ptr, i), depth, false); err != nil {
				return err
			}
		}
	}
	types := schemaTypes(n)
	_, hasProps := n.get("properties")
	if len(types) == 0 && hasProps {
		n.set("type", "object")
		types = []string{"object"}
	}
	if len(types) == 0 {
		_, hasAny := n.get("anyOf")
		_, hasRef := n.get("$ref")
		_, hasEnum := n.get("enum")
		_, hasConst := n.get("const")
		if !hasAny && !hasRef && !hasEnum && !hasConst {
			if ptr == "" {
				ptr = "(root)"
			}
			return fmt.Errorf("%s has no type (it accepts any value), which OpenAI strict mode does not support", ptr)
		}
	}
	isObject, isArray := false, false
	for _, t := range types {
		isObject = isObject || t == "object"
		isArray = isArray || t == "array"
	}
	if isArray {
		if items, ok := n.get("items"); ok {
			sub, ok := items.(*object)
			if !ok {
				return strictUnsupported(ptr+"/items", "true/false schema", "which OpenAI strict mode does not support")
			}
			if err := st.node(sub, ptr+"/items", depth, false); err != nil {
				return err
			}
		} else {
			return fmt.Errorf("%s is an array without items, which OpenAI strict mode does not support", orRoot(ptr))
		}
	}
	if isObject {
		if depth > strictMaxDepth {
			return fmt.Errorf("%s nests objects %d levels deep; strict mode allows %d", orRoot(ptr), depth, strictMaxDepth)
		}
		if err := st.object(n, ptr, depth, root); err != nil {
			return err
		}
	}
	return nil
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "(root)"
	}
	return ptr
}

func (st *strictState) enum(e any, ptr string) error {
	arr, ok := e.([]any)
	if !ok {
		return strictUnsupported(ptr, "enum", "which is not an array")
	}
	st.enumValues += len(arr)
	strs, total := 0, 0
	for _, v := range arr {
		if s, ok := v.(string); ok {
			strs++
			total += len(s)
		}
	}
	st.strBytes += total
	if strs > strictBigEnum && total > strictBigEnumBytes {
		return fmt.Errorf("%s has an enum of %d strings totalling %d characters; strict mode allows %d characters for enums over %d values", orRoot(ptr), strs, total, strictBigEnumBytes, strictBigEnum)
	}
	return nil
}

// object closes an object schema and makes every property required,
// optional ones nullable.
func (st *strictState) object(n *object, ptr string, depth int, root bool) error {
	props, _ := n.obj("properties")
	if ap, ok := n.get("additionalProperties"); ok && ap != false && ap != true {
		return fmt.Errorf("%s/additionalProperties is a schema (a map with open keys), which OpenAI strict mode does not support: every object must be closed", ptr)
	}
	_, closedAlready := n.get("additionalProperties")
	closedAlready = closedAlready && n.vals["additionalProperties"] == false
	if (props == nil || len(props.keys) == 0) && !closedAlready && !root {
		return fmt.Errorf("%s is an object without properties (free-form), which OpenAI strict mode cannot express: closing it would forbid every key", orRoot(ptr))
	}
	n.set("additionalProperties", false)
	if props == nil {
		props = newObject()
		n.set("properties", props)
	}
	required := map[string]bool{}
	if req, ok := n.get("required"); ok {
		arr, _ := req.([]any)
		for _, r := range arr {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	all := make([]any, 0, len(props.keys))
	for _, name := range props.keys {
		st.props++
		st.strBytes += len(name)
		sub, ok := props.vals[name].(*object)
		if !ok {
			return strictUnsupported(ptr+"/properties/"+escapePtr(name), "true/false schema", "which OpenAI strict mode does not support")
		}
		p := ptr + "/properties/" + escapePtr(name)
		if err := st.node(sub, p, depth+1, false); err != nil {
			return err
		}
		if !required[name] {
			props.vals[name] = nullable(sub)
		}
		all = append(all, name)
	}
	n.set("required", all)
	return nil
}

// schemaTypes returns the "type" keyword as a list.
func schemaTypes(n *object) []string {
	t, ok := n.get("type")
	if !ok {
		return nil
	}
	switch v := t.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// nullable returns s widened to also accept null.
func nullable(s *object) *object {
	if acceptsNull(s) {
		return s
	}
	if _, ok := s.get("$ref"); ok {
		return wrapNull(s)
	}
	if anyOf, ok := s.get("anyOf"); ok {
		arr, _ := anyOf.([]any)
		if _, typed := s.get("type"); !typed {
			s.set("anyOf", append(arr, nullSchema()))
			return s
		}
		return wrapNull(s)
	}
	if c, ok := s.get("const"); ok {
		s.del("const")
		s.set("enum", []any{c, nil})
	} else if e, ok := s.get("enum"); ok {
		arr, _ := e.([]any)
		s.set("enum", append(arr, nil))
	}
	switch t := s.vals["type"].(type) {
	case string:
		s.set("type", []any{t, "null"})
	case []any:
		s.set("type", append(t, "null"))
	}
	return s
}

// wrapNull returns {"anyOf": [s, {"type": "null"}]}, keeping s's
// description on the wrapper.
func wrapNull(s *object) *object {
	w := newObject()
	if d, ok := s.get("description"); ok {
		w.set("description", d)
		s.del("description")
	}
	w.set("anyOf", []any{s, nullSchema()})
	return w
}

func nullSchema() *object {
	o := newObject()
	o.set("type", "null")
	return o
}

func acceptsNull(s *object) bool {
	for _, t := range schemaTypes(s) {
		if t == "null" {
			return true
		}
	}
	if anyOf, ok := s.get("anyOf"); ok {
		arr, _ := anyOf.([]any)
		for _, e := range arr {
			if o, ok := e.(*object); ok && acceptsNull(o) && len(schemaTypes(o)) > 0 {
				return true
			}
		}
	}
	return false
}

// strictFor returns the strict parameters of e, computing them once.
func (e *entry) strictFor() (json.RawMessage, string) {
	e.strictOnce.Do(func() {
		raw, err := strictTransform(e.input.tree)
		if err != nil {
			e.strictWhy = err.Error()
			return
		}
		e.strict = raw
	})
	return e.strict, e.strictWhy
}

// StrictParameters returns the OpenAI strict-mode parameters of a tool, or
// the reason strict mode cannot express its input schema.
func (c *Catalog) StrictParameters(name string) (json.RawMessage, error) {
	e, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	raw, why := e.strictFor()
	if why != "" {
		return nil, fmt.Errorf("%s: %s", name, why)
	}
	return raw, nil
}
