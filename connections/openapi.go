package connections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/eve-temporal/eve/tools"
)

// OpenAPI is an HTTP API described by an OpenAPI 3.0 or 3.1 document:
// each operation becomes one tool, named by its operationId (or
// "<method>_<path>" without one), whose input holds the operation's path,
// query and header parameters and, as "body", its JSON request body, and
// whose result is {status, statusText, body}.
type OpenAPI struct {
	// Document is the OpenAPI document, JSON or YAML. Only local refs
	// ("#/components/...") are followed.
	Document []byte
	// BaseURL is where operation paths are resolved (default: the
	// document's first servers entry): https, or http on a loopback host.
	BaseURL string
}

// maxRefDepth bounds the inlining of refs: a recursive schema is cut
// there (its deeper levels accept anything).
const maxRefDepth = 8

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch"}

// operation is one OpenAPI operation as its tool calls it.
type operation struct {
	method, path string
	params       []param
	hasBody      bool
}

type param struct{ name, in string }

func parseDocument(doc []byte) (map[string]any, error) {
	b := doc
	if t := bytes.TrimSpace(doc); len(t) == 0 || t[0] != '{' {
		var err error
		if b, err = yaml.YAMLToJSON(doc); err != nil {
			return nil, fmt.Errorf("read the OpenAPI document as YAML: %w", err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	v, _ := m["openapi"].(string)
	if !strings.HasPrefix(v, "3.0") && !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapi version %q: want 3.0.x or 3.1.x", v)
	}
	return m, nil
}

// deref inlines the local refs of v.
func deref(root map[string]any, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if depth >= maxRefDepth || !strings.HasPrefix(ref, "#/") {
				return map[string]any{}
			}
			var cur any = root
			for _, part := range strings.Split(ref[2:], "/") {
				part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
				m, _ := cur.(map[string]any)
				cur = m[part]
			}
			return deref(root, cur, depth+1)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deref(root, e, depth)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deref(root, e, depth)
		}
		return out
	}
	return v
}

func discoverOpenAPI(c *Connection, r *runtime) ([]*tools.Tool, error) {
	doc, err := parseDocument(c.OpenAPI.Document)
	if err != nil {
		return nil, err
	}
	base := c.OpenAPI.BaseURL
	if base == "" {
		if servers, _ := doc["servers"].([]any); len(servers) > 0 {
			s, _ := servers[0].(map[string]any)
			base, _ = s["url"].(string)
		}
		if err := checkURL(base); err != nil {
			return nil, fmt.Errorf("the document's first server: %w; set OpenAPI.BaseURL", err)
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*tools.Tool
	for _, path := range keys {
		item, _ := deref(doc, paths[path], 0).(map[string]any)
		shared, _ := item["parameters"].([]any)
		for _, method := range methods {
			op, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			remote, _ := op["operationId"].(string)
			if remote == "" {
				remote = method + "_" + strings.Trim(strings.NewReplacer("/", "_", "{", "", "}", "").Replace(path), "_")
			}
			if !c.allowed(remote) {
				continue
			}
			t, err := c.openAPITool(r, base, method, path, remote, op, shared)
			if err != nil {
				return nil, fmt.Errorf("operation %s: %w", remote, err)
			}
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *Connection) openAPITool(r *runtime, base, method, path, remote string, op map[string]any, shared []any) (*tools.Tool, error) {
	name, ok := toolName(c.Name, remote)
	if !ok {
		return nil, fmt.Errorf("no valid tool name comes of %q (at most 64 characters with the prefix %s__)", remote, c.Name)
	}
	props := map[string]any{}
	var required []string
	o := operation{method: strings.ToUpper(method), path: path}
	own, _ := op["parameters"].([]any)
	byKey := map[string]map[string]any{}
	var order []string
	for _, list := range [][]any{shared, own} { // an operation's own win
		for _, p := range list {
			pm, _ := p.(map[string]any)
			n, _ := pm["name"].(string)
			in, _ := pm["in"].(string)
			if n == "" || in == "cookie" {
				continue
			}
			k := in + ":" + n
			if _, seen := byKey[k]; !seen {
				order = append(order, k)
			}
			byKey[k] = pm
		}
	}
	for _, k := range order {
		pm := byKey[k]
		n, in := pm["name"].(string), pm["in"].(string)
		if _, clash := props[n]; clash || n == "body" {
			return nil, fmt.Errorf("parameter %q appears twice (in different places) or is named body: the tool's input cannot hold both", n)
		}
		s, _ := pm["schema"].(map[string]any)
		if s == nil {
			s = map[string]any{"type": "string"}
		}
		s = cleanSchema(s)
		if d, _ := pm["description"].(string); d != "" {
			s["description"] = d
		}
		props[n] = s
		if req, _ := pm["required"].(bool); req || in == "path" {
			required = append(required, n)
		}
		o.params = append(o.params, param{name: n, in: in})
	}
	if rb, _ := op["requestBody"].(map[string]any); rb != nil {
		content, _ := rb["content"].(map[string]any)
		mt, _ := content["application/json"].(map[string]any)
		if mt == nil {
			return nil, fmt.Errorf("request body: only application/json is supported")
		}
		s, _ := mt["schema"].(map[string]any)
		if s == nil {
			s = map[string]any{}
		}
		props["body"] = cleanSchema(s)
		if req, _ := rb["required"].(bool); req {
			required = append(required, "body")
		}
		o.hasBody = true
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	in, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	desc, _ := op["description"].(string)
	if sum, _ := op["summary"].(string); sum != "" && desc == "" {
		desc = sum
	}
	ann := tools.Annotations{OpenWorld: true}
	switch o.method {
	case "GET", "HEAD", "OPTIONS":
		ann.ReadOnly, ann.Idempotent = true, true
	case "PUT":
		ann.Idempotent = true
	case "DELETE":
		ann.Idempotent, ann.Destructive = true, true
	}
	summary, _ := op["summary"].(string)
	t := &tools.Tool{
		Name:           name,
		Description:    c.describe(remote, desc),
		InputSchema:    in,
		Title:          summary,
		Timeout:        c.Timeout,
		MaxOutputBytes: c.MaxOutputBytes,
		Idempotent:     c.idempotent(remote, ann.Idempotent),
		Approval:       c.policy(remote, ann.Destructive),
		Toolkit:        c.Name,
		Annotations:    ann,
		Remote:         &tools.Remote{Connection: c.Name, Tool: remote, Identity: c.identity()},
	}
	t.Execute = func(ctx *tools.Context, input json.RawMessage) (any, error) {
		return r.callOpenAPI(ctx, c, base, o, input)
	}
	return t, nil
}

// cleanSchema drops what the validator of 2020-12 would misread in an
// OpenAPI 3.0 schema: nullable (3.0's) becomes a type union, and example
// annotations go.
func cleanSchema(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "example", "xml", "externalDocs", "discriminator", "readOnly", "writeOnly", "deprecated":
			continue
		case "properties":
			if props, ok := v.(map[string]any); ok {
				cp := make(map[string]any, len(props))
				for pk, pv := range props {
					if pm, ok := pv.(map[string]any); ok {
						cp[pk] = cleanSchema(pm)
					} else {
						cp[pk] = pv
					}
				}
				v = cp
			}
		case "items", "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				v = cleanSchema(m)
			}
		case "allOf", "anyOf", "oneOf":
			if list, ok := v.([]any); ok {
				cp := make([]any, len(list))
				for i, e := range list {
					if m, ok := e.(map[string]any); ok {
						cp[i] = cleanSchema(m)
					} else {
						cp[i] = e
					}
				}
				v = cp
			}
		}
		out[k] = v
	}
	if n, _ := out["nullable"].(bool); n {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
	}
	delete(out, "nullable")
	return out
}

// Result is what an OpenAPI tool returns.
type Result struct {
	Status     int    `json:"status"`
	StatusText string `json:"statusText"`
	Body       any    `json:"body,omitempty"`
}

func (r *runtime) callOpenAPI(ctx *tools.Context, c *Connection, base string, o operation, input json.RawMessage) (any, error) {
	p, err := c.principal(ctx.Session)
	if err != nil {
		return nil, tools.NonRetryable(err)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, tools.NonRetryable(fmt.Errorf("decode input: %w", err))
	}
	path := o.path
	q := url.Values{}
	hdr := http.Header{}
	for _, prm := range o.params {
		raw, ok := args[prm.name]
		if !ok {
			continue
		}
		v := scalar(raw)
		switch prm.in {
		case "path":
			if v == "." || v == ".." {
				return nil, tools.NonRetryable(fmt.Errorf("path parameter %s must not be %q", prm.name, v))
			}
			path = strings.ReplaceAll(path, "{"+prm.name+"}", url.PathEscape(v))
		case "query":
			q.Set(prm.name, v)
		case "header":
			hdr.Set(prm.name, v)
		}
	}
	target := strings.TrimRight(base, "/") + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	if b, ok := args["body"]; ok && o.hasBody {
		body = bytes.NewReader(b)
		hdr.Set("Content-Type", "application/json")
	}
	req, err := http.NewRequestWithContext(ctx, o.method, target, body)
	if err != nil {
		return nil, tools.NonRetryable(fmt.Errorf("build the request: %w", err))
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.httpClient(c, p).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", o.method, o.path, err)
	}
	defer resp.Body.Close()
	limit := c.MaxOutputBytes
	if limit <= 0 {
		limit = tools.DefaultMaxOutputBytes
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the response: %w", o.method, o.path, err)
	}
	if len(data) > limit {
		return nil, remoteError("%s %s answered more than %d bytes: the connection's MaxOutputBytes; raise it or ask for less (a page, a filter)", o.method, o.path, limit)
	}
	res := Result{Status: resp.StatusCode, StatusText: http.StatusText(resp.StatusCode)}
	if len(data) > 0 {
		var v any
		if json.Unmarshal(data, &v) == nil {
			res.Body = v
		} else {
			res.Body = string(data)
		}
	}
	if resp.StatusCode >= 400 {
		msg := string(data)
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		err := fmt.Errorf("%s %s answered %d %s: %s", o.method, o.path, resp.StatusCode, res.StatusText, msg)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return nil, err // retried only when the operation is safe to repeat
		}
		return nil, tools.NonRetryable(err)
	}
	return res, nil
}

// scalar is a parameter's value as text: strings unquoted, other JSON as is.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
