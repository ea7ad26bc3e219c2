package catalog

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Rule names one check a definition must pass. Load errors name the tool
// and the rule.
type Rule string

// The rules checked when a catalog loads. docs/catalog.md explains each.
const (
	RuleNameFormat       Rule = "name.format"       // "<toolkit>.<tool>" with valid slugs
	RuleNameDuplicate    Rule = "name.duplicate"    // names are unique, case-insensitively
	RuleToolkitFormat    Rule = "toolkit.format"    // toolkit slug
	RuleToolkitMatch     Rule = "toolkit.match"     // Toolkit equals the name's prefix
	RuleToolkitDuplicate Rule = "toolkit.duplicate" // a toolkit registered twice
	RuleCapability       Rule = "capability.format"
	RuleDescription      Rule = "description.required"
	RuleDescriptionLen   Rule = "description.length"
	RuleVersion          Rule = "version.semver"
	RuleAnnotations      Rule = "annotations.consistent" // not both readOnly and destructive

	RuleInputMissing    Rule = "inputSchema.required"
	RuleInputJSON       Rule = "inputSchema.json"
	RuleInputObject     Rule = "inputSchema.object"
	RuleInputDialect    Rule = "inputSchema.dialect"
	RuleInputMeta       Rule = "inputSchema.metaschema"
	RuleInputRef        Rule = "inputSchema.ref"
	RuleInputCompile    Rule = "inputSchema.compile"
	RuleInputUndeclared Rule = "inputSchema.requiredDeclared"

	RuleOutputJSON       Rule = "outputSchema.json"
	RuleOutputObject     Rule = "outputSchema.object"
	RuleOutputDialect    Rule = "outputSchema.dialect"
	RuleOutputMeta       Rule = "outputSchema.metaschema"
	RuleOutputRef        Rule = "outputSchema.ref"
	RuleOutputCompile    Rule = "outputSchema.compile"
	RuleOutputUndeclared Rule = "outputSchema.requiredDeclared"
)

// Limits on names and text.
const (
	MaxToolkitLen     = 32
	MaxToolLen        = 64
	MaxCapabilityLen  = 64
	MaxDescriptionLen = 8192
	// MaxNameLen bounds a canonical name: MCP allows tool names of 1-128 characters.
	MaxNameLen = 128
)

var (
	// ToolkitPattern: lowercase letters and digits, words joined by single
	// '_' or '-', starting with a letter ("gmail", "google_calendar").
	ToolkitPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$`)
	// ToolPattern: letters and digits, words joined by single '_' or '-',
	// starting with a letter. Case is kept so an authored tool's model-facing
	// name ("getWeather") can be its canonical tool slug.
	ToolPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*$`)
	// CapabilityPattern: lowercase slug segments separated by '.', '_' or '-'
	// ("email.send", "calendar.read", "messaging").
	CapabilityPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$`)
	// SemverPattern is the official semver.org 2.0.0 pattern.
	SemverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	// WirePattern is the provider rule for tool names (Anthropic, OpenAI).
	WirePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// Problem is one rule one definition breaks.
type Problem struct {
	// Tool is the definition's name, or "#<index>" when it has none.
	Tool    string `json:"tool"`
	Rule    Rule   `json:"rule"`
	Message string `json:"message"`
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s: %s", p.Tool, p.Rule, p.Message) }

// LoadError lists every problem found while loading a catalog, so an
// operator can fix them in one pass.
type LoadError struct {
	Problems []Problem `json:"problems"`
}

func (e *LoadError) Error() string {
	var b strings.Builder
	n := len(e.Problems)
	if n == 1 {
		return "catalog: invalid tool definition: " + e.Problems[0].String()
	}
	fmt.Fprintf(&b, "catalog: %d problems in tool definitions:", n)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Has reports whether the error lists a problem of rule r for tool.
func (e *LoadError) Has(tool string, r Rule) bool {
	for _, p := range e.Problems {
		if p.Tool == tool && p.Rule == r {
			return true
		}
	}
	return false
}

// SplitName splits "<toolkit>.<tool>" at its first dot.
func SplitName(name string) (toolkit, tool string, ok bool) {
	return strings.Cut(name, ".")
}

// checkFields applies the non-schema rules to d.
func checkFields(d *Definition, add func(Rule, string, ...any)) {
	tk, tool, ok := SplitName(d.Name)
	switch {
	case d.Name == "":
		add(RuleNameFormat, "name is empty; want \"<toolkit>.<tool>\"")
	case !ok:
		add(RuleNameFormat, "name %q has no '.'; want \"<toolkit>.<tool>\"", d.Name)
	case len(d.Name) > MaxNameLen:
		add(RuleNameFormat, "name is %d bytes; at most %d", len(d.Name), MaxNameLen)
	default:
		if !ToolkitPattern.MatchString(tk) || len(tk) > MaxToolkitLen {
			add(RuleNameFormat, "toolkit part %q must match %s and have at most %d characters", tk, ToolkitPattern, MaxToolkitLen)
		}
		if !ToolPattern.MatchString(tool) || len(tool) > MaxToolLen {
			add(RuleNameFormat, "tool part %q must match %s and have at most %d characters", tool, ToolPattern, MaxToolLen)
		}
	}
	if d.Toolkit == "" {
		add(RuleToolkitFormat, "toolkit is empty")
	} else if !ToolkitPattern.MatchString(d.Toolkit) || len(d.Toolkit) > MaxToolkitLen {
		add(RuleToolkitFormat, "toolkit %q must match %s and have at most %d characters", d.Toolkit, ToolkitPattern, MaxToolkitLen)
	}
	if ok && d.Toolkit != "" && tk != d.Toolkit {
		add(RuleToolkitMatch, "name's toolkit %q differs from toolkit %q", tk, d.Toolkit)
	}
	if !CapabilityPattern.MatchString(d.Capability) || len(d.Capability) > MaxCapabilityLen {
		add(RuleCapability, "capability %q must match %s and have at most %d characters", d.Capability, CapabilityPattern, MaxCapabilityLen)
	}
	if strings.TrimSpace(d.Description) == "" {
		add(RuleDescription, "description is empty; the model chooses tools by it")
	} else if n := utf8.RuneCountInString(d.Description); n > MaxDescriptionLen {
		add(RuleDescriptionLen, "description has %d characters; at most %d", n, MaxDescriptionLen)
	} else if !utf8.ValidString(d.Description) {
		add(RuleDescription, "description is not valid UTF-8")
	}
	if !SemverPattern.MatchString(d.Version) {
		add(RuleVersion, "version %q is not a semantic version (MAJOR.MINOR.PATCH)", d.Version)
	}
	if d.Annotations.ReadOnly && d.Annotations.Destructive {
		add(RuleAnnotations, "readOnly and destructive are both set")
	}
}

// RuleError is one rule an authored tool breaks, with how to fix it in the
// tool's own terms (agent.Register and eve.NewWorker return them, each
// inside a tools.RegistrationError naming the tool).
type RuleError struct {
	Rule    Rule
	Message string
	Fix     string
}

func (e *RuleError) Error() string {
	if e.Fix == "" {
		return fmt.Sprintf("%s: %s", e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s; fix: %s", e.Rule, e.Message, e.Fix)
}
