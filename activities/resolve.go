package activities

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/tools"
)

// ResolveToolsName is the resolver activity.
const ResolveToolsName = "eve.ResolveTools"

// ErrTypeResolve marks a resolver failure (non-retryable when it is a
// definition error such as two resolvers returning one name).
const ErrTypeResolve = "ResolveError"

// ResolveInput asks the resolvers of one scope for tools.
type ResolveInput struct {
	Scope     tools.Scope  `json:"scope"`
	Session   auth.Session `json:"session"`
	TurnID    string       `json:"turnId,omitempty"`
	StepIndex int          `json:"stepIndex,omitempty"`
}

// DynamicTool is a resolved tool as recorded in history.
type DynamicTool struct {
	model.ToolDescriptor
	Resolver string       `json:"resolver"`
	System   bool         `json:"system,omitempty"`
	From     ResolveInput `json:"from"`
}

// ResolveOutput lists the resolved tools.
type ResolveOutput struct {
	Tools []DynamicTool `json:"tools"`
}

// resolverCache keeps resolved tools so executing one does not call its
// resolver again on the same worker.
type resolverCache struct {
	mu sync.Mutex
	m  map[string]map[string]*tools.Tool
}

func cacheKey(in ResolveInput, resolver string) string {
	return string(in.Scope) + "\x00" + in.Session.ID + "\x00" + in.TurnID + "\x00" + strconv.Itoa(in.StepIndex) + "\x00" + resolver
}

// ResolveTools runs the resolvers of one scope.
func (a *Activities) ResolveTools(ctx context.Context, in ResolveInput) (ResolveOutput, error) {
	var out ResolveOutput
	owner := map[string]string{}
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
					fmt.Sprintf("resolvers %q and %q both return a tool named %q; tool names must be unique, rename one", prev, r.Name, t.Name), ErrTypeResolve, nil)
			}
			owner[t.Name] = r.Name
			out.Tools = append(out.Tools, DynamicTool{
				ToolDescriptor: model.ToolDescriptor{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema},
				Resolver:       r.Name, System: r.System, From: in,
			})
		}
	}
	return out, nil
}

func (a *Activities) disabled(name string) bool {
	for _, d := range a.Disabled {
		if d == name {
			return true
		}
	}
	return false
}

func (a *Activities) resolve(ctx context.Context, r tools.Resolver, in ResolveInput) ([]*tools.Tool, error) {
	key := cacheKey(in, r.Name)
	a.cache.mu.Lock()
	if m, ok := a.cache.m[key]; ok {
		a.cache.mu.Unlock()
		ts := make([]*tools.Tool, 0, len(m))
		for _, t := range m {
			ts = append(ts, t)
		}
		return sortTools(ts), nil
	}
	a.cache.mu.Unlock()
	ts, err := r.Resolve(tools.ResolveContext{Context: ctx, Session: in.Session, TurnID: in.TurnID, StepIndex: in.StepIndex})
	if err != nil {
		return nil, fmt.Errorf("resolver %q: %w", r.Name, err)
	}
	if err := tools.Compile(ts...); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q returned invalid tools: %v", r.Name, err), ErrTypeResolve, err)
	}
	m := map[string]*tools.Tool{}
	for _, t := range ts {
		if _, dup := m[t.Name]; dup {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolver %q returned two tools named %q", r.Name, t.Name), ErrTypeResolve, nil)
		}
		m[t.Name] = t
	}
	a.cache.mu.Lock()
	if a.cache.m == nil {
		a.cache.m = map[string]map[string]*tools.Tool{}
	}
	a.cache.m[key] = m
	a.cache.mu.Unlock()
	return ts, nil
}

func sortTools(ts []*tools.Tool) []*tools.Tool {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Name < ts[j-1].Name; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
	return ts
}

// lookup finds the tool a call names: a dynamic tool first (it overrides a
// static tool of the same name), then the agent's static tools.
func (a *Activities) lookup(ctx context.Context, name string, dynamic []DynamicTool) (*tools.Tool, error) {
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
	return nil, nil
}

// descriptors merges static and dynamic tools for the model.
func (a *Activities) descriptors(dynamic []DynamicTool) []model.ToolDescriptor {
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
