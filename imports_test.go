package eve_test

import (
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const module = "github.com/eve-temporal/eve"

// Imports run one way: contracts and clients at the bottom, workflows at
// the top. These rules keep the light packages light for the apps, jobs
// and clients that import them.
func TestImportsRunOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the module's import graph")
	}
	var (
		temporal   = "go.temporal.io/"
		workflows  = module + "/workflows"
		activities = module + "/activities"
		agent      = module + "/agent"
		tools      = module + "/tools"
		catalog    = module + "/catalog"
		payloads   = module + "/payloadstore"
	)
	rules := []struct {
		pkg    string
		direct bool // only the package's own imports, not its dependencies
		never  []string
		why    string
	}{
		{"signals", false, []string{temporal, workflows, activities, agent, tools, catalog, payloads},
			"the contract package is light enough for any client to import"},
		{"protocol", false, []string{temporal, workflows, activities, agent, tools, catalog, payloads},
			"the wire types are light enough for any client to import"},
		{"client", false, []string{temporal, workflows, activities, agent, tools, payloads},
			"the session protocol's Go client speaks HTTP only"},
		{"toolsclient", false, []string{temporal, workflows, activities, agent, tools, payloads},
			"the tools API's Go client speaks HTTP only"},
		{"actions", false, []string{temporal, workflows, activities, agent, tools, catalog, payloads},
			"the job helper is for external jobs: HTTP and the contract only"},
		{"internal/sessions", false, []string{workflows, activities, agent, tools, catalog},
			"sessions drives workflows through a Temporal client and the contract"},
		{"internal/executions", false, []string{workflows, activities, agent, tools, catalog},
			"the execution driver drives workflows through a Temporal client and the contract"},
		{"internal/api", true, []string{workflows, activities},
			"the API server names workflows through the contract package"},
		{"internal/mcpserver", true, []string{workflows, activities},
			"the MCP server names workflows through the contract package"},
		{"workflows", false, []string{catalog},
			"the engine runs tools and records the tools API's results in protocol's types: it never depends on the catalog"},
		{"activities", false, []string{catalog},
			"the engine runs tools: it never depends on the catalog"},
		{"tools", false, []string{catalog, workflows, activities, agent},
			"authoring a tool needs no catalog and no engine"},
		{"internal/toolsapi", true, []string{workflows, "net/http/httptest", module + "/catalog/catalogtest"},
			"the tools API service imports no test fixtures (its benchmark is toolsbench)"},
	}
	var patterns []string
	for _, r := range rules {
		patterns = append(patterns, module+"/"+r.pkg)
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports | packages.NeedDeps}, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors)
		}
		byPath[p.PkgPath] = p
	}
	for _, r := range rules {
		p := byPath[module+"/"+r.pkg]
		if p == nil {
			t.Fatalf("%s did not load", r.pkg)
		}
		imports := directImports(p)
		if !r.direct {
			imports = allImports(p)
		}
		var bad []string
		for _, imp := range imports {
			for _, never := range r.never {
				if imp == never || strings.HasSuffix(never, "/") && strings.HasPrefix(imp, never) {
					bad = append(bad, imp)
				}
			}
		}
		if len(bad) > 0 {
			how := "depends on"
			if r.direct {
				how = "imports"
			}
			t.Errorf("%s %s %s: %s", r.pkg, how, strings.Join(bad, ", "), r.why)
		}
	}
}

// The layers, bottom to top. A package imports only packages of its own
// layer or below, and every package of the module has a layer, so a new
// package is placed on purpose. docs/architecture.md draws this map.
var layers = []struct {
	name string
	pkgs []string // a trailing "/" takes the subtree
}{
	{"leaf helpers and wire types", []string{"protocol", "auth", "model", "model/", "payloadstore", "payloadstore/",
		"internal/capability", "internal/httpbody", "internal/httpjson", "internal/metrics", "internal/notify", "internal/notify/",
		"internal/query", "internal/console", "internal/schema", "internal/stubmatch", "internal/tracing", "internal/devserver", "internal/devserver/"}},
	{"contracts", []string{"signals", "conversation", "approval", "catalog", "catalog/"}},
	{"authoring and clients", []string{"tools", "tools/wfcall", "actions", "client", "toolsclient", "connections"}},
	{"engine", []string{"workflows", "activities", "internal/work"}},
	{"agent", []string{"agent", "internal/toolcatalog", "demo"}},
	{"drivers", []string{"internal/sessions", "internal/executions", "internal/visibility", "internal/config"}},
	{"front ends", []string{"internal/api", "internal/toolsapi", "internal/mcpserver", "internal/actionsvc", "internal/workerhost", "internal/evetest"}},
	{"assembly", []string{"", "internal/assemble", "internal/cli", "cmd/"}},
}

// layerOf is the index of the layer holding pkg (a path inside the
// module, "" for the root), or -1.
func layerOf(pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.pkgs {
			match := pkg == p || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)
			if match && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// Nothing imports a package of a higher layer: no arrow runs back up.
func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the module's import graph")
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports}, module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	for _, p := range pkgs {
		name, _ := rel(p.PkgPath)
		if name == "e2e" || strings.HasPrefix(name, "test/") {
			continue // tests of the whole, above every layer
		}
		from := layerOf(name)
		if from < 0 {
			t.Errorf("%s has no layer: add it to layers in imports_test.go (and to docs/architecture.md)", p.PkgPath)
			continue
		}
		for imp := range p.Imports {
			in, ok := rel(imp)
			if !ok {
				continue
			}
			if to := layerOf(in); to > from {
				t.Errorf("%s (%s) imports %s (%s): an arrow back up", p.PkgPath, layers[from].name, imp, layers[to].name)
			}
		}
	}
}

func directImports(p *packages.Package) []string {
	var out []string
	for path := range p.Imports {
		out = append(out, path)
	}
	sort.Strings(out)
	return out
}

// allImports lists every package p depends on.
func allImports(p *packages.Package) []string {
	seen := map[string]bool{}
	var walk func(*packages.Package)
	walk = func(p *packages.Package) {
		for path, dep := range p.Imports {
			if !seen[path] {
				seen[path] = true
				walk(dep)
			}
		}
	}
	walk(p)
	out := make([]string, 0, len(seen))
	for path := range seen {
		out = append(out, path)
	}
	sort.Strings(out)
	return out
}
