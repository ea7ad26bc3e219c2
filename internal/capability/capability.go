// Package capability signs and verifies the capability tokens in delegated
// actions' completion URLs. A token is bound to one action, expires, and
// needs no other credential: whoever holds the URL may complete the action.
package capability

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Claims name the action a token may settle.
type Claims struct {
	Namespace  string `json:"ns"`
	SessionID  string `json:"sid"`
	WorkflowID string `json:"wid"` // the turn workflow
	ActivityID string `json:"aid"`
	ActionID   string `json:"act"`
	Tool       string `json:"tool"`
	// Expires is a Unix time: the action's deadline plus a grace period.
	Expires int64 `json:"exp"`
}

// Errors of Verify.
var (
	ErrForged  = errors.New("capability token is forged or malformed")
	ErrExpired = errors.New("capability token has expired")
)

// Signer signs and verifies tokens with a shared secret.
type Signer struct {
	secret []byte
}

// MinSecretBytes is the shortest secret accepted.
const MinSecretBytes = 16

// NewSigner returns a signer; the secret must be at least 16 bytes.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("action secret is %d bytes; use at least %d random bytes (EVE_ACTION_SECRET)", len(secret), MinSecretBytes)
	}
	return &Signer{secret: append([]byte(nil), secret...)}, nil
}

// RandomSecret returns a new random secret, hex-free base64url text.
func RandomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

var enc = base64.RawURLEncoding

// Sign returns "<claims>.<mac>".
func (s *Signer) Sign(c Claims) string {
	body, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	p := enc.EncodeToString(body)
	return p + "." + enc.EncodeToString(s.mac(p))
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("eve-action-v1."))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Verify checks the signature first (constant time), then the expiry.
func (s *Signer) Verify(token string, now time.Time) (Claims, error) {
	var c Claims
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return c, ErrForged
	}
	got, err := enc.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return c, ErrForged
	}
	body, err := enc.DecodeString(p)
	if err != nil || json.Unmarshal(body, &c) != nil || c.ActionID == "" || c.WorkflowID == "" {
		return c, ErrForged
	}
	if now.Unix() > c.Expires {
		return c, ErrExpired
	}
	return c, nil
}

// PeekActionID reads the action id from a token's claims without verifying
// it: for jobs and the CLI, which hold a token but not the secret, to name
// the action they settle (the server verifies before it believes it).
func PeekActionID(token string) string {
	claims, _, _ := strings.Cut(token, ".")
	b, err := enc.DecodeString(claims)
	if err != nil {
		return ""
	}
	var c Claims
	_ = json.Unmarshal(b, &c)
	return c.ActionID
}
