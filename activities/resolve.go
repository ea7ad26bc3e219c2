package activities

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// IdentityChangedError is a connection tool whose destination changed
// between the resolution a call was planned from and the call.
type identityChangedError struct{ Tool, Connection string }

func (e *identityChangedError) Error() string {
	return fmt.Sprintf("connection %q changed its endpoint or instance key since the call to %s was planned (and approved): the call is not sent to the new destination; ask for the call again", e.Connection, e.Tool)
}

func cacheKey(in work.ResolveInput, resolver string) string {
	return string(in.Scope) + "\x00" + in.Session.ID + "\x00" + in.TurnID + "\x00" + strconv.Itoa(in.StepIndex) + "\x00" + resolver
}

// ResolveTools runs the resolvers of one scope.
func (a *activitySet) ResolveTools(ctx context.Context, in work.ResolveInput) (work.ResolveOutput, error) {
	var out work.ResolveOutput
	owner := map[string]string{}
	type resolved struct {
		resolver string
		tools    []*tools.Tool
	}
	var all []resolved
	for _, r := range a.Resolvers {
		if r.Scope != in.Scope {
			continue
		}
		ts, err := a.resolve(ctx, r, in)
		if err != nil {
			return out, err
		}
		for _, t := range ts {
			if !r.System && a.disabled(t.Name) {
				continue
			}
			if prev, dup := owner[t.Name]; dup {
				return out, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("resolvers %q and %q both return a tool named %q; tool names must be unique, rename one", prev, r.Name, t.Name), work.ErrTypeResolve, nil)
			}
			owner[t.Name] = r.Name
			d := work.DynamicTool{
				ToolDescriptor: model.ToolDescriptor{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema},
				Resolver:       r.Name, System: r.System, From: in,
			}
			if t.Remote != nil {
				d.Identity = t.Remote.Identity
			}
			out.Tools = append(out.Tools, d)
		}
		all = append(all, resolved{r.Name, ts})
	}
	for _, r := range all {
		if err := a.checkPrefixes(r.resolver, r.tools, owner); err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkPrefixes enforces that a connection owns its prefix: no static
// tool, and no other resolver's tool, is named "<connection>" or
// "<connection>__...".
func (a *activitySet) checkPrefixes(resolver string, ts []*tools.Tool, owner map[string]string) error {
	for _, t := range ts {
		if t.Remote == nil {
			continue
		}
		conn := t.Remote.Connection
		owns := func(name string) bool { return name == conn || strings.HasPrefix(name, conn+"__") }
		if !owns(t.Name) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q: connection tool %q must be named %s__<tool>", resolver, t.Name, conn), work.ErrTypeResolve, nil)
		}
		if a.Tools != nil {
			for _, s := range a.Tools.List() {
				if owns(s.Name) {
					return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the agent's tool %q conflicts with connection %q (resolver %q), which owns the names %s__*: rename the tool or the connection", s.Name, conn, resolver, conn), work.ErrTypeResolve, nil)
				}
			}
		}
		for name, r := range owner {
			if r != resolver && owns(name) {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q's tool %q conflicts with connection %q (resolver %q), which owns the names %s__*: rename one", r, name, conn, resolver, conn), work.ErrTypeResolve, nil)
			}
		}
	}
	return nil
}

func (a *activitySet) disabled(name string) bool {
	for _, d := range a.Disabled {
		if d == name {
			return true
		}
	}
	return false
}

// resolve returns what r returns for in, from the worker's cache when it
// can: the model step and the tool executions that follow a resolution look
// its tools up again by name.
func (a *activitySet) resolve(ctx context.Context, r tools.Resolver, in work.ResolveInput) ([]*tools.Tool, error) {
	return a.cached(cacheKey(in, r.Name), r.Name, func() ([]*tools.Tool, error) {
		return r.Resolve(tools.ResolveContext{Context: ctx, Session: in.Session, TurnID: in.TurnID, StepIndex: in.StepIndex})
	})
}

// cached returns what resolve returns, checked, from the worker's cache
// under key when it can.
func (a *activitySet) cached(key, resolver string, resolve func() ([]*tools.Tool, error)) ([]*tools.Tool, error) {
	if ts, ok := a.cache.get(key); ok {
		return ts, nil
	}
	ts, err := resolve()
	if err != nil {
		return nil, fmt.Errorf("resolver %q: %w", resolver, err)
	}
	err = tools.Compile(ts...)
	if err == nil && a.CheckTool != nil {
		var errs []error
		for _, t := range ts {
			if cerr := a.CheckTool(t); cerr != nil {
				errs = append(errs, &tools.RegistrationError{Tool: t.Name, Err: cerr})
			}
		}
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q returned invalid tools: %v", resolver, err), work.ErrTypeResolve, err)
	}
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if seen[t.Name] {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q returned two tools named %q", resolver, t.Name), work.ErrTypeResolve, nil)
		}
		seen[t.Name] = true
	}
	a.cache.put(key, ts)
	return ts, nil
}

// lookup finds the tool a call names: a dynamic tool first (it overrides a
// static tool of the same name), then the agent's static tools, then the
// tools the tools API lists (for an execution: session is its session).
func (a *activitySet) lookup(ctx context.Context, name string, dynamic []work.DynamicTool, session auth.Session) (*tools.Tool, error) {
	for _, d := range dynamic {
		if d.Name != name {
			continue
		}
		for _, r := range a.Resolvers {
			if r.Name != d.Resolver {
				continue
			}
			ts, err := a.resolve(ctx, r, d.From)
			if err != nil {
				return nil, err
			}
			for _, t := range ts {
				if t.Name == name {
					if got := identityOf(t); got != d.Identity {
						return nil, &identityChangedError{Tool: name, Connection: connectionOf(t, name)}
					}
					return t, nil
				}
			}
			return nil, fmt.Errorf("resolver %q no longer returns tool %q for this context", r.Name, name)
		}
		return nil, fmt.Errorf("tool %q came from resolver %q, which this worker does not have", name, d.Resolver)
	}
	if t, ok := a.Tools.Get(name); ok {
		return t, nil
	}
	// A tools-API execution of a listed resolver's tool (a static
	// connection's): it carries no resolution, the catalog lists it.
	for _, r := range a.Resolvers {
		if r.Catalog == nil {
			continue
		}
		ts, err := r.Catalog(ctx)
		if err != nil {
			return nil, fmt.Errorf("resolver %q: list its tools: %w", r.Name, err)
		}
		for _, t := range ts {
			if t.Name == name {
				if err := tools.Compile(t); err != nil {
					return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q listed an invalid tool: %v", r.Name, err), work.ErrTypeResolve, err)
				}
				return t, nil
			}
		}
	}
	if !strings.HasPrefix(session.ID, signals.ExecutionIDPrefix) {
		return nil, nil
	}
	// A tools-API execution of a tool listed per caller (a dynamic
	// connection's): listed again for the execution's caller, as the tools
	// API listed it ({id, type}), so a caller runs only the tools listed
	// for it.
	if p := session.Auth.Current; p != nil {
		c := &auth.Principal{ID: p.ID, Type: p.Type}
		session.Auth = auth.Auth{Current: c, Initiator: c}
	}
	for _, r := range a.Resolvers {
		if r.CallerCatalog == nil {
			continue
		}
		ts, err := a.cached(cacheKey(work.ResolveInput{Scope: scopeCaller, Session: session}, r.Name), r.Name, func() ([]*tools.Tool, error) {
			return r.CallerCatalog(tools.ResolveContext{Context: ctx, Session: session})
		})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Name == name {
				return t, nil
			}
		}
	}
	return nil, nil
}

// scopeCaller keys a caller's listing (tools.Resolver.CallerCatalog) in
// the resolver cache, apart from every resolution scope.
const scopeCaller tools.Scope = "caller"

func identityOf(t *tools.Tool) string {
	if t.Remote == nil {
		return ""
	}
	return t.Remote.Identity
}

func connectionOf(t *tools.Tool, name string) string {
	if t.Remote != nil {
		return t.Remote.Connection
	}
	return name
}

// descriptors merges static and dynamic tools for the model.
func (a *activitySet) descriptors(dynamic []work.DynamicTool) []model.ToolDescriptor {
	static := a.Tools.Descriptors()
	if len(dynamic) == 0 {
		return static
	}
	over := map[string]bool{}
	for _, d := range dynamic {
		over[d.Name] = true
	}
	out := make([]model.ToolDescriptor, 0, len(static)+len(dynamic))
	for _, s := range static {
		if !over[s.Name] {
			out = append(out, s)
		}
	}
	for _, d := range dynamic {
		out = append(out, d.ToolDescriptor)
	}
	return out
}

// resolverCacheEntries bounds the resolver cache. An entry is one
// resolver's tools for one context (a session, a turn or a step); a busy
// worker's live contexts fit, and a long-running one no longer grows.
const resolverCacheEntries = 4096

// resolverCache keeps the most recently used resolutions, so running a
// resolved tool does not call its resolver again on the same worker. An
// evicted entry is resolved again: the Resolver contract (the same tools
// for the same context) makes that safe, and it is what a worker that did
// not run the resolution does anyway. The zero value is ready to use.
type resolverCache struct {
	mu      sync.Mutex
	limit   int                      // entries kept; 0 means resolverCacheEntries
	recent  list.List                // of *resolution, most recently used first
	entries map[string]*list.Element // by cacheKey
}

type resolution struct {
	key   string
	tools []*tools.Tool
}

func (c *resolverCache) get(key string) ([]*tools.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.recent.MoveToFront(el)
	return el.Value.(*resolution).tools, true
}

func (c *resolverCache) put(key string, ts []*tools.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		// Two activities resolved the same context at once; keep the latest.
		el.Value.(*resolution).tools = ts
		c.recent.MoveToFront(el)
		return
	}
	if c.entries == nil {
		c.entries = map[string]*list.Element{}
	}
	c.entries[key] = c.recent.PushFront(&resolution{key: key, tools: ts})
	limit := c.limit
	if limit <= 0 {
		limit = resolverCacheEntries
	}
	for c.recent.Len() > limit {
		oldest := c.recent.Back()
		c.recent.Remove(oldest)
		delete(c.entries, oldest.Value.(*resolution).key)
	}
}

// len is the number of resolutions kept.
func (c *resolverCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
