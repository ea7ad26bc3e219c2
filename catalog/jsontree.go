package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// object is a JSON object that remembers its key order, so a schema
// rewritten by the catalog (the OpenAI strict transform) keeps the order of
// its properties: OpenAI emits keys in the schema's order, and models read
// parameters in the order they were written.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *object) str(k string) (string, bool) {
	v, ok := o.vals[k]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func (o *object) obj(k string) (*object, bool) {
	v, ok := o.vals[k]
	if !ok {
		return nil, false
	}
	m, ok := v.(*object)
	return m, ok
}

func (o *object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseTree decodes JSON into *object, []any, string, json.Number, bool and
// nil, keeping object key order. Duplicate keys are an error: JSON Schema
// tooling disagrees on which one wins, so a schema that has them is ambiguous.
func parseTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return t, nil
	}
}

func writeJSON(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeJSON(buf, t.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

// marshalTree encodes a tree from parseTree without HTML escaping surprises
// beyond encoding/json's defaults.
func marshalTree(v any) json.RawMessage {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		// Only values produced by parseTree reach here; they always encode.
		panic(fmt.Sprintf("catalog: encode schema: %v", err))
	}
	return buf.Bytes()
}

// cloneTree deep-copies a tree from parseTree.
func cloneTree(v any) any {
	switch t := v.(type) {
	case *object:
		c := &object{keys: append([]string(nil), t.keys...), vals: make(map[string]any, len(t.vals))}
		for k, e := range t.vals {
			c.vals[k] = cloneTree(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = cloneTree(e)
		}
		return c
	default:
		return t
	}
}
