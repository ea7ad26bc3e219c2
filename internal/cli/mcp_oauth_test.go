package cli

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// signJWT signs claims with key under kid (RS256).
func signJWT(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// MCP authorization: the protected-resource metadata names the configured
// authorization server; a request needs a token the hook verifies (here,
// RS256 against the JWKS this test serves: issuer, audience, expiry and
// signature all count), or the bearer key; a refusal points to the
// metadata.
func TestMCPOAuth(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	defer jwks.Close()
	const issuer = "https://auth.example.com"
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := toolsapi.New(toolsapi.Options{Agent: a, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{Tools: svc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var resource string
	hs := httptest.NewUnstartedServer(nil)
	resource = "http://" + hs.Listener.Addr().String() + MCPPath
	o, err := oauthFlags{issuer: issuer, jwks: jwks.URL, resource: resource}.config("the-key")
	if err != nil {
		t.Fatal(err)
	}
	mux, err := mcpMux(srv, "the-key", o)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = mux
	hs.Start()
	defer hs.Close()

	resp, err := http.Get(hs.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta["resource"] != resource || meta["authorization_servers"].([]any)[0] != issuer {
		t.Fatalf("metadata = %v", meta)
	}
	initialize := func(token string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, hs.URL+MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
	}
	exp := time.Now().Add(time.Hour).Unix()
	good := map[string]any{"iss": issuer, "sub": "alice", "aud": resource, "exp": exp}
	if st, _ := initialize(signJWT(t, key, "k1", good)); st != 200 {
		t.Fatalf("a valid token: %d", st)
	}
	if st, _ := initialize("the-key"); st != 200 {
		t.Fatalf("the bearer key: %d", st)
	}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	for name, token := range map[string]string{
		"none":           "",
		"garbage":        "not-a-jwt",
		"other issuer":   signJWT(t, key, "k1", with("iss", "https://evil.example.com")),
		"other audience": signJWT(t, key, "k1", with("aud", "https://other.example.com/mcp")),
		"expired":        signJWT(t, key, "k1", with("exp", time.Now().Add(-time.Minute).Unix())),
		"other key":      signJWT(t, other, "k1", good),
		"unknown kid":    signJWT(t, key, "k2", good),
	} {
		st, challenge := initialize(token)
		if st != 401 || !strings.Contains(challenge, `resource_metadata="`+hs.URL+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Fatalf("%s: %d %q, want 401 pointing to the metadata", name, st, challenge)
		}
	}
	if _, err := (oauthFlags{issuer: issuer}).config(""); err == nil || !strings.Contains(err.Error(), "--oauth-jwks") {
		t.Fatalf("issuer alone: %v", err)
	}
}
