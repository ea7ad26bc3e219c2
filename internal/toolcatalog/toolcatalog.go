// Package toolcatalog is where authored tools meet the catalog: a tool's
// canonical definition, a registry's catalog view, and the catalog's rules
// checked on a tool, with how to fix each in the tool's own terms.
//
// It sits above both packages so that package tools (and with it the
// engine, which runs tools) never depends on the catalog: agent.Register
// checks the agent's tools here, and the resolve activity a resolver's
// tools through the check the agent hands it.
package toolcatalog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/tools"
)

// checkToolkit stands in for the toolkit of a tool that sets none while its
// catalog rules are checked: the rules of the tool's own fields do not
// depend on it.
const checkToolkit = "tools"

// fixes says how to fix each rule a tool can break.
var fixes = map[catalog.Rule]string{
	catalog.RuleNameFormat:       `rename the tool: a letter first, then letters and digits, words joined by single "_" or "-" (get_weather, getWeather), at most 64`,
	catalog.RuleToolkitFormat:    `set Toolkit to a lowercase slug such as "billing", at most 32 characters, or leave it empty`,
	catalog.RuleToolkitMatch:     `set Toolkit to the prefix of the tool's name`,
	catalog.RuleCapability:       `set Capability to a lowercase slug such as "email.send", or leave it empty (the toolkit)`,
	catalog.RuleDescription:      "describe what the tool does and when the model should call it",
	catalog.RuleDescriptionLen:   "shorten the description",
	catalog.RuleVersion:          `set Version to MAJOR.MINOR.PATCH such as "1.2.0", or leave it empty ("1.0.0")`,
	catalog.RuleAnnotations:      "a read-only tool does not destroy anything: clear Annotations.ReadOnly or Annotations.Destructive",
	catalog.RuleInputMissing:     `set InputSchema; {"type":"object","properties":{}} for a tool without arguments`,
	catalog.RuleInputJSON:        "make InputSchema valid JSON without duplicate keys",
	catalog.RuleInputObject:      `make InputSchema's root {"type":"object", ...}: tool arguments are JSON objects`,
	catalog.RuleInputDialect:     `drop "$schema" from InputSchema or set it to ` + catalog.Dialect,
	catalog.RuleInputMeta:        "fix InputSchema so it is a valid JSON Schema 2020-12",
	catalog.RuleInputRef:         `use in-document refs in InputSchema ("#/$defs/name"): schemas are self-contained`,
	catalog.RuleInputCompile:     "fix InputSchema's references",
	catalog.RuleInputUndeclared:  "declare every required property of InputSchema in its properties (or drop it from required)",
	catalog.RuleOutputJSON:       "make OutputSchema valid JSON without duplicate keys",
	catalog.RuleOutputObject:     `make OutputSchema's root {"type":"object", ...} (results are JSON objects), or leave OutputSchema empty`,
	catalog.RuleOutputDialect:    `drop "$schema" from OutputSchema or set it to ` + catalog.Dialect,
	catalog.RuleOutputMeta:       "fix OutputSchema so it is a valid JSON Schema 2020-12",
	catalog.RuleOutputRef:        `use in-document refs in OutputSchema ("#/$defs/name"): schemas are self-contained`,
	catalog.RuleOutputCompile:    "fix OutputSchema's references",
	catalog.RuleOutputUndeclared: "declare every required property of OutputSchema in its properties (or drop it from required)",
}

// Definition is the tool's canonical catalog definition: its name is
// "<toolkit>.<Name>", where toolkit is the tool's own Toolkit or, when that
// is empty, the one given. Capability defaults to the toolkit, Version to
// catalog.DefaultVersion; the annotations are the tool's, with Idempotent
// set for an Idempotent tool and Async and OpenWorld for a kind whose
// result arrives later (tools.KindInfo.Async).
func Definition(t *tools.Tool, toolkit string) catalog.Definition {
	if t.Toolkit != "" {
		toolkit = t.Toolkit
	}
	ann := catalog.Annotations{
		ReadOnly:    t.Annotations.ReadOnly,
		Destructive: t.Annotations.Destructive,
		Idempotent:  t.Annotations.Idempotent || t.Idempotent,
		OpenWorld:   t.Annotations.OpenWorld,
	}
	if t.Kind().Info().Async {
		// Its result arrives later, from outside: async by nature.
		ann.Async, ann.OpenWorld = true, true
	}
	name := t.Name
	if t.Remote != nil {
		// "<connection>__<tool>" is the wire name in turns; the catalog
		// names it "<connection>.<tool>".
		name = strings.TrimPrefix(name, t.Remote.Connection+"__")
	}
	d := catalog.FromTool(toolkit, name, t.Description, t.InputSchema, t.OutputSchema, ann)
	if t.Capability != "" {
		d.Capability = t.Capability
	}
	if t.Version != "" {
		d.Version = t.Version
	}
	return d
}

// Catalog is the catalog view of a registry: every tool's Definition, with
// toolkit for the tools that set no Toolkit of their own, plus extra
// definitions (for discovery only). Checked tools pass the rules, so what
// can fail here is the toolkit, a clash between tools of different
// toolkits, or the extra definitions.
func Catalog(r *tools.Registry, toolkit string, extra ...catalog.Definition) (*catalog.Catalog, error) {
	list := r.List()
	defs := make([]catalog.Definition, 0, len(list)+len(extra))
	for _, t := range list {
		defs = append(defs, Definition(t, toolkit))
	}
	return catalog.New(append(defs, extra...)...)
}

// Check applies the catalog's rules to one tool: every broken rule is a
// *catalog.RuleError saying how to fix it. A tool's own Toolkit is checked
// on its own, so that a bad one is one problem (not also the name's and
// the default capability's).
func Check(t *tools.Tool) error {
	var errs []error
	if t.Toolkit != "" && (!catalog.ToolkitPattern.MatchString(t.Toolkit) || len(t.Toolkit) > catalog.MaxToolkitLen) {
		errs = append(errs, &catalog.RuleError{Rule: catalog.RuleToolkitFormat, Fix: fixes[catalog.RuleToolkitFormat],
			Message: fmt.Sprintf("toolkit %q must match %s and have at most %d characters", t.Toolkit, catalog.ToolkitPattern, catalog.MaxToolkitLen)})
	}
	c := *t
	c.Toolkit = ""
	if t.Remote != nil {
		// "<connection>__<tool>" is the wire name; the catalog names it
		// "<connection>.<tool>", so the rules apply to the remote part.
		c.Name = strings.TrimPrefix(t.Name, t.Remote.Connection+"__")
	}
	_, err := catalog.New(Definition(&c, checkToolkit))
	var le *catalog.LoadError
	if err != nil && !errors.As(err, &le) {
		return err
	}
	if le != nil {
		for _, p := range le.Problems {
			errs = append(errs, &catalog.RuleError{Rule: p.Rule, Message: p.Message, Fix: fixes[p.Rule]})
		}
	}
	return errors.Join(errs...)
}

// CheckAll checks every tool; each tool's problems come as one
// *tools.RegistrationError naming it.
func CheckAll(ts ...*tools.Tool) error {
	var errs []error
	for _, t := range ts {
		if t == nil {
			continue
		}
		if err := Check(t); err != nil {
			errs = append(errs, &tools.RegistrationError{Tool: t.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}
