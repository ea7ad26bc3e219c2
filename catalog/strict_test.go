package catalog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/catalog"
)

func strictOf(t *testing.T, schema string) (string, error) {
	t.Helper()
	d := valid("s.t")
	d.InputSchema = json.RawMessage(schema)
	c, err := catalog.New(d)
	if err != nil {
		t.Fatalf("schema does not load: %v", err)
	}
	raw, err := c.StrictParameters("s.t")
	if err != nil {
		return "", err
	}
	// The strict schema is itself a valid catalog input schema and meets
	// OpenAI's rules.
	d.InputSchema = raw
	if _, err := catalog.New(d); err != nil {
		t.Fatalf("strict schema %s does not load: %v", raw, err)
	}
	if p := openAIStrictProblems(decode(t, raw)); len(p) > 0 {
		t.Fatalf("strict schema %s breaks OpenAI's rules: %v", raw, p)
	}
	// The original is untouched.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(schema)); err != nil {
		t.Fatal(err)
	}
	if orig, _ := c.Lookup("s.t"); string(orig.InputSchema) != compact.String() {
		t.Fatalf("original schema changed: %s", orig.InputSchema)
	}
	return string(raw), nil
}

func TestStrictTransform(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"optional becomes nullable and required, order kept",
			`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer","description":"n"}},"required":["b"]}`,
			`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":["integer","null"],"description":"n"}},"required":["b","a"],"additionalProperties":false}`},
		{"nested objects and array items closed; open object closed",
			`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"boolean"}},"additionalProperties":true},"l":{"type":"array","items":{"type":"object","properties":{"y":{"type":"number"}},"required":["y"]}}},"required":["o","l"]}`,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":["boolean","null"]}},"additionalProperties":false,"required":["x"]},"l":{"type":"array","items":{"type":"object","properties":{"y":{"type":"number"}},"required":["y"],"additionalProperties":false}}},"required":["o","l"],"additionalProperties":false}`},
		{"optional enum gains null",
			`{"type":"object","properties":{"s":{"type":"string","enum":["a","b"]}}}`,
			`{"type":"object","properties":{"s":{"type":["string","null"],"enum":["a","b",null]}},"additionalProperties":false,"required":["s"]}`},
		{"optional $ref wrapped in anyOf, description on the wrapper",
			`{"type":"object","properties":{"p":{"$ref":"#/$defs/pt","description":"a point"}},"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}`,
			`{"type":"object","properties":{"p":{"description":"a point","anyOf":[{"$ref":"#/$defs/pt"},{"type":"null"}]}},"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}},"additionalProperties":false,"required":["p"]}`},
		{"optional anyOf gains a null branch",
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}},"additionalProperties":false,"required":["v"]}`},
		{"optional const becomes a nullable enum",
			`{"type":"object","properties":{"k":{"const":"x"}}}`,
			`{"type":"object","properties":{"k":{"enum":["x",null]}},"additionalProperties":false,"required":["k"]}`},
		{"already nullable stays",
			`{"type":"object","properties":{"n":{"type":["string","null"]}}}`,
			`{"type":"object","properties":{"n":{"type":["string","null"]}},"additionalProperties":false,"required":["n"]}`},
		{"annotations dropped, supported constraints kept",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"T","type":"object","properties":{"d":{"type":"string","format":"date-time","default":"now","examples":["x"],"pattern":"^2"},"m":{"type":"integer","minimum":1,"maximum":9,"multipleOf":1,"deprecated":true},"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},"required":["d","m","l"]}`,
			`{"type":"object","properties":{"d":{"type":"string","format":"date-time","pattern":"^2"},"m":{"type":"integer","minimum":1,"maximum":9,"multipleOf":1},"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},"required":["d","m","l"],"additionalProperties":false}`},
		{"no arguments",
			`{"type":"object"}`,
			`{"type":"object","additionalProperties":false,"properties":{},"required":[]}`},
		{"untyped object with properties gets a type",
			`{"type":"object","properties":{"o":{"properties":{"a":{"type":"string"}},"required":["a"]}},"required":["o"]}`,
			`{"type":"object","properties":{"o":{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object","additionalProperties":false}},"required":["o"],"additionalProperties":false}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := strictOf(t, tc.in)
			if err != nil {
				t.Fatalf("fell back: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestStrictFallback(t *testing.T) {
	nest := `{"type":"string"}`
	for i := 0; i < 11; i++ {
		nest = `{"type":"object","properties":{"n":` + nest + `},"required":["n"]}`
	}
	var many []string
	for i := 0; i < 5001; i++ {
		many = append(many, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
	}
	var enum []string
	for i := 0; i < 1001; i++ {
		enum = append(enum, fmt.Sprintf(`"v%d"`, i))
	}
	var bigEnum []string
	for i := 0; i < 300; i++ {
		bigEnum = append(bigEnum, `"`+strings.Repeat("x", 50)+fmt.Sprint(i)+`"`)
	}
	prop := func(s string) string { return `{"type":"object","properties":{"p":` + s + `},"required":["p"]}` }
	cases := []struct{ name, in, why string }{
		{"patternProperties", `{"type":"object","patternProperties":{"^x":{"type":"string"}}}`, `"patternProperties"`},
		{"minLength", prop(`{"type":"string","minLength":1}`), `/properties/p uses "minLength"`},
		{"maxLength", prop(`{"type":"string","maxLength":9}`), `"maxLength"`},
		{"oneOf", prop(`{"oneOf":[{"type":"string"},{"type":"integer"}]}`), `"oneOf"`},
		{"allOf", prop(`{"allOf":[{"type":"string"}]}`), `"allOf"`},
		{"not", prop(`{"type":"string","not":{"const":"x"}}`), `"not"`},
		{"if/then", prop(`{"type":"string","if":{"const":"a"},"then":{"const":"a"}}`), `"if"`},
		{"dependentRequired", `{"type":"object","properties":{"a":{"type":"string"}},"dependentRequired":{"a":["a"]}}`, `"dependentRequired"`},
		{"uniqueItems", prop(`{"type":"array","items":{"type":"string"},"uniqueItems":true}`), `"uniqueItems"`},
		{"prefixItems", prop(`{"type":"array","prefixItems":[{"type":"string"}]}`), `"prefixItems"`},
		{"minProperties", `{"type":"object","minProperties":1}`, `"minProperties"`},
		{"unsupported format", prop(`{"type":"string","format":"uri"}`), `"format"`},
		{"map object", prop(`{"type":"object","additionalProperties":{"type":"string"}}`), "additionalProperties is a schema"},
		{"free-form object", prop(`{"type":"object"}`), "free-form"},
		{"untyped value", prop(`{"description":"anything"}`), "no type"},
		{"array without items", prop(`{"type":"array"}`), "without items"},
		{"root anyOf", `{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"type":"string"},"b":{"type":"string"}}}`, "root schema uses anyOf"},
		{"boolean subschema", prop(`true`), "true/false schema"},
		{"nesting", nest, "levels deep"},
		{"properties", `{"type":"object","properties":{` + strings.Join(many, ",") + `}}`, "5001 object properties"},
		{"enum values", prop(`{"type":"string","enum":[` + strings.Join(enum, ",") + `]}`), "1001 enum values"},
		{"big enum", prop(`{"type":"string","enum":[` + strings.Join(bigEnum, ",") + `]}`), "enum of 300 strings"},
		{"$anchor", prop(`{"$anchor":"a","type":"string"}`), `"$anchor"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := strictOf(t, tc.in)
			if err == nil {
				t.Fatalf("strict transform accepted it")
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("reason %q; want it to mention %s", err, tc.why)
			}
		})
	}
}
