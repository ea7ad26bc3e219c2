package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// ErrUnknownTool is wrapped by errors about names the catalog does not have.
var ErrUnknownTool = errors.New("unknown tool")

// ErrUnknownToolkit is wrapped by errors about toolkit filters that name a
// toolkit the catalog does not have.
var ErrUnknownToolkit = errors.New("unknown toolkit")

// DefaultVersion is the version FromTool gives a definition.
const DefaultVersion = "1.0.0"

// emptyObjectSchema is the input schema of a tool without arguments.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Catalog is an immutable, validated set of tool definitions with their
// compiled schemas, wire names and search index. It is safe for concurrent
// use. Build one with New or a Builder.
type Catalog struct {
	entries  []*entry // sorted by name
	byName   map[string]*entry
	toolkits []ToolkitInfo // sorted by slug
	tkIndex  map[string]int
	wire     ToolNameMap // over every tool in the catalog
	index    *searchIndex

	selections     sync.Map // selection key -> *selection
	selectionCount int64
}

type entry struct {
	def    Definition
	input  *compiledSchema
	output *compiledSchema
	tk     int    // index into Catalog.toolkits
	wire   string // provider-safe name (Catalog.wire)

	strictOnce sync.Once
	strict     json.RawMessage // strict-mode parameters, when the transform applies
	strictWhy  string          // why it does not, otherwise
}

// Toolkit is a named group of tools an app registers together.
type Toolkit struct {
	// Slug is the toolkit part of every tool's name ("gmail").
	Slug string `json:"slug"`
	// Name is a display name ("Gmail").
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Tools may leave Toolkit empty and give Name as just the tool slug
	// ("send_email"); AddToolkit fills in the rest.
	Tools []Definition `json:"tools"`
}

// ToolkitInfo describes a toolkit present in a catalog.
type ToolkitInfo struct {
	Slug        string `json:"slug"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Tools       int    `json:"tools"`
}

// FromTool builds a definition from an agent tool's model-facing name,
// description and schemas. The canonical name is "<toolkit>.<name>" (name
// is used as is when it already starts with "<toolkit>."); the capability
// defaults to the toolkit slug and the version to DefaultVersion, both of
// which the caller may overwrite. An empty input schema means "no
// arguments". Nothing is checked here: the catalog checks at load.
func FromTool(toolkit, name, description string, input, output json.RawMessage, ann Annotations) Definition {
	full := name
	if !strings.HasPrefix(name, toolkit+".") {
		full = toolkit + "." + name
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = emptyObjectSchema
	}
	if len(bytes.TrimSpace(output)) == 0 || string(bytes.TrimSpace(output)) == "null" {
		output = nil
	}
	return Definition{
		Name:         full,
		Toolkit:      toolkit,
		Capability:   toolkit,
		Description:  description,
		InputSchema:  input,
		OutputSchema: output,
		Annotations:  ann,
		Version:      DefaultVersion,
	}
}

// Builder collects definitions and toolkits, then checks them all at once.
// The zero value is ready to use.
type Builder struct {
	pending  []pending
	toolkits []Toolkit
	extra    []Problem
}

type pending struct {
	def Definition
	pre *entry // already checked (carried over from a catalog)
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{} }

// Add adds definitions.
func (b *Builder) Add(defs ...Definition) *Builder {
	for _, d := range defs {
		b.pending = append(b.pending, pending{def: d})
	}
	return b
}

// AddToolkit adds a toolkit and its tools. A tool with an empty Toolkit gets
// the toolkit's slug, and a Name without a dot gets "<slug>." in front.
func (b *Builder) AddToolkit(tk Toolkit) *Builder {
	for _, prev := range b.toolkits {
		if prev.Slug == tk.Slug {
			b.extra = append(b.extra, Problem{Tool: "toolkit " + tk.Slug, Rule: RuleToolkitDuplicate, Message: "toolkit registered twice"})
			return b
		}
	}
	b.toolkits = append(b.toolkits, Toolkit{Slug: tk.Slug, Name: tk.Name, Description: tk.Description})
	for _, d := range tk.Tools {
		if d.Toolkit == "" {
			d.Toolkit = tk.Slug
		}
		if !strings.Contains(d.Name, ".") {
			d.Name = tk.Slug + "." + d.Name
		}
		b.pending = append(b.pending, pending{def: d})
	}
	return b
}

// AddCatalog adds every tool of c without checking or compiling it again,
// along with c's toolkit descriptions.
func (b *Builder) AddCatalog(c *Catalog) *Builder {
	for _, info := range c.toolkits {
		if info.Name != "" || info.Description != "" {
			b.toolkits = append(b.toolkits, Toolkit{Slug: info.Slug, Name: info.Name, Description: info.Description})
		}
	}
	for _, e := range c.entries {
		b.pending = append(b.pending, pending{def: e.def, pre: e})
	}
	return b
}

// New builds a catalog from definitions; see Builder.Build.
func New(defs ...Definition) (*Catalog, error) {
	return NewBuilder().Add(defs...).Build()
}

// Extend returns a new catalog with c's tools and defs (c is unchanged).
// Tools already in c are not compiled again.
func (c *Catalog) Extend(defs ...Definition) (*Catalog, error) {
	return NewBuilder().AddCatalog(c).Add(defs...).Build()
}

// schemaJob is one distinct schema to compile; identical schemas (the
// common no-argument schema, generated families) compile once.
type schemaJob struct {
	raw      json.RawMessage
	rules    schemaRules
	cs       *compiledSchema
	problems []Problem // Tool left empty; filled per definition
}

// Build checks every definition against every rule and returns the catalog,
// or a *LoadError listing all problems (each naming the tool and the rule).
func (b *Builder) Build() (*Catalog, error) {
	n := len(b.pending)
	labels := make([]string, n)
	probs := make([][]Problem, n)
	for i, p := range b.pending {
		labels[i] = p.def.Name
		if labels[i] == "" {
			labels[i] = fmt.Sprintf("#%d", i)
		}
	}
	// Field rules and duplicates.
	seen := make(map[string]int, n)
	for i, p := range b.pending {
		i := i
		add := func(r Rule, format string, args ...any) {
			probs[i] = append(probs[i], Problem{Tool: labels[i], Rule: r, Message: fmt.Sprintf(format, args...)})
		}
		if p.pre == nil {
			d := p.def
			checkFields(&d, add)
		}
		if p.def.Name != "" {
			key := strings.ToLower(p.def.Name)
			if j, dup := seen[key]; dup {
				if b.pending[j].def.Name == p.def.Name {
					add(RuleNameDuplicate, "defined more than once (also definition #%d)", j)
				} else {
					add(RuleNameDuplicate, "differs only in case from %q (definition #%d)", b.pending[j].def.Name, j)
				}
			} else {
				seen[key] = i
			}
		}
	}
	// Schemas: distinct (raw, input/output) pairs, compiled in parallel.
	type ref struct{ in, out int }
	jobs := []*schemaJob{}
	jobKey := map[string]int{}
	refs := make([]ref, n)
	job := func(raw json.RawMessage, rules schemaRules) int {
		key := string(rules.json) + "\x00" + string(raw)
		if k, ok := jobKey[key]; ok {
			return k
		}
		jobs = append(jobs, &schemaJob{raw: raw, rules: rules})
		jobKey[key] = len(jobs) - 1
		return len(jobs) - 1
	}
	for i, p := range b.pending {
		refs[i] = ref{-1, -1}
		if p.pre != nil {
			continue
		}
		if len(bytes.TrimSpace(p.def.InputSchema)) == 0 {
			probs[i] = append(probs[i], Problem{Tool: labels[i], Rule: RuleInputMissing, Message: "inputSchema is missing; use {\"type\":\"object\",\"properties\":{}} for a tool without arguments"})
		} else {
			refs[i].in = job(p.def.InputSchema, inputRules)
		}
		if out := bytes.TrimSpace(p.def.OutputSchema); len(out) > 0 && string(out) != "null" {
			refs[i].out = job(p.def.OutputSchema, outputRules)
		}
	}
	compileJobs(jobs)
	for i := range b.pending {
		for _, k := range []int{refs[i].in, refs[i].out} {
			if k < 0 {
				continue
			}
			for _, p := range jobs[k].problems {
				p.Tool = labels[i]
				probs[i] = append(probs[i], p)
			}
		}
	}
	var all []Problem
	all = append(all, b.extra...)
	for _, ps := range probs {
		all = append(all, ps...)
	}
	if len(all) > 0 {
		return nil, &LoadError{Problems: all}
	}

	// Assemble.
	c := &Catalog{byName: make(map[string]*entry, n), tkIndex: map[string]int{}}
	for i, p := range b.pending {
		if p.pre != nil {
			c.entries = append(c.entries, &entry{def: p.pre.def, input: p.pre.input, output: p.pre.output})
			continue
		}
		e := &entry{def: p.def}
		e.input = jobs[refs[i].in].cs
		e.def.InputSchema = e.input.raw
		e.def.OutputSchema = nil
		if refs[i].out >= 0 {
			e.output = jobs[refs[i].out].cs
			e.def.OutputSchema = e.output.raw
		}
		c.entries = append(c.entries, e)
	}
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].def.Name < c.entries[j].def.Name })
	names := make([]string, len(c.entries))
	for i, e := range c.entries {
		names[i] = e.def.Name
		c.byName[e.def.Name] = e
	}
	c.wire = BuildNameMap(names)
	for _, e := range c.entries {
		e.wire = c.wire.CanonicalToWire[e.def.Name]
	}

	infos := map[string]*ToolkitInfo{}
	for _, tk := range b.toolkits {
		infos[tk.Slug] = &ToolkitInfo{Slug: tk.Slug, Name: tk.Name, Description: tk.Description}
	}
	for _, e := range c.entries {
		info := infos[e.def.Toolkit]
		if info == nil {
			info = &ToolkitInfo{Slug: e.def.Toolkit}
			infos[e.def.Toolkit] = info
		}
		info.Tools++
	}
	for _, info := range infos {
		if info.Tools > 0 {
			c.toolkits = append(c.toolkits, *info)
		}
	}
	sort.Slice(c.toolkits, func(i, j int) bool { return c.toolkits[i].Slug < c.toolkits[j].Slug })
	for i, info := range c.toolkits {
		c.tkIndex[info.Slug] = i
	}
	for _, e := range c.entries {
		e.tk = c.tkIndex[e.def.Toolkit]
	}
	c.index = buildIndex(c)
	return c, nil
}

// compileJobs compiles distinct schemas on up to GOMAXPROCS workers, one
// compiler each (the compiler is not safe for concurrent use).
func compileJobs(jobs []*schemaJob) {
	workers := runtime.GOMAXPROCS(0)
	if max := len(jobs)/32 + 1; workers > max {
		workers = max
	}
	next := make(chan *schemaJob)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := newSchemaCompiler()
			for j := range next {
				add := func(r Rule, format string, args ...any) {
					j.problems = append(j.problems, Problem{Rule: r, Message: fmt.Sprintf(format, args...)})
				}
				j.cs = sc.checkSchema(j.raw, j.rules, add)
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}

// Len returns the number of tools.
func (c *Catalog) Len() int { return len(c.entries) }

// Definitions returns every definition, sorted by name. Treat the schemas as
// read-only.
func (c *Catalog) Definitions() []Definition {
	out := make([]Definition, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.def
	}
	return out
}

// Lookup returns the definition of a canonical name.
func (c *Catalog) Lookup(name string) (Definition, bool) {
	e, ok := c.byName[name]
	if !ok {
		return Definition{}, false
	}
	return e.def, true
}

// Toolkits describes the catalog's toolkits, sorted by slug.
func (c *Catalog) Toolkits() []ToolkitInfo { return append([]ToolkitInfo(nil), c.toolkits...) }

// NameMap returns the wire names of every tool in the catalog. Get returns
// the part of it that covers the tools it selected, so a tool's wire name is
// the same in every bundle from one catalog.
func (c *Catalog) NameMap() ToolNameMap {
	m := ToolNameMap{CanonicalToWire: make(map[string]string, len(c.entries)), WireToCanonical: make(map[string]string, len(c.entries))}
	for k, v := range c.wire.CanonicalToWire {
		m.CanonicalToWire[k] = v
		m.WireToCanonical[v] = k
	}
	return m
}

func (c *Catalog) lookup(name string) (*entry, error) {
	e, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	return e, nil
}

// ValidateInput checks input (a JSON object) against the tool's input
// schema. It returns nil, an *InputError listing every violation with JSON
// pointers, or an error wrapping ErrUnknownTool. Empty input counts as {}.
func (c *Catalog) ValidateInput(name string, input json.RawMessage) error {
	e, err := c.lookup(name)
	if err != nil {
		return err
	}
	return validateValue(e.input, name, false, input)
}

// ValidateOutput checks a tool's output against its output schema; a tool
// without one accepts any output.
func (c *Catalog) ValidateOutput(name string, output json.RawMessage) error {
	e, err := c.lookup(name)
	if err != nil {
		return err
	}
	if e.output == nil {
		return nil
	}
	return validateValue(e.output, name, true, output)
}

// NormalizeInput returns input ready for the tool: unchanged when it is
// valid; otherwise, if dropping null-valued optional properties (what a
// model sends for them under the OpenAI strict transform) makes it valid,
// the input without them. Otherwise it returns input and ValidateInput's error.
func (c *Catalog) NormalizeInput(name string, input json.RawMessage) (json.RawMessage, error) {
	e, err := c.lookup(name)
	if err != nil {
		return input, err
	}
	verr := validateValue(e.input, name, false, input)
	if verr == nil {
		return input, nil
	}
	if stripped, changed := stripOptionalNulls(e.input.tree, input); changed {
		if validateValue(e.input, name, false, stripped) == nil {
			return stripped, nil
		}
	}
	return input, verr
}

// toolkitFilter resolves toolkit slugs to a set of indexes; nil means all.
func (c *Catalog) toolkitFilter(toolkits []string) ([]bool, error) {
	if len(toolkits) == 0 {
		return nil, nil
	}
	keep := make([]bool, len(c.toolkits))
	var unknown []string
	for _, tk := range toolkits {
		i, ok := c.tkIndex[tk]
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%q", tk))
			continue
		}
		keep[i] = true
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w %s", ErrUnknownToolkit, strings.Join(unknown, ", "))
	}
	return keep, nil
}

// Must returns c, panicking if err is not nil; for catalogs built from
// definitions compiled into the program.
func Must(c *Catalog, err error) *Catalog {
	if err != nil {
		panic(err)
	}
	return c
}
