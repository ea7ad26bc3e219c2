package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/eve-temporal/eve/internal/httpbody"

	"github.com/eve-temporal/eve/auth"
)

// APIKeyPrincipal is who EVE_API_KEY authenticates.
var APIKeyPrincipal = auth.Principal{ID: "api-key", Type: "service"}

// keyIndex finds a principal by the SHA-256 of its key, so a lookup takes
// the same time whatever the key shares with a real one.
type keyIndex map[[32]byte]*auth.Principal

func newKeyIndex(keys map[string]*auth.Principal) (keyIndex, error) {
	idx := keyIndex{}
	for k, p := range keys {
		if strings.TrimSpace(k) == "" {
			return nil, errors.New("api: an API key is empty")
		}
		if p == nil || p.ID == "" {
			return nil, errors.New("api: every API key needs a principal with a principalId")
		}
		cp := *p
		idx[sha256.Sum256([]byte(k))] = &cp
	}
	return idx, nil
}

func (k keyIndex) lookup(token string) (*auth.Principal, bool) {
	p, ok := k[sha256.Sum256([]byte(token))]
	return p, ok
}

type principalKey struct{}

// Caller returns the authenticated principal of a request handled by the
// server (Anonymous on an open server).
func Caller(ctx context.Context) *auth.Principal {
	if p, ok := ctx.Value(principalKey{}).(*auth.Principal); ok {
		return p
	}
	return Anonymous
}

// authed requires a valid bearer key when keys are configured.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(s.keys) == 0 {
			h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, Anonymous)))
			return
		}
		authz := strings.TrimSpace(r.Header.Get("Authorization"))
		scheme, token, _ := strings.Cut(authz, " ")
		token = strings.TrimSpace(token)
		// Credentials decide before any body is read; a refusal closes
		// the connection instead of first draining the body.
		refuse := func(challenge, msg string) {
			httpbody.Refusing(w, r)
			w.Header().Set("WWW-Authenticate", challenge)
			writeError(w, http.StatusUnauthorized, "unauthorized", msg)
		}
		if authz == "" {
			refuse(`Bearer realm="eve"`, "missing API key: send Authorization: Bearer <key>")
			return
		}
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			refuse(`Bearer realm="eve", error="invalid_request"`, "unsupported authorization scheme: send Authorization: Bearer <key>")
			return
		}
		p, ok := s.keys.lookup(token)
		if !ok {
			refuse(`Bearer realm="eve", error="invalid_token"`, "invalid API key")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// keysFile is the keys file: {"keys": {"<key>": {principal}}}.
type keysFile struct {
	Keys map[string]keyEntry `yaml:"keys" json:"keys"`
}

type keyEntry struct {
	PrincipalID   string         `yaml:"principalId" json:"principalId"`
	PrincipalType string         `yaml:"principalType" json:"principalType"`
	Attributes    map[string]any `yaml:"attributes" json:"attributes"`
	// CanActFor lets a service principal act for these users ("*": any).
	CanActFor []string `yaml:"canActFor" json:"canActFor"`
	// Reviews lets the principal review other owners' sessions.
	Reviews *reviewEntry `yaml:"reviews" json:"reviews"`
	// AllowToolStubs lets the principal create sessions with eve's tool
	// stubs (evals): give it to an eval runner's key only.
	AllowToolStubs bool `yaml:"allowToolStubs" json:"allowToolStubs"`
}

// reviewEntry is a keys-file review grant (auth.ReviewGrant).
type reviewEntry struct {
	Owners         []string `yaml:"owners" json:"owners"`
	SameAttributes []string `yaml:"sameAttributes" json:"sameAttributes"`
}

// LoadKeys builds the key map from EVE_API_KEY (apiKey, which authenticates
// APIKeyPrincipal) and a keys file (JSON or YAML):
//
//	keys:
//	  sk_alice_123:
//	    principalId: alice
//	    principalType: user      # default "user"; or "service"
//	    attributes: {tenantId: acme}
//	  sk_billing_456:
//	    principalId: billing
//	    principalType: service
//	    canActFor: [alice, bob]  # or ["*"]; only services, only these users
//	  sk_bob_789:
//	    principalId: bob
//	    attributes: {tenantId: acme, role: manager}
//	    reviews:                 # answer approvals, stream and read decisions
//	      sameAttributes: [tenantId] # of owners with bob's tenantId
//	      owners: ["*"]          # and/or named owners
//	  sk_evals_000:
//	    principalId: eval-runner
//	    principalType: service
//	    allowToolStubs: true     # may create sessions with tool stubs (docs/evals.md)
//
// Both may be empty; then the map is empty and the server is open.
func LoadKeys(apiKey, keysFile string) (map[string]*auth.Principal, error) {
	keys := map[string]*auth.Principal{}
	if apiKey = strings.TrimSpace(apiKey); apiKey != "" {
		p := APIKeyPrincipal
		keys[apiKey] = &p
	}
	if keysFile == "" {
		return keys, nil
	}
	data, err := os.ReadFile(keysFile)
	if err != nil {
		return nil, fmt.Errorf("read API keys file: %w", err)
	}
	fileKeys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("API keys file %s: %w", keysFile, err)
	}
	for k, p := range fileKeys {
		if _, dup := keys[k]; dup {
			return nil, fmt.Errorf("API keys file %s: a key is listed twice (also as EVE_API_KEY)", keysFile)
		}
		keys[k] = p
	}
	return keys, nil
}

// ParseKeys reads a keys file's content (JSON or YAML).
func ParseKeys(data []byte) (map[string]*auth.Principal, error) {
	var f keysFile
	var err error
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&f)
	} else {
		if err = yaml.UnmarshalWithOptions(data, &f, yaml.Strict()); err != nil {
			// Without the source lines, which would print keys.
			err = errors.New(yaml.FormatError(err, false, false))
		}
	}
	if err != nil {
		return nil, fmt.Errorf(`want {"keys": {"<key>": {"principalId": ..., "principalType": ..., "attributes": {...}, "canActFor": [...], "reviews": {"owners": [...], "sameAttributes": [...]}}}}: %w`, err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New(`no keys: want {"keys": {"<key>": {"principalId": ...}}}`)
	}
	out := map[string]*auth.Principal{}
	names := make([]string, 0, len(f.Keys))
	for k := range f.Keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		e := f.Keys[k]
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("key %d is empty", i+1)
		}
		if strings.TrimSpace(e.PrincipalID) == "" {
			return nil, fmt.Errorf("the key ending %q has no principalId", tail(k))
		}
		p := &auth.Principal{ID: e.PrincipalID, Type: e.PrincipalType, AllowToolStubs: e.AllowToolStubs}
		switch p.Type {
		case "":
			p.Type = auth.TypeUser
		case auth.TypeUser, auth.TypeService, auth.TypeOperator:
		default:
			return nil, fmt.Errorf("the key ending %q (principal %q): unknown principalType %q: want %q (the default), %q or %q", tail(k), e.PrincipalID, e.PrincipalType, auth.TypeUser, auth.TypeService, auth.TypeOperator)
		}
		if len(e.CanActFor) > 0 {
			if p.Type != auth.TypeService {
				return nil, fmt.Errorf("the key ending %q (principal %q): canActFor is only for principalType %q; a user acts only for itself", tail(k), e.PrincipalID, auth.TypeService)
			}
			for _, u := range e.CanActFor {
				if strings.TrimSpace(u) == "" {
					return nil, fmt.Errorf("the key ending %q (principal %q): canActFor names an empty user", tail(k), e.PrincipalID)
				}
			}
			p.CanActFor = append([]string(nil), e.CanActFor...)
		}
		if r := e.Reviews; r != nil {
			g, err := reviewGrant(e.PrincipalID, r, e.Attributes)
			if err != nil {
				return nil, fmt.Errorf("the key ending %q (principal %q): %w", tail(k), e.PrincipalID, err)
			}
			p.Review = g
		}
		if len(e.Attributes) > 0 {
			p.Attributes = map[string]string{}
			for an, av := range e.Attributes {
				switch v := av.(type) {
				case string:
					p.Attributes[an] = v
				case nil:
					p.Attributes[an] = ""
				default:
					p.Attributes[an] = fmt.Sprint(v)
				}
			}
		}
		out[k] = p
	}
	return out, nil
}

// reviewGrant checks a keys-file review grant: it names owners, or
// attributes the reviewer has (a grant of an attribute the reviewer lacks
// would match nobody: surely a typo).
func reviewGrant(id string, r *reviewEntry, attrs map[string]any) (*auth.ReviewGrant, error) {
	if len(r.Owners) == 0 && len(r.SameAttributes) == 0 {
		return nil, errors.New(`reviews needs owners (principal ids, or ["*"]) or sameAttributes (attributes the owner must share, e.g. [tenantId]), or both`)
	}
	for _, o := range r.Owners {
		if strings.TrimSpace(o) == "" {
			return nil, errors.New("reviews.owners names an empty principal id")
		}
	}
	for _, a := range r.SameAttributes {
		v, ok := attrs[a]
		if !ok || v == nil || fmt.Sprint(v) == "" {
			return nil, fmt.Errorf("reviews.sameAttributes names %q, which %s's attributes lack: add it to attributes, or fix the name", a, id)
		}
	}
	return &auth.ReviewGrant{Owners: append([]string(nil), r.Owners...), SameAttributes: append([]string(nil), r.SameAttributes...)}, nil
}

// tail shows the last characters of a key, never the whole key.
func tail(k string) string {
	if len(k) <= 8 {
		return "…"
	}
	return "…" + k[len(k)-4:]
}
