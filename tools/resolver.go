package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/eve-temporal/eve/auth"
)

// Scope says when a resolver runs.
type Scope string

// Resolver scopes.
const (
	ScopeSession Scope = "session" // once, before the session's first turn
	ScopeTurn    Scope = "turn"    // at the start of every turn
	ScopeStep    Scope = "step"    // before every model step
)

// ResolveContext is what a resolver sees.
type ResolveContext struct {
	context.Context
	Session   auth.Session
	TurnID    string // empty for session scope
	StepIndex int    // step scope only
}

// Resolver adds tools at graph resolution. It runs in an activity, so its
// answer is recorded and replays unchanged. A worker that must run one of
// its tools (possibly after a restart) calls it again with the same
// context, so it must return the same tools for the same context. It runs
// in a local activity, which may run again when its workflow task fails;
// it must not have side effects.
type Resolver struct {
	Name  string
	Scope Scope
	// System resolvers are the runtime's own (like a connection search):
	// their tools cannot be removed by the agent's Disable list.
	System  bool
	Resolve func(ctx ResolveContext) ([]*Tool, error)
	// Catalog, when set, lists the resolver's tools without a session, for
	// the tools API and eve mcp, which list and run them: only for
	// resolvers whose tools do not depend on the session, such as static
	// connections (connections.Static). Nil: they serve turns only.
	Catalog func(ctx context.Context) ([]*Tool, error)
	// CallerCatalog, when set, lists the resolver's tools for one caller
	// outside a session, for the tools API and eve mcp: for resolvers whose
	// tools depend on who asks, such as dynamic connections
	// (connections.Dynamic). ctx.Session.Auth names the caller as Current
	// and Initiator (its id and type only; no TurnID). An execution of one
	// of these tools finds it by calling CallerCatalog again for the same
	// caller (Session.ID is then the execution's id, empty when listing),
	// so it must list the same tools for the same caller; a caller runs
	// only the tools listed for it.
	CallerCatalog func(ctx ResolveContext) ([]*Tool, error)
	// Close, when set, releases what the resolver holds (a connection
	// set's stdio server processes). The commands eve.Main runs (dev,
	// worker, serve, mcp) call it when they stop; a process built on the
	// pieces (eve.NewWorker, eve.NewHandler) calls it itself.
	Close func() error
}

// Validate checks a resolver's definition.
func (r Resolver) Validate() error {
	var errs []error
	if r.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	switch r.Scope {
	case ScopeSession, ScopeTurn, ScopeStep:
	default:
		errs = append(errs, fmt.Errorf("scope %q: want session, turn or step", r.Scope))
	}
	if r.Resolve == nil {
		errs = append(errs, errors.New("Resolve is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resolver %q: %w", r.Name, err)
	}
	return nil
}

// Compile validates tools a resolver returned, as Register would (the
// turn's rules; the resolve activity adds the catalog's).
func Compile(ts ...*Tool) error {
	var errs []error
	for _, t := range ts {
		if t == nil {
			errs = append(errs, errors.New("nil tool"))
			continue
		}
		if err := t.compile(); err != nil {
			errs = append(errs, &RegistrationError{Tool: t.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}
