package eve_test

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// No exported API of a public package exposes a type from an internal
// package: an app in another module could not name it. A public alias of
// an internal type (type Limits = workerhost.Limits), the way the Temporal
// SDK's client package aliases its internal package, is safe when what it
// opens up (the type's fields and methods) exposes nothing internal in
// turn: the app names the type by the alias, and the type is defined once.
func TestNoInternalTypesInPublicAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedImports | packages.NeedDeps}, "github.com/eve-temporal/eve/...")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	checked := 0
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors)
		}
		if isInternal(p.PkgPath) || p.Name == "main" {
			continue
		}
		checked++
		bad = append(bad, internalRefs(p.Types)...)
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages", checked)
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("exported API exposes internal types:\n%s", strings.Join(bad, "\n"))
	}
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, "github.com/eve-temporal/eve/") && strings.Contains(path+"/", "/internal/")
}

// internalRefs lists every exported identifier of pkg whose type mentions
// a type of an internal package.
func internalRefs(pkg *types.Package) []string {
	var out []string
	scope := pkg.Scope()
	// Internal types the package names by a public alias: an app can name
	// them (a method returning one returns the alias's type).
	aliased := map[*types.Named]bool{}
	for _, name := range scope.Names() {
		if o, ok := scope.Lookup(name).(*types.TypeName); ok && o.Exported() && o.IsAlias() {
			if named, ok := types.Unalias(o.Type()).(*types.Named); ok {
				aliased[named] = true
			}
		}
	}
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Path() + "." + name
		w := &walker{seen: map[types.Type]bool{}, aliased: aliased}
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				// A facade: check what the aliased type opens up.
				if named, ok := types.Unalias(o.Type()).(*types.Named); ok && named.Obj().Pkg() != nil && isInternal(named.Obj().Pkg().Path()) {
					w.walk(where, named.Underlying())
					for i := 0; i < named.NumMethods(); i++ {
						if m := named.Method(i); m.Exported() {
							w.walk(where+"."+m.Name(), m.Type())
						}
					}
					break
				}
				w.walk(where, o.Type())
				break
			}
			if named, ok := o.Type().(*types.Named); ok {
				w.walk(where, named.Underlying())
				for i := 0; i < named.NumMethods(); i++ {
					m := named.Method(i)
					if m.Exported() {
						w.walk(where+"."+m.Name(), m.Type())
					}
				}
			} else {
				w.walk(where, o.Type())
			}
		default:
			w.walk(where, obj.Type())
		}
		out = append(out, w.found...)
	}
	return out
}

type walker struct {
	seen    map[types.Type]bool
	aliased map[*types.Named]bool
	found   []string
}

func (w *walker) walk(where string, t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && isInternal(p.Path()) && !w.aliased[t] {
			w.found = append(w.found, fmt.Sprintf("%s: %s", where, t))
		}
		for i := 0; i < t.TypeArgs().Len(); i++ {
			w.walk(where, t.TypeArgs().At(i))
		}
		// Types of other packages are checked where they are declared.
	case *types.Alias:
		p := t.Obj().Pkg()
		if p != nil && isInternal(p.Path()) {
			w.found = append(w.found, fmt.Sprintf("%s: %s", where, t))
		}
		if p != nil && !isInternal(p.Path()) {
			return // a public alias is checked where it is declared
		}
		w.walk(where, types.Unalias(t))
	case *types.Pointer:
		w.walk(where, t.Elem())
	case *types.Slice:
		w.walk(where, t.Elem())
	case *types.Array:
		w.walk(where, t.Elem())
	case *types.Map:
		w.walk(where, t.Key())
		w.walk(where, t.Elem())
	case *types.Chan:
		w.walk(where, t.Elem())
	case *types.Signature:
		w.walk(where, t.Params())
		w.walk(where, t.Results())
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			w.walk(where, t.At(i).Type())
		}
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			f := t.Field(i)
			if f.Exported() || f.Embedded() {
				w.walk(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := 0; i < t.NumMethods(); i++ {
			m := t.Method(i)
			if m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
		for i := 0; i < t.NumEmbeddeds(); i++ {
			w.walk(where, t.EmbeddedType(i))
		}
	}
}
