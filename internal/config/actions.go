package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/capability"
)

// Actions configures delegated tools' completion URLs. The secret is shared
// by the workers (which sign URLs) and the API server (which verifies them).
type Actions struct {
	Secret    string
	PublicURL string
}

// Bind registers the flags; publicDefault is used when EVE_PUBLIC_URL is unset.
func (a *Actions) Bind(fs *pflag.FlagSet, publicDefault string) {
	fs.StringVar(&a.Secret, "action-secret", Env("EVE_ACTION_SECRET", ""), "secret that signs completion URLs of delegated tools, shared by workers and API servers (env EVE_ACTION_SECRET)")
	fs.StringVar(&a.PublicURL, "public-url", Env("EVE_PUBLIC_URL", publicDefault), "the API server's URL as external jobs reach it (env EVE_PUBLIC_URL)")
}

// ErrNoSecret means delegated tools cannot be completed by URL.
var ErrNoSecret = errors.New("EVE_ACTION_SECRET is not set: delegated tools cannot hand out completion URLs")

// LoadOrCreateSecret reads the secret file under dir, creating it with a
// random secret the first time (for the local dev stack only).
func (a *Actions) LoadOrCreateSecret(dir string) error {
	if a.Secret != "" {
		return nil
	}
	path := filepath.Join(dir, "action-secret")
	if b, err := os.ReadFile(path); err == nil {
		a.Secret = strings.TrimSpace(string(b))
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	a.Secret = capability.RandomSecret()
	if err := os.WriteFile(path, []byte(a.Secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Signer returns the signer, or ErrNoSecret.
func (a Actions) Signer() (*capability.Signer, error) {
	if a.Secret == "" {
		return nil, ErrNoSecret
	}
	return capability.NewSigner([]byte(a.Secret))
}

// Worker returns the worker-side config, or ErrNoSecret.
func (a Actions) Worker() (*agent.Actions, error) {
	if a.Secret == "" {
		return nil, ErrNoSecret
	}
	if a.PublicURL == "" {
		return nil, errors.New("EVE_PUBLIC_URL is empty: jobs need the API server's URL")
	}
	return &agent.Actions{Secret: []byte(a.Secret), PublicURL: a.PublicURL}, nil
}
