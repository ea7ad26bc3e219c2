package tools

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/model"
)

// Registry holds an agent's tools, validated and compiled once.
type Registry struct {
	byName map[string]*Tool
	folded map[string]string // lowercase name -> name
	order  []string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*Tool{}, folded: map[string]string{}}
}

// RegistrationError names the tool and every rule it broke.
type RegistrationError struct {
	Tool string
	Err  error
}

func (e *RegistrationError) Error() string { return fmt.Sprintf("register tool %q: %v", e.Tool, e.Err) }
func (e *RegistrationError) Unwrap() error { return e.Err }

// Register validates and adds tools. Nothing is added if any tool is invalid;
// the error lists every problem of every tool, each naming the tool and the
// rule and saying how to fix it. Names are unique case-insensitively.
// Register checks the turn's rules; agent.Register adds the catalog's
// (docs/catalog.md: names, capability, version, annotations, schemas), so
// every tool an agent serves can be served to turns, the tools API and MCP
// alike.
func (r *Registry) Register(ts ...*Tool) error {
	var errs []error
	seen := map[string]string{} // lowercase name -> name, in this call
	for _, t := range ts {
		if t == nil {
			errs = append(errs, errors.New("register tool: nil tool"))
			continue
		}
		if err := t.compile(); err != nil {
			errs = append(errs, &RegistrationError{Tool: t.Name, Err: err})
			continue
		}
		key := strings.ToLower(t.Name)
		prev, dup := r.folded[key]
		if !dup {
			prev, dup = seen[key]
		}
		if dup {
			msg := "duplicate name: tool names must be unique within an agent"
			if prev != t.Name {
				msg = fmt.Sprintf("name.duplicate: differs only in case from tool %q; rename one (names are unique case-insensitively)", prev)
			}
			errs = append(errs, &RegistrationError{Tool: t.Name, Err: errors.New(msg)})
			continue
		}
		seen[key] = t.Name
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, t := range ts {
		r.byName[t.Name] = t
		r.folded[strings.ToLower(t.Name)] = t.Name
		r.order = append(r.order, t.Name)
	}
	return nil
}

// MustRegister is Register that panics, for static tool sets in main.
func (r *Registry) MustRegister(ts ...*Tool) {
	if err := r.Register(ts...); err != nil {
		panic(err)
	}
}

// Get returns a tool by name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// List returns the tools in registration order.
func (r *Registry) List() []*Tool {
	out := make([]*Tool, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.byName[n])
	}
	return out
}

// Descriptors returns the tools as the model sees them, in registration order.
func (r *Registry) Descriptors() []model.ToolDescriptor {
	out := make([]model.ToolDescriptor, 0, len(r.order))
	for _, t := range r.List() {
		out = append(out, t.ModelDescriptor())
	}
	return out
}
