package toolcatalog

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/tools"
)

func noop(*tools.Context, json.RawMessage) (any, error) { return nil, nil }

func okTool(name string) *tools.Tool {
	return &tools.Tool{Name: name, Description: "Do it.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), Execute: noop}
}

// A tool that passes the turn's rules but breaks one of the catalog's is a
// registration error naming the tool and the rule and saying how to fix it.
func TestCheckEnforcesCatalogRules(t *testing.T) {
	cases := []struct {
		mut  func(*tools.Tool)
		rule catalog.Rule
		fix  string
	}{
		{func(t *tools.Tool) { t.Name = "_hidden" }, catalog.RuleNameFormat, "rename the tool"},
		{func(t *tools.Tool) { t.Name = "a__b" }, catalog.RuleNameFormat, "rename the tool"},
		{func(t *tools.Tool) { t.Name = "9lives" }, catalog.RuleNameFormat, "rename the tool"},
		{func(t *tools.Tool) { t.Toolkit = "Billing" }, catalog.RuleToolkitFormat, "set Toolkit"},
		{func(t *tools.Tool) { t.Capability = "Email Send" }, catalog.RuleCapability, "set Capability"},
		{func(t *tools.Tool) { t.Version = "v1" }, catalog.RuleVersion, "set Version"},
		{func(t *tools.Tool) { t.Annotations.ReadOnly, t.Annotations.Destructive = true, true }, catalog.RuleAnnotations, "Annotations.ReadOnly"},
		{func(t *tools.Tool) { t.Description = strings.Repeat("x", catalog.MaxDescriptionLen+1) }, catalog.RuleDescriptionLen, "shorten"},
		{func(t *tools.Tool) {
			t.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{}},"required":["b"]}`)
		}, catalog.RuleInputUndeclared, "declare every required property"},
		{func(t *tools.Tool) { t.InputSchema = json.RawMessage(`{"type":"object","type":"object"}`) }, catalog.RuleInputJSON, "duplicate keys"},
		{func(t *tools.Tool) {
			t.InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}, catalog.RuleInputDialect, "drop \"$schema\""},
		{func(t *tools.Tool) { t.OutputSchema = json.RawMessage(`{"type":"string"}`) }, catalog.RuleOutputObject, "leave OutputSchema empty"},
	}
	for _, c := range cases {
		tl := okTool("do_it")
		c.mut(tl)
		if err := tools.NewRegistry().Register(tl); err != nil && c.rule != catalog.RuleInputJSON {
			t.Fatalf("%s: the turn's own rules refused it: %v", c.rule, err)
		}
		err := CheckAll(tl)
		var re *tools.RegistrationError
		if !errors.As(err, &re) || re.Tool != tl.Name {
			t.Fatalf("%s: err = %v", c.rule, err)
		}
		var rerr *catalog.RuleError
		if !errors.As(err, &rerr) || rerr.Rule != c.rule || !strings.Contains(err.Error(), c.fix) || !strings.Contains(err.Error(), string(c.rule)) {
			t.Errorf("%s: err = %v", c.rule, err)
		}
	}
}

func TestExternalRefRefused(t *testing.T) {
	tl := okTool("fetchy")
	tl.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`)
	err := tools.NewRegistry().Register(tl)
	if err == nil {
		err = CheckAll(tl)
	}
	if err == nil || !strings.Contains(err.Error(), "https://example.com/s.json") || !strings.Contains(err.Error(), "self-contained") {
		t.Fatalf("err = %v", err)
	}
}

func TestDefinitionAndCatalogView(t *testing.T) {
	plain := okTool("plain")
	own := okTool("send")
	own.Toolkit, own.Capability, own.Version = "mail", "email.send", "1.2.0"
	own.Annotations = tools.Annotations{OpenWorld: true}
	own.Idempotent = true
	job := tools.DefineDelegated("job", "Run a job.", json.RawMessage(`{"type":"object"}`), nil, tools.Delegated{Delegate: func(*tools.Context, json.RawMessage, tools.Action) (tools.Pending, error) {
		return tools.Pending{}, nil
	}})
	r := tools.NewRegistry()
	r.MustRegister(plain, own, job)
	if err := CheckAll(r.List()...); err != nil {
		t.Fatal(err)
	}
	c, err := Catalog(r, "shop")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]catalog.Definition{
		"shop.plain": {Name: "shop.plain", Toolkit: "shop", Capability: "shop", Version: "1.0.0"},
		"mail.send":  {Name: "mail.send", Toolkit: "mail", Capability: "email.send", Version: "1.2.0", Annotations: catalog.Annotations{OpenWorld: true, Idempotent: true}},
		"shop.job":   {Name: "shop.job", Toolkit: "shop", Capability: "shop", Version: "1.0.0", Annotations: catalog.Annotations{Async: true, OpenWorld: true}},
	}
	if c.Len() != len(want) {
		t.Fatalf("%d tools", c.Len())
	}
	for name, w := range want {
		d, ok := c.Lookup(name)
		if !ok || d.Toolkit != w.Toolkit || d.Capability != w.Capability || d.Version != w.Version || d.Annotations != w.Annotations {
			t.Errorf("%s = %+v", name, d)
		}
	}
	if _, err := Catalog(r, "Not A Slug"); err == nil {
		t.Fatal("bad toolkit accepted")
	}
}

// Func keeps an output schema only for object results (catalog rule).
func TestFuncOutputSchemaObjectsOnly(t *testing.T) {
	s := tools.Func("s", "String result.", func(*tools.Context, struct{}) (string, error) { return "", nil })
	m := tools.Func("m", "Map result.", func(*tools.Context, struct{}) (map[string]int, error) { return nil, nil })
	if len(s.OutputSchema) != 0 || len(m.OutputSchema) == 0 {
		t.Fatalf("string %s, map %s", s.OutputSchema, m.OutputSchema)
	}
	if err := CheckAll(s, m); err != nil {
		t.Fatal(err)
	}
}
