package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/tools"
)

// countingResolver returns one tool, named name, whose description says
// which context it was resolved for, and counts its calls.
func countingResolver(name string, scope tools.Scope, calls *atomic.Int64) tools.Resolver {
	return tools.Resolver{Name: name + "-resolver", Scope: scope, Resolve: func(rc tools.ResolveContext) ([]*tools.Tool, error) {
		calls.Add(1)
		return []*tools.Tool{{
			Name:        name,
			Description: fmt.Sprintf("%s/%s/%d", rc.Session.ID, rc.TurnID, rc.StepIndex),
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Execute:     func(*tools.Context, json.RawMessage) (any, error) { return nil, nil },
		}}, nil
	}}
}

// A long-running worker resolves a new context on every step; the cache
// must stay bounded, keep what is in use, and still find an evicted tool.
func TestResolverCacheIsBounded(t *testing.T) {
	var sessionCalls, stepCalls atomic.Int64
	a := newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{
		countingResolver("connections", tools.ScopeSession, &sessionCalls),
		countingResolver("scratch", tools.ScopeStep, &stepCalls),
	}})
	ctx := context.Background()
	session := auth.Session{ID: "s1"}
	resolved, err := a.ResolveTools(ctx, work.ResolveInput{Scope: tools.ScopeSession, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	sessionTools := resolved.Tools

	const steps = 10_000
	var first []work.DynamicTool
	for i := range steps {
		out, err := a.ResolveTools(ctx, work.ResolveInput{Scope: tools.ScopeStep, Session: session, TurnID: "t1", StepIndex: i})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = out.Tools
		}
		// Every step runs the session's tool, as a model step planning
		// its call does.
		if tl, err := a.lookup(ctx, "connections", sessionTools, auth.Session{}); err != nil || tl == nil {
			t.Fatalf("step %d: lookup of the session tool = %v, %v", i, tl, err)
		}
	}
	if n := a.cache.len(); n > resolverCacheEntries {
		t.Errorf("cache holds %d resolutions after %d steps, want at most %d", n, steps, resolverCacheEntries)
	}
	if n := sessionCalls.Load(); n != 1 {
		t.Errorf("session resolver called %d times; a resolution in use must stay cached", n)
	}
	if n := stepCalls.Load(); n != steps {
		t.Fatalf("step resolver called %d times, want %d", n, steps)
	}

	// Step 0's resolution was evicted long ago: the lookup resolves its
	// context again and finds the tool for that context.
	tl, err := a.lookup(ctx, "scratch", first, auth.Session{})
	if err != nil || tl == nil {
		t.Fatalf("lookup after eviction = %v, %v", tl, err)
	}
	if tl.Description != "s1/t1/0" {
		t.Errorf("lookup after eviction found the tool for %q, want s1/t1/0", tl.Description)
	}
	if n := stepCalls.Load(); n != steps+1 {
		t.Errorf("step resolver called %d times, want %d (one re-resolution)", n, steps+1)
	}
}

// A lookup after a resolution on the same worker runs the very tool the
// resolver returned, without calling the resolver again.
func TestLookupUsesCachedResolution(t *testing.T) {
	var calls atomic.Int64
	a := newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{countingResolver("scratch", tools.ScopeTurn, &calls)}})
	ctx := context.Background()
	in := work.ResolveInput{Scope: tools.ScopeTurn, Session: auth.Session{ID: "s1"}, TurnID: "t1"}
	out, err := a.ResolveTools(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	cached, _ := a.cache.get(cacheKey(in, "scratch-resolver"))
	tl, err := a.lookup(ctx, "scratch", out.Tools, auth.Session{})
	if err != nil || tl == nil || len(cached) != 1 || tl != cached[0] {
		t.Fatalf("lookup = %v, %v; cached %v", tl, err, cached)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("resolver called %d times, want 1", n)
	}
}

func TestResolverCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := resolverCache{limit: 2}
	c.put("a", nil)
	c.put("b", nil)
	c.get("a")
	c.put("c", nil)
	if _, ok := c.get("b"); ok {
		t.Error("b kept; it was the least recently used")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	c.put("c", nil)
	if n := c.len(); n != 2 {
		t.Errorf("len = %d after putting c again, want 2", n)
	}
}

// A resolver's tools are held to the check the agent hands the activity
// (the catalog's rules): a tool that breaks it fails the resolution,
// naming the resolver and the tool, and is not cached.
func TestResolvedToolsPassCheckTool(t *testing.T) {
	var calls atomic.Int64
	refuse := errors.New("name.format: no")
	a := newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{countingResolver("bad", tools.ScopeSession, &calls)},
		CheckTool: func(tl *tools.Tool) error {
			if tl.Name == "bad" {
				return refuse
			}
			return nil
		}})
	in := work.ResolveInput{Scope: tools.ScopeSession, Session: auth.Session{ID: "s1"}}
	for range 2 {
		_, err := a.ResolveTools(context.Background(), in)
		if !errors.Is(err, refuse) || !strings.Contains(err.Error(), `"bad-resolver"`) || !strings.Contains(err.Error(), `"bad"`) {
			t.Fatalf("err = %v", err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("resolver ran %d times; a refused resolution must not be cached", calls.Load())
	}
}

// A connection owns its prefix: an authored tool, or another resolver's
// tool, named "<connection>__..." is a resolve error naming both sides.
func TestConnectionOwnsItsPrefix(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	run := func(*tools.Context, json.RawMessage) (any, error) { return nil, nil }
	remote := func(resolver string) tools.Resolver {
		return tools.Resolver{Name: resolver, Scope: tools.ScopeTurn, Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) {
			return []*tools.Tool{{Name: "linear__search", Description: "d", InputSchema: obj, Execute: run,
				Remote: &tools.Remote{Connection: "linear", Tool: "search", Identity: "sha256:1"}}}, nil
		}}
	}
	static := tools.NewRegistry()
	if err := static.Register(&tools.Tool{Name: "linear__create", Description: "d", InputSchema: obj, Execute: run}); err != nil {
		t.Fatal(err)
	}
	a := newActivitySet(Options{Tools: static, Resolvers: []tools.Resolver{remote("conns")}})
	_, err := a.ResolveTools(context.Background(), work.ResolveInput{Scope: tools.ScopeTurn, Session: auth.Session{ID: "s"}, TurnID: "t"})
	if err == nil || !strings.Contains(err.Error(), `"linear__create"`) || !strings.Contains(err.Error(), `connection "linear"`) {
		t.Fatalf("err = %v", err)
	}
	other := tools.Resolver{Name: "authored", Scope: tools.ScopeTurn, Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) {
		return []*tools.Tool{{Name: "linear__x", Description: "d", InputSchema: obj, Execute: run}}, nil
	}}
	for _, order := range [][]tools.Resolver{{other, remote("conns")}, {remote("conns"), other}} {
		a = newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: order})
		_, err = a.ResolveTools(context.Background(), work.ResolveInput{Scope: tools.ScopeTurn, Session: auth.Session{ID: "s"}, TurnID: "t"})
		if err == nil || !strings.Contains(err.Error(), `"linear__x"`) || !strings.Contains(err.Error(), `"authored"`) {
			t.Fatalf("err = %v", err)
		}
	}
	a = newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{remote("conns")}})
	out, err := a.ResolveTools(context.Background(), work.ResolveInput{Scope: tools.ScopeTurn, Session: auth.Session{ID: "s"}, TurnID: "t"})
	if err != nil || len(out.Tools) != 1 || out.Tools[0].Identity != "sha256:1" {
		t.Fatalf("resolved %+v, %v", out, err)
	}
}

// A tools-API execution finds a tool listed per caller by listing it again
// for the execution's caller: one caller's tool is unknown to another's
// execution, and to a session's turn (which resolves its own tools).
func TestLookupCallerCatalog(t *testing.T) {
	var calls atomic.Int64
	r := tools.Resolver{Name: "tenants", Scope: tools.ScopeSession,
		Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) { return nil, nil },
		CallerCatalog: func(rc tools.ResolveContext) ([]*tools.Tool, error) {
			calls.Add(1)
			if rc.Session.Auth.Current.Attributes != nil || rc.Session.Auth.Initiator != rc.Session.Auth.Current {
				t.Errorf("listed for %+v: want the caller's id and type only, as the tools API lists it", rc.Session.Auth)
			}
			user := rc.Session.Auth.Current.ID
			return []*tools.Tool{{
				Name: user + "__list", Description: "for " + user, InputSchema: json.RawMessage(`{"type":"object"}`),
				Execute: func(*tools.Context, json.RawMessage) (any, error) { return user, nil },
				Remote:  &tools.Remote{Connection: user, Tool: "list"},
			}}, nil
		}}
	a := newActivitySet(Options{Tools: tools.NewRegistry(), Resolvers: []tools.Resolver{r}})
	ctx := context.Background()
	exec := func(id, user string) auth.Session {
		// As the execution workflow's session: the caller with the
		// execution's attributes, which the listing never had.
		p := &auth.Principal{ID: user, Type: auth.TypeUser, Attributes: map[string]string{"connectionId": "c1"}}
		return auth.Session{ID: id, Auth: auth.Auth{Current: p, Initiator: p}}
	}
	tl, err := a.lookup(ctx, "alice__list", nil, exec("exec_a1", "alice"))
	if err != nil || tl == nil || tl.Description != "for alice" {
		t.Fatalf("alice's own: %+v %v", tl, err)
	}
	if tl, err := a.lookup(ctx, "alice__list", nil, exec("exec_b1", "bob")); err != nil || tl != nil {
		t.Fatalf("bob's execution found alice's tool: %+v %v", tl, err)
	}
	if tl, err := a.lookup(ctx, "alice__list", nil, exec("ses_a", "alice")); err != nil || tl != nil {
		t.Fatalf("a session's lookup listed per caller: %+v %v", tl, err)
	}
	// The execution's approval policy and its call share one listing.
	if _, err := a.lookup(ctx, "alice__list", nil, exec("exec_a1", "alice")); err != nil || calls.Load() != 2 {
		t.Fatalf("calls = %d, %v; want 2 (alice's execution listed once, bob's once)", calls.Load(), err)
	}
}
