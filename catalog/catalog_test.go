package catalog_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
)

func valid(name string) catalog.Definition {
	tk, _, _ := catalog.SplitName(name)
	return catalog.Definition{
		Name:        name,
		Toolkit:     tk,
		Capability:  "test.cap",
		Description: "A test tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Version:     "1.0.0",
	}
}

func loadErr(t *testing.T, defs ...catalog.Definition) *catalog.LoadError {
	t.Helper()
	_, err := catalog.New(defs...)
	if err == nil {
		t.Fatalf("New succeeded; want a load error")
	}
	var le *catalog.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("error %T %v is not a *LoadError", err, err)
	}
	return le
}

func TestFixtureLoads(t *testing.T) {
	c := catalogtest.Catalog()
	if c.Len() < 30 {
		t.Fatalf("fixture has %d tools; want at least 30", c.Len())
	}
	tks := c.Toolkits()
	if len(tks) != 4 || tks[0].Slug != "calendar" || tks[0].Name != "Google Calendar" || tks[0].Tools != 7 {
		t.Fatalf("toolkits = %+v", tks)
	}
	defs := c.Definitions()
	for i := 1; i < len(defs); i++ {
		if defs[i-1].Name >= defs[i].Name {
			t.Fatalf("definitions not sorted: %s before %s", defs[i-1].Name, defs[i].Name)
		}
	}
}

func TestLoadRules(t *testing.T) {
	mod := func(name string, f func(*catalog.Definition)) catalog.Definition {
		d := valid(name)
		f(&d)
		return d
	}
	cases := []struct {
		def  catalog.Definition
		tool string
		rule catalog.Rule
	}{
		{mod("x.a", func(d *catalog.Definition) { d.Name = "" }), "#0", catalog.RuleNameFormat},
		{mod("x.a", func(d *catalog.Definition) { d.Name = "nodot" }), "nodot", catalog.RuleNameFormat},
		{mod("X.a", func(d *catalog.Definition) {}), "X.a", catalog.RuleNameFormat},
		{mod("x.a.b", func(d *catalog.Definition) {}), "x.a.b", catalog.RuleNameFormat},
		{mod("x.send__email", func(d *catalog.Definition) {}), "x.send__email", catalog.RuleNameFormat},
		{mod("x.1tool", func(d *catalog.Definition) {}), "x.1tool", catalog.RuleNameFormat},
		{mod("x."+strings.Repeat("a", 65), func(d *catalog.Definition) {}), "x." + strings.Repeat("a", 65), catalog.RuleNameFormat},
		{mod("x.a", func(d *catalog.Definition) { d.Toolkit = "" }), "x.a", catalog.RuleToolkitFormat},
		{mod("x.a", func(d *catalog.Definition) { d.Toolkit = "y" }), "x.a", catalog.RuleToolkitMatch},
		{mod("x.a", func(d *catalog.Definition) { d.Capability = "" }), "x.a", catalog.RuleCapability},
		{mod("x.a", func(d *catalog.Definition) { d.Capability = "Email Send" }), "x.a", catalog.RuleCapability},
		{mod("x.a", func(d *catalog.Definition) { d.Description = "  " }), "x.a", catalog.RuleDescription},
		{mod("x.a", func(d *catalog.Definition) { d.Description = strings.Repeat("d", catalog.MaxDescriptionLen+1) }), "x.a", catalog.RuleDescriptionLen},
		{mod("x.a", func(d *catalog.Definition) { d.Version = "1.0" }), "x.a", catalog.RuleVersion},
		{mod("x.a", func(d *catalog.Definition) { d.Version = "v1.0.0" }), "x.a", catalog.RuleVersion},
		{mod("x.a", func(d *catalog.Definition) { d.Version = "01.0.0" }), "x.a", catalog.RuleVersion},
		{mod("x.a", func(d *catalog.Definition) { d.Annotations = catalog.Annotations{ReadOnly: true, Destructive: true} }), "x.a", catalog.RuleAnnotations},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = nil }), "x.a", catalog.RuleInputMissing},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`{"type":"object",`) }), "x.a", catalog.RuleInputJSON},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`{"type":"object","type":"string"}`) }), "x.a", catalog.RuleInputJSON},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`true`) }), "x.a", catalog.RuleInputObject},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`{"type":"string"}`) }), "x.a", catalog.RuleInputObject},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`{"properties":{}}`) }), "x.a", catalog.RuleInputObject},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}), "x.a", catalog.RuleInputDialect},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"strng"}}}`)
		}), "x.a", catalog.RuleInputMeta},
		{mod("x.a", func(d *catalog.Definition) { d.InputSchema = json.RawMessage(`{"type":"object","required":"a"}`) }), "x.a", catalog.RuleInputMeta},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`)
		}), "x.a", catalog.RuleInputRef},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`)
		}), "x.a", catalog.RuleInputCompile},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=a)b"}}}`)
		}), "x.a", catalog.RuleInputMeta},
		{mod("x.a", func(d *catalog.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","b"]}`)
		}), "x.a", catalog.RuleInputUndeclared},
		{mod("x.a", func(d *catalog.Definition) { d.OutputSchema = json.RawMessage(`{"type":"array"}`) }), "x.a", catalog.RuleOutputObject},
		{mod("x.a", func(d *catalog.Definition) {
			d.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"minimum":"1"}}}`)
		}), "x.a", catalog.RuleOutputMeta},
		{mod("x.a", func(d *catalog.Definition) { d.OutputSchema = json.RawMessage(`{`) }), "x.a", catalog.RuleOutputJSON},
	}
	for _, tc := range cases {
		t.Run(string(tc.rule)+"/"+tc.tool[:min(len(tc.tool), 20)], func(t *testing.T) {
			le := loadErr(t, tc.def)
			if !le.Has(tc.tool, tc.rule) {
				t.Fatalf("problems %v; want %s for %s", le.Problems, tc.rule, tc.tool)
			}
			if msg := le.Error(); !strings.Contains(msg, tc.tool) || !strings.Contains(msg, string(tc.rule)) {
				t.Fatalf("error %q does not name the tool and the rule", msg)
			}
		})
	}
}

func TestLoadAggregatesAllProblems(t *testing.T) {
	bad1 := valid("gmail.send")
	bad1.Version = "latest"
	bad1.InputSchema = json.RawMessage(`{"type":"array"}`)
	bad2 := valid("slack.post")
	bad2.Capability = "NOPE"
	dup := valid("gmail.send")
	caseDup := valid("gmail.Send")
	le := loadErr(t, bad1, valid("ok.fine"), bad2, dup, caseDup)
	want := []struct {
		tool string
		rule catalog.Rule
	}{
		{"gmail.send", catalog.RuleVersion},
		{"gmail.send", catalog.RuleInputObject},
		{"slack.post", catalog.RuleCapability},
		{"gmail.send", catalog.RuleNameDuplicate},
		{"gmail.Send", catalog.RuleNameDuplicate},
	}
	for _, w := range want {
		if !le.Has(w.tool, w.rule) {
			t.Errorf("missing %s for %s in %v", w.rule, w.tool, le.Problems)
		}
	}
	if len(le.Problems) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(le.Problems), len(want), le.Problems)
	}
	// Deterministic order: definition order, then rule order.
	le2 := loadErr(t, bad1, valid("ok.fine"), bad2, dup, caseDup)
	if le.Error() != le2.Error() {
		t.Errorf("problem order differs between loads:\n%s\n%s", le.Error(), le2.Error())
	}
}

func TestToolkitAndFromTool(t *testing.T) {
	b := catalog.NewBuilder()
	b.AddToolkit(catalog.Toolkit{Slug: "weather", Name: "Weather", Description: "Forecasts.", Tools: []catalog.Definition{
		{Name: "get_forecast", Capability: "weather.read", Description: "Forecast for a city.", Version: "2.1.0",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
	}})
	b.Add(catalog.FromTool("app", "getWeather", "Current weather.", nil, nil, catalog.Annotations{ReadOnly: true}))
	b.Add(catalog.FromTool("app", "app.askUser", "Ask the user.", json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), json.RawMessage(`{"type":"object"}`), catalog.Annotations{}))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := c.Lookup("weather.get_forecast")
	if !ok || d.Toolkit != "weather" || d.Version != "2.1.0" {
		t.Fatalf("weather.get_forecast = %+v, %v", d, ok)
	}
	d, ok = c.Lookup("app.getWeather")
	if !ok || d.Capability != "app" || d.Version != catalog.DefaultVersion || string(d.InputSchema) != `{"type":"object","properties":{}}` || !d.Annotations.ReadOnly {
		t.Fatalf("app.getWeather = %+v, %v", d, ok)
	}
	if d, ok = c.Lookup("app.askUser"); !ok || string(d.OutputSchema) != `{"type":"object"}` {
		t.Fatalf("app.askUser = %+v, %v", d, ok)
	}
	if tks := c.Toolkits(); len(tks) != 2 || tks[1].Name != "Weather" || tks[0].Slug != "app" {
		t.Fatalf("toolkits = %+v", tks)
	}

	// Registering a toolkit twice is a problem.
	_, err = catalog.NewBuilder().AddToolkit(catalog.Toolkit{Slug: "a"}).AddToolkit(catalog.Toolkit{Slug: "a"}).Build()
	var le *catalog.LoadError
	if !errors.As(err, &le) || !le.Has("toolkit a", catalog.RuleToolkitDuplicate) {
		t.Fatalf("err = %v; want toolkit.duplicate", err)
	}
}

func TestExtend(t *testing.T) {
	c := catalogtest.Catalog()
	c2, err := c.Extend(valid("notes.create_note"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Len() != c.Len()+1 || c.Len() != 36 {
		t.Fatalf("lens %d, %d", c.Len(), c2.Len())
	}
	if _, ok := c2.Lookup("gmail.send_email"); !ok {
		t.Fatal("extended catalog lost gmail.send_email")
	}
	if tks := c2.Toolkits(); tks[0].Name != "Google Calendar" {
		t.Fatalf("toolkit info lost: %+v", tks[0])
	}
	if _, err := c.Extend(valid("gmail.send_email")); err == nil {
		t.Fatal("Extend accepted a duplicate")
	}
	if err := c2.ValidateInput("gmail.send_email", json.RawMessage(`{}`)); err == nil {
		t.Fatal("carried-over tool lost its compiled schema")
	}
}

func TestValidateInput(t *testing.T) {
	c := catalogtest.Catalog()
	if err := c.ValidateInput("gmail.send_email", json.RawMessage(`{"to":["a@example.com"],"subject":"Hi","body":"Hello"}`)); err != nil {
		t.Fatalf("valid input rejected: %v", err)
	}
	err := c.ValidateInput("gmail.send_email", json.RawMessage(`{"to":["not-an-email"],"subject":3,"extra":true}`))
	var ie *catalog.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %T %v; want *InputError", err, err)
	}
	if ie.Tool != "gmail.send_email" {
		t.Fatalf("tool = %q", ie.Tool)
	}
	got := map[string]string{}
	for _, v := range ie.Violations {
		got[v.InstanceLocation+" "+v.KeywordLocation] = v.Message
	}
	for _, want := range []string{
		" /required",                        // missing body
		" /additionalProperties",            // extra
		"/subject /properties/subject/type", // wrong type
		"/to/0 /properties/to/items/format", // format asserted
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no violation at %q; got %v", want, ie.Violations)
		}
	}
	if !strings.Contains(err.Error(), "/subject: got number, want string") {
		t.Errorf("message %q", err.Error())
	}
	// $ref'd locations name the definition.
	c2, err := catalog.New(catalog.Definition{Name: "x.y", Toolkit: "x", Capability: "x", Description: "d", Version: "0.1.0",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"p":{"$ref":"#/$defs/pos"}},"$defs":{"pos":{"type":"integer","minimum":1}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	err = c2.ValidateInput("x.y", json.RawMessage(`{"p":0}`))
	if !errors.As(err, &ie) || len(ie.Violations) != 1 || ie.Violations[0].InstanceLocation != "/p" || ie.Violations[0].KeywordLocation != "/$defs/pos/minimum" {
		t.Fatalf("err = %v (%+v)", err, ie)
	}
	if err := c.ValidateInput("nope.nope", nil); !errors.Is(err, catalog.ErrUnknownTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	if err := c.ValidateInput("gmail.list_labels", nil); err != nil {
		t.Fatalf("empty input for a no-argument tool: %v", err)
	}
	if err := c.ValidateInput("gmail.list_labels", json.RawMessage(`{`)); !errors.As(err, &ie) {
		t.Fatalf("bad JSON: %v", err)
	}
}

func TestValidateOutput(t *testing.T) {
	c := catalogtest.Catalog()
	if err := c.ValidateOutput("gmail.send_email", json.RawMessage(`{"id":"1","threadId":"t"}`)); err != nil {
		t.Fatal(err)
	}
	var ie *catalog.InputError
	if err := c.ValidateOutput("gmail.send_email", json.RawMessage(`{"id":1}`)); !errors.As(err, &ie) || !ie.Output || !strings.HasPrefix(err.Error(), "output for gmail.send_email") {
		t.Fatalf("err = %v", err)
	}
	if err := c.ValidateOutput("gmail.get_email", json.RawMessage(`[1,2]`)); err != nil {
		t.Fatalf("tool without output schema: %v", err)
	}
}

func TestNormalizeInput(t *testing.T) {
	c := catalogtest.Catalog()
	// What a strict-mode model sends: every property, null for the optional ones.
	in := json.RawMessage(`{"calendarId":null,"summary":"Sync","start":{"dateTime":"2026-01-02T10:00:00Z","timeZone":null},"end":{"dateTime":"2026-01-02T10:30:00Z","timeZone":null},"attendees":[{"email":"a@example.com","optional":null}],"location":null,"description":null}`)
	if err := c.ValidateInput("calendar.create_event", in); err == nil {
		t.Fatal("nulls for optional properties should not validate as is")
	}
	out, err := c.NormalizeInput("calendar.create_event", in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"summary":"Sync","start":{"dateTime":"2026-01-02T10:00:00Z"},"end":{"dateTime":"2026-01-02T10:30:00Z"},"attendees":[{"email":"a@example.com"}]}`
	if string(out) != want {
		t.Fatalf("normalized\n%s\nwant\n%s", out, want)
	}
	// Valid input is returned unchanged; a required null is not dropped.
	ok := json.RawMessage(`{"summary":"S","start":{"dateTime":"2026-01-02T10:00:00Z"},"end":{"dateTime":"2026-01-02T10:00:00Z"}}`)
	if out, err := c.NormalizeInput("calendar.create_event", ok); err != nil || string(out) != string(ok) {
		t.Fatalf("valid input changed: %s %v", out, err)
	}
	if _, err := c.NormalizeInput("calendar.create_event", json.RawMessage(`{"summary":null,"start":{"dateTime":"2026-01-02T10:00:00Z"},"end":{"dateTime":"2026-01-02T10:00:00Z"}}`)); err == nil {
		t.Fatal("required null accepted")
	}
}

func TestDefinitionJSON(t *testing.T) {
	c := catalogtest.Catalog()
	d, _ := c.Lookup("gmail.send_email")
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "toolkit", "capability", "description", "inputSchema", "outputSchema", "annotations", "version"} {
		if _, ok := m[k]; !ok {
			t.Errorf("definition JSON lacks %q: %s", k, b)
		}
	}
	ann := m["annotations"].(map[string]any)
	for _, k := range []string{"readOnly", "destructive", "idempotent", "openWorld", "async"} {
		if _, ok := ann[k]; !ok {
			t.Errorf("annotations JSON lacks %q", k)
		}
	}
	var back catalog.Definition
	if err := json.Unmarshal(b, &back); err != nil || back.Name != d.Name || string(back.InputSchema) != string(d.InputSchema) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

func TestSchemasAreSelfContained(t *testing.T) {
	// Two tools with the same $id keep their own definitions.
	a := valid("x.a")
	a.InputSchema = json.RawMessage(`{"$id":"https://example.com/s","type":"object","properties":{"p":{"$ref":"#/$defs/d"}},"$defs":{"d":{"type":"string"}}}`)
	b := valid("x.b")
	b.InputSchema = json.RawMessage(`{"$id":"https://example.com/s","type":"object","properties":{"p":{"$ref":"#/$defs/d"}},"$defs":{"d":{"type":"integer"}}}`)
	c, err := catalog.New(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.ValidateInput("x.a", json.RawMessage(`{"p":"s"}`)) != nil || c.ValidateInput("x.b", json.RawMessage(`{"p":1}`)) != nil {
		t.Fatal("schemas with the same $id interfered")
	}
	// One tool cannot reference another's schema by its $id.
	r := valid("x.r")
	r.InputSchema = json.RawMessage(`{"type":"object","properties":{"p":{"$ref":"https://example.com/s#/$defs/d"}}}`)
	le := loadErr(t, a, r)
	if !le.Has("x.r", catalog.RuleInputRef) {
		t.Fatalf("cross-tool $ref: %v", le)
	}
}

func TestEmptyCatalog(t *testing.T) {
	c, err := catalog.New()
	if err != nil || c.Len() != 0 {
		t.Fatal(err)
	}
	if r, err := c.Search(catalog.SearchToolsOptions{Query: "anything"}); err != nil || len(r.Tools) != 0 {
		t.Fatalf("%v %v", r, err)
	}
	if r, err := c.Get(catalog.GetToolsOptions{Format: catalog.FormatOpenAI}); err != nil || len(r.OpenAI()) != 0 {
		t.Fatalf("%v %v", r, err)
	}
}
