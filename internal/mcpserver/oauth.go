package mcpserver

// MCP authorization (2025-11-25 and 2026-07-28, "Authorization"): the MCP
// server is an OAuth resource server. It publishes its protected-resource
// metadata (RFC 9728) naming the authorization server the operator
// configures, and checks each request's bearer token through a
// TokenVerifier hook (the Go SDK's auth.RequireBearerToken). JWKSVerifier is
// the reference hook: RS256 JWTs signed by a key of a JWKS document.

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth configures MCP authorization for the HTTP transport.
type OAuth struct {
	// Resource is this server's canonical URL (https://mcp.example.com/mcp):
	// the metadata's resource and the audience tokens must name.
	Resource string
	// AuthorizationServers are the issuers clients get tokens from.
	AuthorizationServers []string
	// Scopes are required of every token (and advertised), if any.
	Scopes []string
	// Verify checks a token (the hook); JWKSVerifier is the reference one.
	Verify auth.TokenVerifier
}

// MetadataPath is where the protected-resource metadata of a server whose
// MCP endpoint is at path is served (RFC 9728 §3.1: the well-known prefix,
// then the resource's path).
func MetadataPath(path string) string {
	return "/.well-known/oauth-protected-resource" + strings.TrimSuffix(path, "/")
}

// Protect requires a valid bearer token on h, answering 401 with
// WWW-Authenticate naming the metadata URL otherwise, and returns the
// metadata handler to serve at MetadataPath.
func (o OAuth) Protect(h http.Handler) (protected, metadata http.Handler, err error) {
	if o.Resource == "" || len(o.AuthorizationServers) == 0 || o.Verify == nil {
		return nil, nil, errors.New("mcpserver: OAuth needs Resource, AuthorizationServers and Verify")
	}
	metaURL, err := metadataURL(o.Resource)
	if err != nil {
		return nil, nil, err
	}
	protected = auth.RequireBearerToken(o.Verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metaURL, Scopes: o.Scopes})(h)
	metadata = auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.Resource,
		AuthorizationServers:   o.AuthorizationServers,
		ScopesSupported:        o.Scopes,
		BearerMethodsSupported: []string{"header"},
	})
	return protected, metadata, nil
}

func metadataURL(resource string) (string, error) {
	scheme, rest, ok := strings.Cut(resource, "://")
	if !ok || rest == "" {
		return "", fmt.Errorf("mcpserver: OAuth resource %q must be an absolute URL (https://host/mcp)", resource)
	}
	host, path, _ := strings.Cut(rest, "/")
	return scheme + "://" + host + MetadataPath("/"+path), nil
}

// JWKSVerifier verifies RS256 JWTs whose key is in the JWKS at jwksURL,
// issued by issuer for audience (the resource), not expired. The token's
// sub becomes the user calls run for; scope its scopes. Keys are fetched
// once and again when a token names an unknown key id (at most once a
// minute).
func JWKSVerifier(jwksURL, issuer, audience string, hc *http.Client) auth.TokenVerifier {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	ks := &jwks{url: jwksURL, hc: hc}
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		claims, err := ks.verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var c struct {
			Iss   string          `json:"iss"`
			Sub   string          `json:"sub"`
			Aud   json.RawMessage `json:"aud"`
			Exp   float64         `json:"exp"`
			Scope string          `json:"scope"`
		}
		if err := json.Unmarshal(claims, &c); err != nil {
			return nil, fmt.Errorf("%w: claims: %v", auth.ErrInvalidToken, err)
		}
		var auds []string
		if json.Unmarshal(c.Aud, &auds) != nil {
			var one string
			_ = json.Unmarshal(c.Aud, &one)
			auds = []string{one}
		}
		switch {
		case c.Iss != issuer:
			return nil, fmt.Errorf("%w: issuer %q, want %q", auth.ErrInvalidToken, c.Iss, issuer)
		case !slices.Contains(auds, audience):
			return nil, fmt.Errorf("%w: the token is not for this resource (%s)", auth.ErrInvalidToken, audience)
		case c.Sub == "":
			return nil, fmt.Errorf("%w: no subject", auth.ErrInvalidToken)
		case c.Exp == 0:
			return nil, fmt.Errorf("%w: no expiry", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: c.Sub, Scopes: strings.Fields(c.Scope), Expiration: time.Unix(int64(c.Exp), 0)}, nil
	}
}

type jwks struct {
	url     string
	hc      *http.Client
	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

func (k *jwks) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key := k.keys[kid]; key != nil {
		return key, nil
	}
	if time.Since(k.fetched) < time.Minute && k.keys != nil {
		return nil, fmt.Errorf("unknown key %q", kid)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the JWKS: HTTP %d", resp.StatusCode)
	}
	var doc struct {
		Keys []struct {
			Kty, Kid, N, E, Alg string
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the JWKS: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, j := range doc.Keys {
		if j.Kty != "RSA" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(j.N)
		e, err2 := base64.RawURLEncoding.DecodeString(j.E)
		if err1 != nil || err2 != nil || len(e) > 4 {
			continue
		}
		keys[j.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	k.keys, k.fetched = keys, time.Now()
	if key := keys[kid]; key != nil {
		return key, nil
	}
	return nil, fmt.Errorf("unknown key %q", kid)
}

// verify checks an RS256 JWT's signature and returns its claims.
func (k *jwks) verify(ctx context.Context, token string) (json.RawMessage, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, errors.New("bad JWT header")
	}
	var h struct{ Alg, Kid string }
	if json.Unmarshal(hb, &h) != nil || h.Alg != "RS256" {
		return nil, fmt.Errorf("JWT algorithm %q: want RS256", h.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, errors.New("bad JWT signature encoding")
	}
	key, err := k.key(ctx, h.Kid)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return nil, errors.New("bad JWT signature")
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("bad JWT claims encoding")
	}
	return claims, nil
}
