package toolsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/tools"
)

// callerTool is a tool of toolkit kit named kit__name, as a connection's.
func callerTool(kit, name string) *tools.Tool {
	t := tools.Func(kit+"__"+name, "The "+name+" tool of "+kit+".", func(*tools.Context, struct{}) (string, error) { return "ok", nil })
	t.Toolkit, t.Remote = kit, &tools.Remote{Connection: kit, Tool: name}
	return t
}

// perUser is a resolver listed per caller: each user id gets the tools
// of the toolkit named after it, or what list answers.
type perUser struct {
	calls atomic.Int64
	mu    sync.Mutex
	seen  []auth.Session
	list  func(user string) ([]*tools.Tool, error)
}

func (p *perUser) resolver(name string) tools.Resolver {
	return tools.Resolver{Name: name, Scope: tools.ScopeSession,
		Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) { return nil, nil },
		CallerCatalog: func(rc tools.ResolveContext) ([]*tools.Tool, error) {
			p.calls.Add(1)
			p.mu.Lock()
			p.seen = append(p.seen, rc.Session)
			p.mu.Unlock()
			user := rc.Session.Auth.Current.ID
			if p.list != nil {
				return p.list(user)
			}
			return []*tools.Tool{callerTool(user, "list"), callerTool(user, "run")}, nil
		}}
}

func callerService(t *testing.T, log *slog.Logger, mut func(*Options), rs ...tools.Resolver) *Service {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Func("ping", "Answer pong.", func(*tools.Context, struct{}) (string, error) { return "pong", nil })); err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Name: "ops", Tools: reg, Resolvers: rs}
	if log == nil {
		log = quiet()
	}
	opts := Options{Agent: a, Logger: log}
	if mut != nil {
		mut(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func names(defs []catalog.Definition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

// Each caller sees the shared tools and its own, in every format and in
// search, and never another caller's: not listed, not described, not
// executable (404 naming the tool). The resolver gets the caller as the
// session's current principal and initiator.
func TestCallerCatalogs(t *testing.T) {
	var p perUser
	s := callerService(t, nil, nil, p.resolver("tenants"))
	h := s.Handler()
	for _, f := range catalog.Formats {
		for _, c := range []struct{ user, mine, theirs string }{{"alice", "alice.list", "bob.list"}, {"bob", "bob.list", "alice.list"}} {
			var res struct {
				Tools   json.RawMessage      `json:"tools"`
				NameMap catalog.ToolNameMap  `json:"nameMap"`
				Raw     []catalog.Definition `json:"raw"`
			}
			if code := call(t, h, "GET", "/v1/tools?format="+string(f)+"&userId="+c.user, nil, &res); code != 200 {
				t.Fatalf("%s %s: %d", f, c.user, code)
			}
			got := names(res.Raw)
			if !contains(got, c.mine) || !contains(got, "ops.ping") || contains(got, c.theirs) {
				t.Fatalf("%s for %s: %v", f, c.user, got)
			}
			mine, _ := res.NameMap.Wire(c.mine)
			theirs, _ := res.NameMap.Wire(c.theirs)
			if f == catalog.FormatCanonical {
				mine, theirs = c.mine, c.theirs
			}
			if mine == "" || !bytes.Contains(res.Tools, []byte(`"`+mine+`"`)) || (theirs != "" && bytes.Contains(res.Tools, []byte(`"`+theirs+`"`))) || bytes.Contains(res.Tools, []byte(strings.TrimSuffix(c.theirs, ".list"))) {
				t.Fatalf("%s for %s: %s", f, c.user, res.Tools)
			}
		}
	}
	var sr catalog.SearchToolsResult
	if code := call(t, h, "POST", "/v1/tools/search", catalog.SearchToolsOptions{Query: "run tool of bob", UserID: "alice", Limit: 10}, &sr); code != 200 || contains(names(sr.Tools), "bob.run") || !contains(names(sr.Tools), "alice.run") {
		t.Fatalf("search for alice: %d %v", code, names(sr.Tools))
	}
	var tr ToolResponse
	if code := call(t, h, "GET", "/v1/tools/alice.run?userId=alice", nil, &tr); code != 200 || !tr.Executable {
		t.Fatalf("describe own: %d %+v", code, tr)
	}
	var e Error
	if code := call(t, h, "GET", "/v1/tools/alice.run?userId=bob", nil, &e); code != 404 || e.Code != catalog.CodeUnknownTool || !strings.Contains(e.Message, "alice.run") {
		t.Fatalf("describe another's: %d %+v", code, e)
	}
	if code := call(t, h, "POST", "/v1/tools/alice.run/execute", map[string]any{"userId": "bob", "input": map[string]any{}}, &e); code != 404 || e.Code != catalog.CodeUnknownTool || !strings.Contains(e.Message, "alice.run") {
		t.Fatalf("execute another's: %d %+v", code, e)
	}
	if code := call(t, h, "POST", "/v1/tools/alice.run/run", map[string]any{"userId": "bob", "input": map[string]any{}}, &e); code != 404 || e.Code != catalog.CodeUnknownTool {
		t.Fatalf("run another's: %d %+v", code, e)
	}
	// Its own passes every check; only the missing Temporal client stops it.
	if code := call(t, h, "POST", "/v1/tools/alice.run/execute", map[string]any{"userId": "alice", "input": map[string]any{}}, &e); code != 503 || e.Code != "unavailable" {
		t.Fatalf("execute own: %d %+v", code, e)
	}
	// executeToolCalls: bob's call of alice's tool is a failed result.
	var bundle struct {
		NameMap catalog.ToolNameMap `json:"nameMap"`
	}
	call(t, h, "GET", "/v1/tools?format=anthropic&userId=alice", nil, &bundle)
	var tc struct {
		Results []catalog.AnthropicToolResultBlock `json:"results"`
	}
	wire, _ := bundle.NameMap.Wire("alice.run")
	if code := call(t, h, "POST", "/v1/tools/execute-tool-calls", map[string]any{"provider": "anthropic", "userId": "bob", "nameMap": bundle.NameMap,
		"calls": []any{map[string]any{"type": "tool_use", "id": "c1", "name": wire, "input": map[string]any{}}}}, &tc); code != 200 || len(tc.Results) != 1 || !tc.Results[0].IsError || !strings.Contains(string(mustJSON(t, tc.Results[0])), catalog.CodeUnknownTool) {
		t.Fatalf("tool calls of another's tool: %d %+v", code, tc)
	}
	// The shared catalog (Catalog, Get: what eve mcp starts from) lists
	// nobody's own tools.
	if got := names(s.Catalog().Definitions()); contains(got, "alice.list") || contains(got, "bob.list") {
		t.Fatalf("shared catalog: %v", got)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ss := range p.seen {
		c := ss.Auth.Current
		if c == nil || ss.Auth.Initiator == nil || c.ID != ss.Auth.Initiator.ID || c.Type != ss.Auth.Initiator.Type || c.Type != auth.TypeUser || (c.ID != "alice" && c.ID != "bob") {
			t.Fatalf("resolver saw %+v", ss)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Listings are kept per caller: a second read lists nothing, a caller
// evicted by MaxCallers is listed again, and after ListedTTL a read goes
// on with the old listing while the new one is made.
func TestCallerCatalogCache(t *testing.T) {
	var p perUser
	s := callerService(t, nil, func(o *Options) { o.MaxCallers = 2 }, p.resolver("tenants"))
	var mu sync.Mutex
	now := time.Now()
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	alice := s.UserOf("alice")
	for range 3 {
		if _, ok := s.ToolFor(alice, "alice.list"); !ok {
			t.Fatal("alice's tool missing")
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("three reads listed %d times, want 1", n)
	}
	s.ToolFor(s.UserOf("bob"), "x")
	s.ToolFor(s.UserOf("carol"), "x") // evicts alice, the least recently seen
	s.ToolFor(alice, "x")
	if n := p.calls.Load(); n != 4 {
		t.Fatalf("calls = %d, want 4 (alice listed again after eviction)", n)
	}
	if got := s.callers.recent.Len(); got != 2 {
		t.Fatalf("%d callers kept, want 2", got)
	}
	// Stale: the read answers from the old listing and one relisting runs.
	p.list = func(user string) ([]*tools.Tool, error) { return []*tools.Tool{callerTool(user, "renamed")}, nil }
	mu.Lock()
	now = now.Add(ListedTTL + time.Second)
	mu.Unlock()
	if _, ok := s.ToolFor(alice, "alice.list"); !ok {
		t.Fatal("a stale read waited for the new listing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := s.ToolFor(alice, "alice.renamed"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the relisting never landed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := s.ToolFor(alice, "alice.list"); ok {
		t.Fatal("the old listing is still served")
	}
}

// A resolver that fails for one caller leaves that caller the other
// resolvers' tools (and the shared ones), logged without the credentials
// it was asked with; other callers are untouched.
func TestCallerCatalogErrorListsTheRest(t *testing.T) {
	var good, bad perUser
	bad.list = func(user string) ([]*tools.Tool, error) {
		if user == "carol" {
			return nil, errors.New("tenant directory unavailable")
		}
		return []*tools.Tool{callerTool("crm-"+user, "find")}, nil
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	s := callerService(t, log, nil, good.resolver("tenants"), bad.resolver("crm"))
	res, err := s.GetFor(s.UserOf("carol"), catalog.GetToolsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := names(res.Raw)
	if !contains(got, "carol.list") || !contains(got, "ops.ping") || strings.Contains(strings.Join(got, " "), "crm") {
		t.Fatalf("carol: %v", got)
	}
	res, _ = s.GetFor(s.UserOf("dave"), catalog.GetToolsOptions{})
	if got := names(res.Raw); !contains(got, "crm-dave.find") || !contains(got, "dave.list") {
		t.Fatalf("dave: %v", got)
	}
	if l := logs.String(); !strings.Contains(l, `"resolver":"crm"`) || !strings.Contains(l, "tenant directory unavailable") || !strings.Contains(l, `"principalId":"carol"`) || strings.Contains(l, "dave") {
		t.Fatalf("log: %s", l)
	}
}

// One caller's slow listing holds up nobody else's: no lock is held
// while a resolver runs.
func TestCallerListingHoldsNoLock(t *testing.T) {
	release := make(chan struct{})
	var p perUser
	p.list = func(user string) ([]*tools.Tool, error) {
		if user == "slow" {
			<-release
		}
		return []*tools.Tool{callerTool(user, "list")}, nil
	}
	s := callerService(t, nil, nil, p.resolver("tenants"))
	done := make(chan bool)
	go func() {
		_, ok := s.ToolFor(s.UserOf("slow"), "slow.list")
		done <- ok
	}()
	deadline := time.Now().Add(10 * time.Second)
	for p.calls.Load() == 0 { // until the slow listing has started
		if time.Now().After(deadline) {
			t.Fatal("the slow listing never started")
		}
		time.Sleep(time.Millisecond)
	}
	quick := make(chan bool)
	go func() {
		_, ok := s.ToolFor(s.UserOf("quick"), "quick.list")
		quick <- ok
	}()
	select {
	case ok := <-quick:
		if !ok {
			t.Fatal("quick's tool missing")
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("quick's listing waited for slow's")
	}
	close(release)
	if !<-done {
		t.Fatal("slow's tool missing")
	}
}

// A caller's tool that another tool already names is left out: the
// shared tool wins, as it does when an execution looks the name up.
func TestCallerToolClashingWithShared(t *testing.T) {
	var p perUser
	p.list = func(user string) ([]*tools.Tool, error) {
		clash := tools.Func("ping", "Not the agent's ping.", func(*tools.Context, struct{}) (string, error) { return "", nil })
		return []*tools.Tool{clash, callerTool(user, "list")}, nil
	}
	s := callerService(t, nil, nil, p.resolver("tenants"))
	alice := s.UserOf("alice")
	if tl, ok := s.ToolFor(alice, "ops.ping"); !ok || tl.Description != "Answer pong." {
		t.Fatalf("ping: %+v", tl)
	}
	if _, ok := s.ToolFor(alice, "alice.list"); !ok {
		t.Fatal("the rest is missing")
	}
}

// A caller given no tools of its own reads the shared catalog itself, and
// one given some reads a catalog that extends it.
func TestCallerWithoutOwnToolsSharesTheCatalog(t *testing.T) {
	var p perUser
	p.list = func(user string) ([]*tools.Tool, error) {
		if user == "erin" {
			return nil, nil
		}
		return []*tools.Tool{callerTool(user, "list")}, nil
	}
	s := callerService(t, nil, nil, p.resolver("tenants"))
	if s.viewFor(s.UserOf("erin")) != s.current() {
		t.Fatal("a caller without tools of its own got a copy of the catalog")
	}
	if got := s.OwnToolkits(s.UserOf("erin")); len(got) != 0 {
		t.Fatalf("erin's own toolkits: %v", got)
	}
	if got := s.OwnToolkits(s.UserOf("frank")); len(got) != 1 || got[0] != "frank" {
		t.Fatalf("frank's own toolkits: %v", got)
	}
	if _, ok := s.ToolFor(s.UserOf("frank"), "ops.ping"); !ok {
		t.Fatal("frank lost the shared tools")
	}
}
