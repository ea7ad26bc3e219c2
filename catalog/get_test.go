package catalog_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
)

// Published provider rules the formats are checked against.
var (
	// Anthropic Messages API, tools[].name; OpenAI Chat Completions,
	// tools[].function.name ("a-z, A-Z, 0-9, underscores and dashes, max 64").
	providerNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// MCP tool names (spec 2025-11-25): 1-128 characters of A-Z a-z 0-9 _ - .
	mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

func get(t *testing.T, c *catalog.Catalog, opts catalog.GetToolsOptions) (catalog.GetToolsResult, []map[string]any) {
	t.Helper()
	res, err := c.Get(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Check the wire JSON, which is what providers see.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Tools   json.RawMessage     `json:"tools"`
		NameMap catalog.ToolNameMap `json:"nameMap"`
		Raw     []catalog.Definition
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if res.Format == catalog.FormatAISDK {
		var set map[string]map[string]any
		if err := json.Unmarshal(wire.Tools, &set); err != nil {
			t.Fatalf("ai-sdk tools are not a record: %v", err)
		}
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set[k]["__key"] = k
			list = append(list, set[k])
		}
	} else if err := json.Unmarshal(wire.Tools, &list); err != nil {
		t.Fatalf("tools are not a list: %v", err)
	}
	if len(list) != len(res.Raw) || len(res.NameMap.CanonicalToWire) != len(res.Raw) || len(res.NameMap.WireToCanonical) != len(res.Raw) {
		t.Fatalf("%d tools, %d raw, name map %d/%d", len(list), len(res.Raw), len(res.NameMap.CanonicalToWire), len(res.NameMap.WireToCanonical))
	}
	return res, list
}

func requireObjectSchema(t *testing.T, where string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: schema is %T, want an object", where, v)
	}
	if m["type"] != "object" {
		t.Fatalf("%s: schema type %v, want \"object\"", where, m["type"])
	}
	return m
}

func TestGetAnthropic(t *testing.T) {
	c := catalogtest.Catalog()
	res, tools := get(t, c, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
	seen := map[string]bool{}
	for i, tool := range tools {
		// Anthropic: name (required, pattern), description (string),
		// input_schema (required, JSON Schema with type "object"); no other fields.
		name, _ := tool["name"].(string)
		if !providerNamePattern.MatchString(name) {
			t.Errorf("name %q breaks Anthropic's pattern", name)
		}
		if seen[name] {
			t.Errorf("duplicate tool name %q", name)
		}
		seen[name] = true
		if d, _ := tool["description"].(string); d == "" {
			t.Errorf("%s: no description", name)
		}
		requireObjectSchema(t, name, tool["input_schema"])
		for k := range tool {
			if k != "name" && k != "description" && k != "input_schema" {
				t.Errorf("%s: unexpected field %q", name, k)
			}
		}
		if res.NameMap.WireToCanonical[name] != res.Raw[i].Name {
			t.Errorf("tool %d: wire %s does not map to %s", i, name, res.Raw[i].Name)
		}
	}
	if a := res.Anthropic(); len(a) != 36 || a[0].Name != "calendar_create_event" {
		t.Fatalf("typed accessor: %d, %+v", len(a), a[0])
	}
}

func TestGetOpenAI(t *testing.T) {
	c := catalogtest.Catalog()
	res, tools := get(t, c, catalog.GetToolsOptions{Format: catalog.FormatOpenAI, Toolkits: []string{"gmail", "slack"}})
	if len(tools) != 17 {
		t.Fatalf("%d tools; want gmail (9) + slack (8)", len(tools))
	}
	for _, tool := range tools {
		if tool["type"] != "function" {
			t.Errorf("type %v, want function", tool["type"])
		}
		fn, _ := tool["function"].(map[string]any)
		name, _ := fn["name"].(string)
		if !providerNamePattern.MatchString(name) {
			t.Errorf("name %q breaks OpenAI's pattern", name)
		}
		requireObjectSchema(t, name, fn["parameters"])
		if _, ok := fn["strict"]; ok {
			t.Errorf("%s: strict set though not asked for", name)
		}
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings without strict: %v", res.Warnings)
	}
}

func TestGetOpenAIStrict(t *testing.T) {
	c := catalogtest.Catalog()
	res, tools := get(t, c, catalog.GetToolsOptions{Format: catalog.FormatOpenAI, Strict: true})
	fallback := map[string]string{}
	for _, w := range res.Warnings {
		if w.Code != catalog.WarningStrictFallback {
			t.Errorf("warning code %q", w.Code)
		}
		fallback[w.Tool] = w.Message
	}
	wantFallback := map[string]string{
		"slack.send_message":  `"maxLength"`,
		"github.run_workflow": "additionalProperties",
	}
	for tool, why := range wantFallback {
		if !strings.Contains(fallback[tool], why) {
			t.Errorf("fallback for %s = %q; want it to mention %s", tool, fallback[tool], why)
		}
	}
	if len(fallback) != len(wantFallback) {
		t.Errorf("fallbacks %v; want only %v", fallback, wantFallback)
	}
	for i, tool := range tools {
		fn := tool["function"].(map[string]any)
		strict, ok := fn["strict"].(bool)
		if !ok {
			t.Fatalf("%v: strict missing", fn["name"])
		}
		canon := res.Raw[i].Name
		if _, fell := fallback[canon]; fell == strict {
			t.Errorf("%s: strict=%v but fallback=%v", canon, strict, fell)
		}
		if strict {
			if problems := openAIStrictProblems(fn["parameters"]); len(problems) > 0 {
				t.Errorf("%s: strict parameters break OpenAI's rules: %v", canon, problems)
			}
		} else {
			// Fallback sends the schema exactly as defined.
			if !reflect.DeepEqual(fn["parameters"], decode(t, res.Raw[i].InputSchema)) {
				t.Errorf("%s: fallback parameters differ from the input schema", canon)
			}
		}
	}
}

func decode(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGetAISDK(t *testing.T) {
	c := catalogtest.Catalog()
	res, tools := get(t, c, catalog.GetToolsOptions{Format: catalog.FormatAISDK, Capability: "email.read"})
	if len(tools) != 4 {
		t.Fatalf("%d email.read tools; want 4", len(tools))
	}
	for _, tool := range tools {
		key := tool["__key"].(string)
		if !providerNamePattern.MatchString(key) {
			t.Errorf("key %q is not a provider-safe name", key)
		}
		if _, ok := res.NameMap.WireToCanonical[key]; !ok {
			t.Errorf("key %q not in the name map", key)
		}
		if d, _ := tool["description"].(string); d == "" {
			t.Errorf("%s: no description", key)
		}
		requireObjectSchema(t, key, tool["inputSchema"])
	}
	if set := res.AISDK(); set["gmail_search_emails"].Description == "" {
		t.Fatalf("typed accessor: %+v", set)
	}
}

func TestGetMCP(t *testing.T) {
	c := catalogtest.Catalog()
	res, tools := get(t, c, catalog.GetToolsOptions{Format: catalog.FormatMCP})
	if len(tools) != 35 {
		t.Fatalf("%d tools; want 35 (the async tool needs IncludeAsync)", len(tools))
	}
	for i, tool := range tools {
		name, _ := tool["name"].(string)
		if !mcpNamePattern.MatchString(name) || name != res.Raw[i].Name {
			t.Errorf("name %q: want the canonical name %q, matching MCP's rule", name, res.Raw[i].Name)
		}
		if res.NameMap.CanonicalToWire[name] != name || res.NameMap.WireToCanonical[name] != name {
			t.Errorf("%s: MCP name map is not the identity", name)
		}
		requireObjectSchema(t, name, tool["inputSchema"])
		if out, ok := tool["outputSchema"]; ok {
			requireObjectSchema(t, name+" output", out)
		}
		ann, ok := tool["annotations"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no annotations", name)
		}
		a := res.Raw[i].Annotations
		for hint, want := range map[string]bool{"readOnlyHint": a.ReadOnly, "destructiveHint": a.Destructive, "idempotentHint": a.Idempotent, "openWorldHint": a.OpenWorld} {
			if got, ok := ann[hint].(bool); !ok || got != want {
				t.Errorf("%s: %s = %v; want %v", name, hint, ann[hint], want)
			}
		}
	}
	res, tools = get(t, c, catalog.GetToolsOptions{Format: catalog.FormatMCP, IncludeAsync: true, Toolkits: []string{"github"}})
	found := false
	for _, tool := range tools {
		if tool["name"] == "github.run_workflow" {
			found = true
			if ex, _ := tool["execution"].(map[string]any); ex["taskSupport"] != "required" {
				t.Errorf("async tool execution = %v", tool["execution"])
			}
		} else if _, ok := tool["execution"]; ok {
			t.Errorf("%v: execution set on a sync tool", tool["name"])
		}
	}
	if !found || len(res.MCP()) != 12 {
		t.Fatalf("IncludeAsync: found=%v, %d tools", found, len(res.MCP()))
	}
	// For clients that reject dots: wire names.
	res, tools = get(t, c, catalog.GetToolsOptions{Format: catalog.FormatMCP, MCPWireNames: true, Toolkits: []string{"gmail"}})
	for i, tool := range tools {
		name := tool["name"].(string)
		if !providerNamePattern.MatchString(name) || res.NameMap.WireToCanonical[name] != res.Raw[i].Name || name != c.NameMap().CanonicalToWire[res.Raw[i].Name] {
			t.Errorf("MCPWireNames: %s for %s", name, res.Raw[i].Name)
		}
	}
}

func TestGetCanonicalAndFilters(t *testing.T) {
	c := catalogtest.Catalog()
	res, err := c.Get(catalog.GetToolsOptions{})
	if err != nil || res.Format != catalog.FormatCanonical || len(res.Canonical()) != 36 {
		t.Fatalf("default format: %v %s %d", err, res.Format, len(res.Canonical()))
	}
	res, _ = c.Get(catalog.GetToolsOptions{Toolkits: []string{"calendar"}, Capability: "calendar.read"})
	var names []string
	for _, d := range res.Canonical() {
		names = append(names, d.Name)
	}
	if want := []string{"calendar.find_free_slots", "calendar.list_calendars", "calendar.list_events"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("filtered = %v; want %v", names, want)
	}
	if _, err := c.Get(catalog.GetToolsOptions{Toolkits: []string{"gmial"}}); !errors.Is(err, catalog.ErrUnknownToolkit) {
		t.Fatalf("unknown toolkit: %v", err)
	}
	if _, err := c.Get(catalog.GetToolsOptions{Format: "gemini"}); err == nil {
		t.Fatal("unknown format accepted")
	}
	res, err = c.Get(catalog.GetToolsOptions{Capability: "nothing.here"})
	if err != nil || len(res.Canonical()) != 0 || len(res.NameMap.CanonicalToWire) != 0 {
		t.Fatalf("no match: %v %+v", err, res)
	}
}

func TestGetNameMapConsistentAcrossBundles(t *testing.T) {
	// Colliding names: "a_b.c" and "a.b_c" both sanitize to "a_b_c".
	c, err := catalog.New(valid("a_b.c"), valid("a.b_c"), valid("gmail.send_email"))
	if err != nil {
		t.Fatal(err)
	}
	full := c.NameMap()
	checkNameMap(t, []string{"a_b.c", "a.b_c", "gmail.send_email"}, full)
	for _, tk := range []string{"a_b", "a", "gmail"} {
		for _, f := range []catalog.Format{catalog.FormatAnthropic, catalog.FormatOpenAI, catalog.FormatAISDK} {
			res, err := c.Get(catalog.GetToolsOptions{Format: f, Toolkits: []string{tk}})
			if err != nil {
				t.Fatal(err)
			}
			for canon, w := range res.NameMap.CanonicalToWire {
				if full.CanonicalToWire[canon] != w {
					t.Errorf("%s in %s bundle for %s: %s; catalog says %s", canon, f, tk, w, full.CanonicalToWire[canon])
				}
			}
		}
	}
}

// openAIStrictProblems checks a schema against OpenAI's published strict
// mode rules (Structured Outputs "Supported schemas"), independently of the
// transform: root is an object and not anyOf; every object has
// additionalProperties:false and lists every property in required; only
// supported keywords and formats; nesting and size limits.
func openAIStrictProblems(schema any) []string {
	var problems []string
	supported := map[string]bool{
		"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
		"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "description": true,
		"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
		"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true,
	}
	formats := map[string]bool{"date-time": true, "time": true, "date": true, "duration": true, "email": true, "hostname": true, "ipv4": true, "ipv6": true, "uuid": true}
	props, enums := 0, 0
	var walk func(v any, path string, depth int)
	walk = func(v any, path string, depth int) {
		m, ok := v.(map[string]any)
		if !ok {
			problems = append(problems, path+": not an object schema")
			return
		}
		for k := range m {
			if !supported[k] {
				problems = append(problems, path+": unsupported keyword "+k)
			}
		}
		if f, ok := m["format"].(string); ok && !formats[f] {
			problems = append(problems, path+": unsupported format "+f)
		}
		if e, ok := m["enum"].([]any); ok {
			enums += len(e)
		}
		isObj := m["type"] == "object"
		if ts, ok := m["type"].([]any); ok {
			for _, t := range ts {
				isObj = isObj || t == "object"
			}
		}
		if _, typed := m["type"]; !typed {
			_, a := m["anyOf"]
			_, r := m["$ref"]
			_, e := m["enum"]
			_, c := m["const"]
			if !a && !r && !e && !c {
				problems = append(problems, path+": no type")
			}
		}
		if isObj {
			if depth > 10 {
				problems = append(problems, path+": nested deeper than 10")
			}
			if m["additionalProperties"] != false {
				problems = append(problems, path+": additionalProperties is not false")
			}
			ps, _ := m["properties"].(map[string]any)
			req, _ := m["required"].([]any)
			reqSet := map[string]bool{}
			for _, r := range req {
				reqSet[r.(string)] = true
			}
			if len(req) != len(ps) {
				problems = append(problems, path+": required does not list exactly the properties")
			}
			for k, sub := range ps {
				props++
				if !reqSet[k] {
					problems = append(problems, path+": property "+k+" not required")
				}
				walk(sub, path+"/properties/"+k, depth+1)
			}
		}
		if items, ok := m["items"]; ok {
			walk(items, path+"/items", depth)
		}
		if alts, ok := m["anyOf"].([]any); ok {
			if path == "" {
				problems = append(problems, "root uses anyOf")
			}
			for i, a := range alts {
				walk(a, path+"/anyOf/"+string(rune('0'+i)), depth)
			}
		}
		if defs, ok := m["$defs"].(map[string]any); ok {
			for k, d := range defs {
				walk(d, path+"/$defs/"+k, depth)
			}
		}
	}
	root, _ := schema.(map[string]any)
	if root == nil || root["type"] != "object" {
		problems = append(problems, "root is not type object")
	}
	walk(schema, "", 1)
	if props > 5000 {
		problems = append(problems, "more than 5000 properties")
	}
	if enums > 1000 {
		problems = append(problems, "more than 1000 enum values")
	}
	return problems
}
