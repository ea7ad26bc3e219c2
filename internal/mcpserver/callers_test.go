package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/tools"
)

// ownTool is a connection-like tool of toolkit kit.
func ownTool(kit, name string) *tools.Tool {
	t := tools.Func(kit+"__"+name, "The "+name+" tool of "+kit+".", func(*tools.Context, struct{}) (string, error) { return "ok", nil })
	t.Toolkit, t.Remote = kit, &tools.Remote{Connection: kit, Tool: name}
	return t
}

// Over streamable HTTP, each user (UserFromHeader) lists its own tools
// beside the shared ones and never another's; calling another's is an
// unknown tool, calling its own reaches the execution (which, without
// Temporal here, is unavailable).
func TestCallersOwnTools(t *testing.T) {
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Func("ping", "Answer pong.", func(*tools.Context, struct{}) (string, error) { return "pong", nil })); err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Name: "ops", Tools: reg, Resolvers: []tools.Resolver{{Name: "tenants", Scope: tools.ScopeSession,
		Resolve: func(tools.ResolveContext) ([]*tools.Tool, error) { return nil, nil },
		CallerCatalog: func(rc tools.ResolveContext) ([]*tools.Tool, error) {
			u := rc.Session.Auth.Current.ID
			return []*tools.Tool{ownTool(u, "list")}, nil
		}}}}
	svc, err := toolsapi.New(toolsapi.Options{Agent: a, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Tools: svc, Logger: quiet(), UserFromHeader: func(h http.Header) (string, error) { return h.Get("X-User"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	ctx := context.Background()
	session := func(user string) *mcp.ClientSession {
		hc := &http.Client{Transport: headerRT{user}}
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	for _, u := range []struct{ user, mine, theirs string }{{"alice", "alice.list", "bob.list"}, {"bob", "bob.list", "alice.list"}} {
		cs := session(u.user)
		got := names(t, cs)
		if !slices.Contains(got, u.mine) || !slices.Contains(got, "ops.ping") || slices.Contains(got, u.theirs) {
			t.Fatalf("%s lists %v", u.user, got)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.theirs, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "`+u.theirs+`"`) {
			t.Fatalf("%s calls %s: %v", u.user, u.theirs, err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.mine, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "Temporal client") {
			t.Fatalf("%s calls %s: %v (want the execution's unavailable)", u.user, u.mine, err)
		}
	}
	if slices.Contains(s.Tools(), "alice.list") {
		t.Fatal("the shared registry holds a caller's tool")
	}
}

type headerRT struct{ user string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User", h.user)
	return http.DefaultTransport.RoundTrip(r)
}
