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
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, err
	}
	p := &treeParser{data: data}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.data) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

// treeParser parses JSON already checked by json.Valid.
type treeParser struct {
	data []byte
	i    int
}

func (p *treeParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *treeParser) value() (any, error) {
	p.space()
	if p.i >= len(p.data) {
		return nil, io.ErrUnexpectedEOF
	}
	switch c := p.data[p.i]; {
	case c == '{':
		p.i++
		o := newObject()
		p.space()
		if p.data[p.i] == '}' {
			p.i++
			return o, nil
		}
		for {
			p.space()
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			p.i++ // ':'
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			o.set(k, v)
			p.space()
			if p.data[p.i] == ',' {
				p.i++
				continue
			}
			p.i++ // '}'
			return o, nil
		}
	case c == '[':
		p.i++
		arr := []any{}
		p.space()
		if p.data[p.i] == ']' {
			p.i++
			return arr, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			p.space()
			if p.data[p.i] == ',' {
				p.i++
				continue
			}
			p.i++ // ']'
			return arr, nil
		}
	case c == '"':
		return p.str()
	case c == 't':
		p.i += 4
		return true, nil
	case c == 'f':
		p.i += 5
		return false, nil
	case c == 'n':
		p.i += 4
		return nil, nil
	default:
		start := p.i
		for p.i < len(p.data) {
			switch p.data[p.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return json.Number(p.data[start:p.i]), nil
			}
			p.i++
		}
		return json.Number(p.data[start:p.i]), nil
	}
}

// str parses a string at p.i; escapes go through encoding/json.
func (p *treeParser) str() (string, error) {
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == '\\' {
			escaped = true
			p.i += 2
			continue
		}
		if c == '"' {
			p.i++
			if !escaped {
				return string(p.data[start+1 : p.i-1]), nil
			}
			var s string
			err := json.Unmarshal(p.data[start:p.i], &s)
			return s, err
		}
		p.i++
	}
	return "", io.ErrUnexpectedEOF
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
