package tools

import (
	"errors"
	"fmt"

	"github.com/eve-temporal/eve/catalog"
)

// checkToolkit stands in for the toolkit of a tool that sets none while its
// catalog rules are checked: the rules of the tool's own fields do not
// depend on it.
const checkToolkit = "tools"

// RuleError is one catalog rule a tool breaks, with how to fix it.
type RuleError struct {
	Rule    catalog.Rule
	Message string
	Fix     string
}

func (e *RuleError) Error() string {
	if e.Fix == "" {
		return fmt.Sprintf("%s: %s", e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s; fix: %s", e.Rule, e.Message, e.Fix)
}

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

// checkCatalog applies the catalog's rules to the tool's definition.
// A tool's own Toolkit is checked on its own, so that a bad one is one
// problem (not also the name's and the default capability's).
func (t *Tool) checkCatalog() error {
	var errs []error
	if t.Toolkit != "" && (!catalog.ToolkitPattern.MatchString(t.Toolkit) || len(t.Toolkit) > catalog.MaxToolkitLen) {
		errs = append(errs, &RuleError{Rule: catalog.RuleToolkitFormat, Fix: fixes[catalog.RuleToolkitFormat],
			Message: fmt.Sprintf("toolkit %q must match %s and have at most %d characters", t.Toolkit, catalog.ToolkitPattern, catalog.MaxToolkitLen)})
	}
	c := *t
	c.Toolkit = ""
	_, err := catalog.New(c.Definition(checkToolkit))
	var le *catalog.LoadError
	if err != nil && !errors.As(err, &le) {
		return err
	}
	if le != nil {
		for _, p := range le.Problems {
			errs = append(errs, &RuleError{Rule: p.Rule, Message: p.Message, Fix: fixes[p.Rule]})
		}
	}
	return errors.Join(errs...)
}

// Catalog is the catalog view of the registry: every tool's Definition,
// with toolkit for the tools that set no Toolkit of their own, plus extra
// definitions (for discovery only). Register has checked each tool, so
// what can fail here is the toolkit, a clash between tools of different
// toolkits, or the extra definitions.
func (r *Registry) Catalog(toolkit string, extra ...catalog.Definition) (*catalog.Catalog, error) {
	defs := make([]catalog.Definition, 0, len(r.order)+len(extra))
	for _, t := range r.List() {
		defs = append(defs, t.Definition(toolkit))
	}
	return catalog.New(append(defs, extra...)...)
}
