package toolsapi

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/eve-temporal/eve/catalog"
)

// appendGetResult encodes a Get result. Schemas are appended as stored
// (the catalog keeps them compact and valid), which makes a 10,000-tool
// bundle an order of magnitude cheaper than encoding/json, which re-checks
// every json.RawMessage. Object keys follow the struct tags of the catalog
// types; the name map's keys follow the tools' order.
func appendGetResult(b []byte, res catalog.GetToolsResult) ([]byte, error) {
	return encodeGetResult(b, res, nil)
}

// flushAt is the buffer size at which encodeGetResult hands bytes to its
// flush function.
const flushAt = 32 << 10

// encodeGetResult is appendGetResult that, when flush is set, hands the
// buffer to flush whenever it passes flushAt bytes (and reuses it), so a
// large bundle streams out in small writes instead of one large buffer.
func encodeGetResult(b []byte, res catalog.GetToolsResult, flush func([]byte) error) ([]byte, error) {
	var ferr error
	spill := func() {
		if flush != nil && len(b) >= flushAt && ferr == nil {
			ferr = flush(b)
			b = b[:0]
		}
	}
	b = append(b, `{"format":`...)
	b = appendString(b, string(res.Format))
	b = append(b, `,"tools":`...)
	var err error
	switch ts := res.Tools.(type) {
	case []catalog.Definition:
		b = append(b, '[')
		for i := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDefinition(b, &ts[i])
			spill()
		}
		b = append(b, ']')
	case []catalog.AnthropicTool:
		b = append(b, '[')
		for i, t := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendString(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = appendString(b, t.Description)
			}
			b = append(b, `,"input_schema":`...)
			b = appendRaw(b, t.InputSchema)
			b = append(b, '}')
			spill()
		}
		b = append(b, ']')
	case []catalog.OpenAITool:
		b = append(b, '[')
		for i, t := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, t.Type)
			b = append(b, `,"function":{"name":`...)
			b = appendString(b, t.Function.Name)
			if t.Function.Description != "" {
				b = append(b, `,"description":`...)
				b = appendString(b, t.Function.Description)
			}
			b = append(b, `,"parameters":`...)
			b = appendRaw(b, t.Function.Parameters)
			if t.Function.Strict != nil {
				b = append(b, `,"strict":`...)
				b = strconv.AppendBool(b, *t.Function.Strict)
			}
			b = append(b, `}}`...)
			spill()
		}
		b = append(b, ']')
	case catalog.AISDKToolSet:
		keys := make([]string, 0, len(ts))
		for k := range ts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			t := ts[k]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, `:{"description":`...)
			b = appendString(b, t.Description)
			b = append(b, `,"inputSchema":`...)
			b = appendRaw(b, t.InputSchema)
			if len(t.OutputSchema) > 0 {
				b = append(b, `,"outputSchema":`...)
				b = appendRaw(b, t.OutputSchema)
			}
			b = append(b, '}')
			spill()
		}
		b = append(b, '}')
	case []catalog.MCPTool:
		b = append(b, '[')
		for i, t := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendString(b, t.Name)
			if t.Title != "" {
				b = append(b, `,"title":`...)
				b = appendString(b, t.Title)
			}
			b = append(b, `,"description":`...)
			b = appendString(b, t.Description)
			b = append(b, `,"inputSchema":`...)
			b = appendRaw(b, t.InputSchema)
			if len(t.OutputSchema) > 0 {
				b = append(b, `,"outputSchema":`...)
				b = appendRaw(b, t.OutputSchema)
			}
			b = append(b, `,"annotations":`...)
			if b, err = appendJSON(b, t.Annotations); err != nil {
				return nil, err
			}
			if t.Execution != nil {
				b = append(b, `,"execution":`...)
				if b, err = appendJSON(b, t.Execution); err != nil {
					return nil, err
				}
			}
			b = append(b, '}')
			spill()
		}
		b = append(b, ']')
	default:
		if b, err = appendJSON(b, res.Tools); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"nameMap":{"canonicalToWire":{`...)
	n := 0
	for _, d := range res.Raw {
		w, ok := res.NameMap.CanonicalToWire[d.Name]
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, d.Name)
		b = append(b, ':')
		b = appendString(b, w)
		spill()
	}
	b = append(b, `},"wireToCanonical":{`...)
	n = 0
	for _, d := range res.Raw {
		w, ok := res.NameMap.CanonicalToWire[d.Name]
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, w)
		b = append(b, ':')
		b = appendString(b, d.Name)
		spill()
	}
	b = append(b, `}},"raw":[`...)
	for i := range res.Raw {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDefinition(b, &res.Raw[i])
		spill()
	}
	b = append(b, ']')
	if len(res.Warnings) > 0 {
		b = append(b, `,"warnings":`...)
		if b, err = appendJSON(b, res.Warnings); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	return b, ferr
}

func appendDefinition(b []byte, d *catalog.Definition) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, d.Name)
	b = append(b, `,"toolkit":`...)
	b = appendString(b, d.Toolkit)
	b = append(b, `,"capability":`...)
	b = appendString(b, d.Capability)
	b = append(b, `,"description":`...)
	b = appendString(b, d.Description)
	b = append(b, `,"inputSchema":`...)
	b = appendRaw(b, d.InputSchema)
	if len(d.OutputSchema) > 0 {
		b = append(b, `,"outputSchema":`...)
		b = appendRaw(b, d.OutputSchema)
	}
	a := d.Annotations
	b = append(b, `,"annotations":{"readOnly":`...)
	b = strconv.AppendBool(b, a.ReadOnly)
	b = append(b, `,"destructive":`...)
	b = strconv.AppendBool(b, a.Destructive)
	b = append(b, `,"idempotent":`...)
	b = strconv.AppendBool(b, a.Idempotent)
	b = append(b, `,"openWorld":`...)
	b = strconv.AppendBool(b, a.OpenWorld)
	b = append(b, `,"async":`...)
	b = strconv.AppendBool(b, a.Async)
	b = append(b, `},"version":`...)
	b = appendString(b, d.Version)
	return append(b, '}')
}

// appendRaw appends a stored schema; an empty one is null.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

func appendJSON(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// with HTML escaping off (invalid UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
