package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
)

// Keys of the auth tests: alice in tenant acme, bob in no tenant, and a
// manager the app's responder policy trusts.
var apiTestKeys = map[string]*auth.Principal{
	"key-alice":   {ID: "alice", Type: "user", Attributes: map[string]string{"tenantId": "acme"}},
	"key-bob":     {ID: "bob", Type: "user"},
	"key-manager": {ID: "manager", Type: "user", Attributes: map[string]string{"role": "manager"}},
}

// keyedAPI is demoAPI with apiTestKeys; e.C calls as alice.
func keyedAPI(t *testing.T, mut func(*api.Options)) *apiEnv {
	e := demoAPI(t, func(o *api.Options) {
		o.Keys = apiTestKeys
		if mut != nil {
			mut(o)
		}
	})
	e.C = e.as("key-alice")
	return e
}

func (e *apiEnv) as(key string) *client.Client { return client.New(e.URL, client.WithAPIKey(key)) }

// With keys configured, every route but health needs a valid bearer key.
func TestAPIAuthRequiresKey(t *testing.T) {
	e := keyedAPI(t, nil)
	if e.Server.Open() {
		t.Fatal("a server with keys reports itself open")
	}
	for _, c := range []struct {
		method, path string
		body         any
		headers      map[string]string
	}{
		{"POST", "/eve/v1/session", map[string]any{"message": "hi"}, nil},
		{"POST", "/eve/v1/session", nil, map[string]string{"Authorization": "Bearer wrong"}},
		{"POST", "/eve/v1/session", nil, map[string]string{"Authorization": "Basic YWxpY2U6cHc="}},
		{"POST", "/eve/v1/session", nil, map[string]string{"Authorization": "Bearer "}},
		{"GET", "/eve/v1/info", nil, nil},
		{"GET", "/eve/v1/session/ses_x/stream", nil, nil},
		{"POST", "/eve/v1/session/ses_x", map[string]any{"message": "hi"}, nil},
		{"POST", "/eve/v1/session/ses_x/cancel", nil, nil},
		{"POST", "/eve/v1/session/ses_x/reset", nil, nil},
	} {
		r := e.do(t, c.method, c.path, c.body, c.headers)
		wantError(t, r, 401, api.CodeUnauthorized, "")
		if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s %s: www-authenticate %q", c.method, c.path, r.Header.Get("WWW-Authenticate"))
		}
	}
	if r := e.do(t, "GET", "/eve/v1/health", nil, nil); r.Status != 200 {
		t.Fatalf("health without a key: %d %s", r.Status, r.Body)
	}
	// CORS preflights carry no credentials and must pass.
	if r := e.do(t, "OPTIONS", "/eve/v1/session", nil, map[string]string{"Origin": "http://app.example", "Access-Control-Request-Method": "POST"}); r.Status != 204 {
		t.Fatalf("preflight: %d", r.Status)
	}
	if _, err := e.as("key-alice").Info(e.Ctx(10 * time.Second)); err != nil {
		t.Fatalf("info with a key: %v", err)
	}
	if _, err := e.as("nope").Create(e.Ctx(10 * time.Second)); !client.IsStatus(err, 401) {
		t.Fatalf("create with a wrong key: %v", err)
	}
}

// The caller of each message becomes session.auth.current for its turn
// (the demo's tenant policy and tool read it); the creator stays initiator.
// bob reaches alice's session because the app's hook lets him.
func TestAPIAuthCallerAndInitiator(t *testing.T) {
	e := keyedAPI(t, func(o *api.Options) {
		o.AuthorizeSession = func(_ context.Context, a api.SessionAccess) bool { return a.Caller.ID == "bob" }
	})
	ctx := e.Ctx(60 * time.Second)
	alice, bob := e.as("key-alice"), e.as("key-bob")

	t1, err := alice.SendAndWait(ctx, "", "credit acme 5", nil)
	if err != nil {
		t.Fatal(err)
	}
	if t1.Status != client.TurnCompleted || t1.Reply != "Credit for acme: 5" {
		t.Fatalf("alice's turn = %s %q", t1.Status, t1.Reply)
	}
	id := t1.SessionID
	// bob is the current caller of his turn: the tenant policy denies him.
	t2, err := bob.SendAndWait(ctx, id, "credit acme 7", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(t2.Reply, "Caller cannot access this tenant") {
		t.Fatalf("bob's turn = %s %q: the policy should have seen bob as the caller", t2.Status, t2.Reply)
	}
	// and alice is current again for hers.
	t3, err := alice.SendAndWait(ctx, id, "credit acme 8", nil)
	if err != nil || t3.Reply != "Credit for acme: 8" {
		t.Fatalf("alice's second turn = %+v %v", t3, err)
	}
	sum, err := e.Sessions.Summary(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Initiator == nil || sum.Initiator.ID != "alice" || sum.Initiator.Attr("tenantId") != "acme" {
		t.Fatalf("initiator = %+v, want alice", sum.Initiator)
	}
	// A session created without a message keeps its creator as initiator.
	id2, err := bob.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := e.Sessions.Summary(ctx, id2); sum.Initiator == nil || sum.Initiator.ID != "bob" {
		t.Fatalf("initiator of a bodyless create = %+v", sum.Initiator)
	}
}

// An open server treats every caller as the anonymous principal.
func TestAPIAuthOpenServerIsAnonymous(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(30 * time.Second)
	if !e.Server.Open() {
		t.Fatal("a server without keys should be open")
	}
	// A bearer key is ignored, not refused.
	turn, err := e.as("anything").SendAndWait(ctx, "", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Sessions.Summary(ctx, turn.SessionID)
	if err != nil || sum.Initiator == nil || sum.Initiator.ID != api.Anonymous.ID || sum.Initiator.Type != "anonymous" {
		t.Fatalf("initiator = %+v, %v", sum.Initiator, err)
	}
}

// LoadKeys reads EVE_API_KEY and a keys file (YAML or JSON).
func TestAPIKeysFile(t *testing.T) {
	dir := t.TempDir()
	yml := dir + "/keys.yaml"
	writeFile(t, yml, `
keys:
  sk_alice_0123456789:
    principalId: alice
    attributes:
      tenantId: acme
      level: 3
  sk_svc_0123456789:
    principalId: billing
    principalType: service
`)
	keys, err := api.LoadKeys("sk_env_key", yml)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys["sk_env_key"].ID != api.APIKeyPrincipal.ID || keys["sk_alice_0123456789"].Attr("tenantId") != "acme" ||
		keys["sk_alice_0123456789"].Attr("level") != "3" || keys["sk_alice_0123456789"].Type != "user" || keys["sk_svc_0123456789"].Type != "service" {
		t.Fatalf("keys = %+v", keys)
	}
	js := dir + "/keys.json"
	writeFile(t, js, `{"keys": {"sk_json_0123456789": {"principalId": "carol", "attributes": {"tenantId": "t9"}}}}`)
	if keys, err := api.LoadKeys("", js); err != nil || keys["sk_json_0123456789"].ID != "carol" {
		t.Fatalf("json keys = %+v, %v", keys, err)
	}
	for _, bad := range []string{
		`keys: {sk_x_0123456789: {attributes: {a: b}}}`, // no principalId
		`keys: {sk_x_0123456789: {principalID: alice}}`, // unknown field (typo)
		`{"keys": {"k": {"principalId": "a", "x": 1}}}`, // unknown field
		`keys: {}`,
	} {
		writeFile(t, yml, bad)
		if _, err := api.LoadKeys("", yml); err == nil {
			t.Fatalf("keys file %q: want an error", bad)
		}
	}
	if _, err := api.LoadKeys("", dir+"/missing.yaml"); err == nil {
		t.Fatal("a missing keys file should fail")
	}
	if keys, err := api.LoadKeys("", ""); err != nil || len(keys) != 0 {
		t.Fatalf("no keys = %v, %v", keys, err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
