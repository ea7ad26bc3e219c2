package connections

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/tools"
)

func ptr[T any](v T) *T { return &v }

func TestMCPToolFollowsAnnotations(t *testing.T) {
	c := &Connection{Name: "gh", MCP: &MCP{URL: "https://mcp.example.com/mcp"}}
	r := newRuntime()
	cases := []struct {
		name        string
		ann         *mcp.ToolAnnotations
		approval    string
		attempts    int32
		destructive bool
	}{
		{"read", &mcp.ToolAnnotations{ReadOnlyHint: true}, approval.KindNever, tools.DefaultMaxAttempts, false},
		{"upsert", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)}, approval.KindNever, tools.DefaultMaxAttempts, false},
		// MCP: destructiveHint defaults to true for a tool that is not read-only.
		{"write", &mcp.ToolAnnotations{}, approval.KindAlways, 1, true},
		{"delete", &mcp.ToolAnnotations{DestructiveHint: ptr(true)}, approval.KindAlways, 1, true},
		// No annotations: nothing is known, nothing is assumed safe to repeat.
		{"bare", nil, approval.KindNever, 1, false},
	}
	for _, tc := range cases {
		tl, err := c.mcpTool(r, listedTool{Tool: &mcp.Tool{Name: tc.name, Description: "d", InputSchema: map[string]any{"type": "object"}, Annotations: tc.ann}})
		if err != nil {
			t.Fatal(err)
		}
		if err := tools.Compile(tl); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tl.Name != "gh__"+tc.name || tl.Approval.Kind() != tc.approval || tl.EffectiveRetry().MaximumAttempts != tc.attempts || tl.Annotations.Destructive != tc.destructive {
			t.Errorf("%s: name %s approval %s attempts %d destructive %v", tc.name, tl.Name, tl.Approval.Kind(), tl.EffectiveRetry().MaximumAttempts, tl.Annotations.Destructive)
		}
		if tl.Remote == nil || tl.Remote.Tool != tc.name || tl.Remote.Connection != "gh" || !strings.HasPrefix(tl.Remote.Identity, "sha256:") {
			t.Errorf("%s: remote %+v", tc.name, tl.Remote)
		}
	}
	// The connection's settings win over the annotations.
	c.Approval = ptr(approval.Once())
	c.ToolApproval = map[string]approval.Policy{"read": approval.Always()}
	c.Retry = map[string]bool{"read": false, "write": true}
	read, _ := c.mcpTool(r, listedTool{Tool: &mcp.Tool{Name: "read", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}})
	write, _ := c.mcpTool(r, listedTool{Tool: &mcp.Tool{Name: "write", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{}}})
	if read.Approval.Kind() != approval.KindAlways || write.Approval.Kind() != approval.KindOnce {
		t.Errorf("approval: read %s write %s", read.Approval.Kind(), write.Approval.Kind())
	}
	if read.EffectiveRetry().MaximumAttempts != 1 || write.EffectiveRetry().MaximumAttempts != tools.DefaultMaxAttempts {
		t.Errorf("retry: read %d write %d", read.EffectiveRetry().MaximumAttempts, write.EffectiveRetry().MaximumAttempts)
	}
	if !strings.Contains(read.Description, "read") {
		t.Errorf("an undescribed tool gets a description: %q", read.Description)
	}
}

func TestInputSchemaFromDraft07(t *testing.T) {
	in, err := inputSchema(map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "properties": map[string]any{"a": map[string]any{"type": "number"}}, "required": []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(in, &m)
	if m["$schema"] != nil || m["type"] != "object" {
		t.Fatalf("schema %s", in)
	}
	if _, err := inputSchema(map[string]any{"type": "string"}); err == nil {
		t.Fatal("a non-object input schema must be refused")
	}
}

func TestToolNames(t *testing.T) {
	for remote, want := range map[string]string{
		"get-sum":       "c__get-sum",
		"issues.search": "c__issues_search",
		"a  b":          "c__a_b",
		"9lives":        "c__t_9lives",
		"x__y":          "c__x_y",
	} {
		if got, ok := toolName("c", remote); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", remote, got, ok, want)
		}
	}
	if _, ok := toolName("c", strings.Repeat("a", 70)); ok {
		t.Error("a name over 64 characters must be refused")
	}
}

func TestValidate(t *testing.T) {
	bad := []*Connection{
		{Name: "Bad Name", MCP: &MCP{URL: "https://x"}},
		{Name: "a__b", MCP: &MCP{URL: "https://x"}},
		{Name: "x"},
		{Name: "x", MCP: &MCP{URL: "http://example.com/mcp"}},
		{Name: "x", MCP: &MCP{Command: "srv"}, Auth: &Auth{GetToken: func(context.Context, *auth.Principal) (Token, error) { return Token{}, nil }}},
		{Name: "x", MCP: &MCP{URL: "https://x"}, Allow: []string{"a"}, Block: []string{"b"}},
		{Name: "x", MCP: &MCP{URL: "https://x"}, Auth: &Auth{Owner: "team"}},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	for _, u := range []string{"http://localhost:3001/mcp", "http://127.0.0.1:1/mcp", "https://mcp.linear.app/mcp"} {
		if err := (&Connection{Name: "ok", MCP: &MCP{URL: u}}).Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := Static(&Connection{Name: "a", MCP: &MCP{URL: "https://x"}}, &Connection{Name: "a", MCP: &MCP{URL: "https://y"}}); err == nil {
		t.Error("two connections of one name must be refused")
	}
}

func TestIdentity(t *testing.T) {
	a := &Connection{Name: "x", MCP: &MCP{URL: "https://a.example/mcp"}, InstanceKey: "t1"}
	b := *a
	b.InstanceKey = "t2"
	c := *a
	c.MCP = &MCP{URL: "https://b.example/mcp"}
	if a.identity() == b.identity() || a.identity() == c.identity() || a.identity() != (&Connection{Name: "x", MCP: &MCP{URL: "https://a.example/mcp"}, InstanceKey: "t1"}).identity() {
		t.Fatal("identity must follow the endpoint and the instance key, and only them")
	}
	if strings.Contains(a.identity(), "example") {
		t.Fatal("the identity must not show the endpoint")
	}
}

func petstore(t *testing.T) []byte {
	b, err := os.ReadFile("../e2e/testdata/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenAPITools(t *testing.T) {
	c := &Connection{Name: "pets", OpenAPI: &OpenAPI{Document: petstore(t), BaseURL: "http://127.0.0.1:1"}, Block: []string{"deletePet"}}
	ts, err := discoverOpenAPI(c, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.Compile(ts...); err != nil {
		t.Fatal(err)
	}
	by := map[string]*tools.Tool{}
	var names []string
	for _, tl := range ts {
		by[tl.Name] = tl
		names = append(names, tl.Name)
	}
	if strings.Join(names, " ") != "pets__listPets pets__createPets pets__showPetById" {
		t.Fatalf("tools %v", names)
	}
	show, create, list := by["pets__showPetById"], by["pets__createPets"], by["pets__listPets"]
	if err := show.ValidateInput(json.RawMessage(`{}`)); err == nil {
		t.Error("a path parameter is required")
	}
	if err := create.ValidateInput(json.RawMessage(`{"body":{"id":1}}`)); err == nil {
		t.Error("the body's schema (via $ref) must require name")
	}
	if err := create.ValidateInput(json.RawMessage(`{"body":{"id":1,"name":"Rex"}}`)); err != nil {
		t.Error(err)
	}
	if err := list.ValidateInput(json.RawMessage(`{"limit":1000}`)); err == nil {
		t.Error("limit has a maximum of 100")
	}
	if list.EffectiveRetry().MaximumAttempts != tools.DefaultMaxAttempts || create.EffectiveRetry().MaximumAttempts != 1 || !list.Annotations.ReadOnly {
		t.Error("GET is retried and read-only, POST runs once")
	}
	c.Block, c.Allow = nil, []string{"deletePet"}
	ts, _ = discoverOpenAPI(c, newRuntime())
	if len(ts) != 1 || ts[0].Approval.Kind() != approval.KindAlways || !ts[0].Annotations.Destructive {
		t.Fatalf("DELETE asks every time: %+v", ts)
	}
	// The document's own server is http on a public host: refused.
	c.OpenAPI.BaseURL = ""
	if _, err := discoverOpenAPI(c, newRuntime()); err == nil || !strings.Contains(err.Error(), "BaseURL") {
		t.Fatalf("err = %v", err)
	}
}

// A call maps the input to path, query, header and body, and reads the
// answer; errors from the server are tool errors (4xx not retried).
func TestOpenAPICall(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Method + " " + r.URL.RequestURI() + " " + r.Header.Get("Authorization") + " " + r.Header.Get("X-Tenant"))
		if strings.Contains(r.URL.Path, "missing") {
			http.Error(w, `{"code":404,"message":"no such pet"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":1,"name":"Rex"}`))
	}))
	defer srv.Close()
	var calls atomic.Int32
	c := &Connection{Name: "pets", OpenAPI: &OpenAPI{Document: petstore(t), BaseURL: srv.URL}, Headers: map[string]string{"X-Tenant": "t1"},
		Auth: &Auth{GetToken: func(_ context.Context, p *auth.Principal) (Token, error) {
			calls.Add(1)
			if p != nil {
				t.Error("an app credential gets no principal")
			}
			return Token{Value: "app-token"}, nil
		}}}
	ts, err := discoverOpenAPI(c, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	var show *tools.Tool
	for _, tl := range ts {
		if tl.Name == "pets__showPetById" {
			show = tl
		}
	}
	if err := tools.Compile(show); err != nil {
		t.Fatal(err)
	}
	ctx := tools.NewContext(context.Background(), auth.Session{ID: "s"}, "t", "c", show.Name, 1, nil)
	out, err := show.Execute(ctx, json.RawMessage(`{"petId":"a/b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Load().(string); g != "GET /pets/a%2Fb Bearer app-token t1" {
		t.Fatalf("request %q", g)
	}
	if res := out.(Result); res.Status != 200 || res.Body.(map[string]any)["name"] != "Rex" {
		t.Fatalf("result %+v", res)
	}
	if _, err := show.Execute(ctx, json.RawMessage(`{"petId":".."}`)); err == nil || !tools.IsNonRetryable(err) {
		t.Fatalf("a path parameter of .. must be refused: %v", err)
	}
	_, err = show.Execute(ctx, json.RawMessage(`{"petId":"missing"}`))
	if err == nil || !tools.IsNonRetryable(err) || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such pet") {
		t.Fatalf("a 404 is a tool error the model reads: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("GetToken ran %d times for one unexpiring token", calls.Load())
	}
}

func TestTokenCacheIsBounded(t *testing.T) {
	c := &Connection{Name: "x", MCP: &MCP{URL: "https://x"}, Auth: &Auth{Owner: OwnerUser,
		GetToken: func(_ context.Context, p *auth.Principal) (Token, error) { return Token{Value: "t-" + p.ID}, nil }}}
	var tc tokenCache
	for i := range maxCachedTokens + 10 {
		p := &auth.Principal{ID: fmt.Sprint(i), Type: auth.TypeUser}
		if v, err := tc.get(context.Background(), c, p, false); err != nil || v != "t-"+p.ID {
			t.Fatalf("%d: %q %v", i, v, err)
		}
	}
	if n := len(tc.tokens); n > maxCachedTokens {
		t.Fatalf("%d tokens cached, bound %d", n, maxCachedTokens)
	}
}
