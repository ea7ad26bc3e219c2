package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/signals"
)

// The table of changes is the only place a change id is declared: each id
// is unique, prefixed (but for the one released without it), described,
// covered by saved histories that exist, and every workflow.GetVersion in
// the module names an id from the table, never a literal.
func TestChangesTable(t *testing.T) {
	ids := map[string]bool{}
	for _, c := range changes {
		t.Run(c.id, func(t *testing.T) {
			if ids[c.id] {
				t.Fatalf("change id %q is declared twice", c.id)
			}
			ids[c.id] = true
			if !strings.HasPrefix(c.id, "eve-") && c.id != changeAskApproval {
				t.Errorf("change id %q lacks the eve- prefix", c.id)
			}
			if c.what == "" || c.release == "" {
				t.Errorf("change %q does not say what it changed or in which release", c.id)
			}
			if len(c.histories) == 0 {
				t.Errorf("change %q names no saved history of its new path", c.id)
			}
			for _, glob := range c.histories {
				m, err := filepath.Glob(filepath.Join("..", "e2e", "testdata", "histories", glob))
				if err != nil || len(m) == 0 {
					t.Errorf("change %q: no saved history matches %q", c.id, glob)
				}
				if !strings.HasPrefix(glob, "v"+c.release+"-") {
					t.Errorf("change %q of %s names history %q of another release", c.id, c.release, glob)
				}
			}
		})
	}

	// The contract's version names the newest release with saved histories.
	all, _ := filepath.Glob(filepath.Join("..", "e2e", "testdata", "histories", "v*-*.json"))
	newest := ""
	for _, p := range all {
		v := strings.SplitN(filepath.Base(p), "-", 2)[0]
		if newer(v, newest) {
			newest = v
		}
	}
	if newest != "v"+signals.Version {
		t.Errorf("signals.Version is %s but the newest saved histories are %s-*: the two agree", signals.Version, newest)
	}

	// Every GetVersion call in the module's Go code.
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "bench" || d.Name() == "examples" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			// workflow.GetVersion(ctx, id, …), or changeOn(ctx, versions,
			// id) and a turn's or session's t.changeOn(ctx, id).
			arg := -1
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				switch {
				case fn.Sel.Name == "GetVersion":
					arg = 1
				case fn.Sel.Name == "changeOn" && len(call.Args) == 2:
					arg = 1
				}
			case *ast.Ident:
				if fn.Name == "changeOn" && len(call.Args) == 3 {
					arg = 2
				}
			}
			if arg < 0 {
				return true
			}
			at := fset.Position(call.Pos())
			if inChangeOn(f, call) {
				return true // changeOn passes its caller's id on
			}
			id, ok := call.Args[arg].(*ast.Ident)
			if !ok {
				t.Errorf("%s: GetVersion's change id is not a name from workflows/changes.go", at)
				return true
			}
			if !strings.HasPrefix(filepath.ToSlash(at.Filename), "../workflows/") {
				t.Errorf("%s: GetVersion outside package workflows; declare the change in workflows/changes.go", at)
				return true
			}
			if !declared(id.Name) {
				t.Errorf("%s: change id %s is not in the table of workflows/changes.go", at, id.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every change a workflow takes from its input is in the table, at a
// generation its starters give (signals.SessionVersions).
func TestInputGenerations(t *testing.T) {
	inTable := map[string]bool{}
	for _, c := range changes {
		inTable[c.id] = true
	}
	for id, g := range inputGenerations {
		if !inTable[id] {
			t.Errorf("inputGenerations names %q, which is not in the table", id)
		}
		if g < 1 || g > inputVersions {
			t.Errorf("change %q is carried from Versions %d: eve's starters give %d", id, g, inputVersions)
		}
	}
	// The first generation is the turn's start of changeTurnVersions: a
	// session gave it to turns before there was a second.
	var first []string
	for id, g := range inputGenerations {
		if g == 1 {
			first = append(first, id)
		}
	}
	slices.Sort(first)
	want := []string{changeResponses, changeLimits, changeInbox, changeOrder, changeSearchWrites, changeTasks}
	slices.Sort(want)
	if !slices.Equal(first, want) {
		t.Errorf("generation 1 is %v; it was released as %v and never changes", first, want)
	}
}

// inChangeOn reports a call inside a function or method named changeOn.
func inChangeOn(f *ast.File, call *ast.CallExpr) bool {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "changeOn" && fd.Pos() <= call.Pos() && call.End() <= fd.End() {
			return true
		}
	}
	return false
}

// newer compares two "vX.Y.Z" prefixes numerically.
func newer(a, b string) bool {
	if b == "" {
		return true
	}
	pa, pb := strings.Split(strings.TrimPrefix(a, "v"), "."), strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if len(pa[i]) != len(pb[i]) {
			return len(pa[i]) > len(pb[i])
		}
		if pa[i] != pb[i] {
			return pa[i] > pb[i]
		}
	}
	return len(pa) > len(pb)
}

// declared tells whether name is a change id constant with a row.
func declared(name string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "changes.go", nil, 0)
	if err != nil {
		return false
	}
	obj := f.Scope.Lookup(name)
	if obj == nil || obj.Kind != ast.Con {
		return false
	}
	spec, ok := obj.Decl.(*ast.ValueSpec)
	if !ok || len(spec.Values) == 0 {
		return false
	}
	lit, ok := spec.Values[0].(*ast.BasicLit)
	if !ok {
		return false
	}
	for _, c := range changes {
		if `"`+c.id+`"` == lit.Value {
			return true
		}
	}
	return false
}
