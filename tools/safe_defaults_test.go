package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/auth"
)

func TestRetryPolicyDefaults(t *testing.T) {
	base := func() *Tool {
		return &Tool{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop}
	}
	// Not idempotent, no policy: runs once.
	if got := base().EffectiveRetry(); got != NoRetry || got.MaximumAttempts != 1 {
		t.Fatalf("default = %+v", got)
	}
	// Idempotent: the default policy.
	idem := base()
	idem.Idempotent = true
	if got := idem.EffectiveRetry(); got != DefaultRetry || got.MaximumAttempts != DefaultMaxAttempts {
		t.Fatalf("idempotent = %+v", got)
	}
	// Own policy wins, whether idempotent or not; 0 attempts means the default, not unlimited.
	for _, idempotent := range []bool{false, true} {
		own := base()
		own.Idempotent = idempotent
		own.Retry = &RetryPolicy{InitialInterval: 5, MaximumAttempts: 0}
		if got := own.EffectiveRetry(); got.MaximumAttempts != DefaultMaxAttempts || got.InitialInterval != 5 {
			t.Fatalf("own policy (idempotent %v) = %+v", idempotent, got)
		}
		own.Retry = &RetryPolicy{MaximumAttempts: 7}
		if got := own.EffectiveRetry(); got.MaximumAttempts != 7 {
			t.Fatalf("own policy = %+v", got)
		}
	}
	// The tool's own policy is not modified.
	own := base()
	own.Retry = &RetryPolicy{}
	own.EffectiveRetry()
	if own.Retry.MaximumAttempts != 0 {
		t.Fatal("EffectiveRetry changed the tool's policy")
	}
	// Negative attempts are refused at registration.
	neg := base()
	neg.Retry = &RetryPolicy{MaximumAttempts: -1}
	if err := NewRegistry().Register(neg); err == nil || !strings.Contains(err.Error(), "MaximumAttempts") {
		t.Fatalf("negative attempts: %v", err)
	}
}

func TestIdempotencyKeyIncludesTurn(t *testing.T) {
	s := auth.Session{ID: "ses_1"}
	a := NewContext(context.Background(), s, "turn_0", "call_1_0", "t", 1, nil)
	b := NewContext(context.Background(), s, "turn_1", "call_1_0", "t", 1, nil)
	if a.IdempotencyKey != "ses_1/turn_0/call_1_0" || a.IdempotencyKey == b.IdempotencyKey {
		t.Fatalf("keys %q %q", a.IdempotencyKey, b.IdempotencyKey)
	}
	// Attempts share it.
	if c := NewContext(context.Background(), s, "turn_0", "call_1_0", "t", 2, nil); c.IdempotencyKey != a.IdempotencyKey {
		t.Fatalf("attempt 2 key %q", c.IdempotencyKey)
	}
	// A tools-API execution: session and turn are the execution id.
	e := NewContext(context.Background(), auth.Session{ID: "exe_9"}, "exe_9", "execute", "t", 1, nil)
	if e.IdempotencyKey != "exe_9/execute" {
		t.Fatalf("execution key %q", e.IdempotencyKey)
	}
}

func TestRegistrationRefusesExternalSchemaRefs(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(secret, []byte(`{"type":"string","enum":["top secret"]}`), 0o600)
	for _, ref := range []string{"file://" + secret, "https://example.com/s.json"} {
		q, _ := json.Marshal(ref)
		tl := &Tool{Name: "t", Description: "d", Execute: noop,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":` + string(q) + `}}}`)}
		err := NewRegistry().Register(tl)
		if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "self-contained") || strings.Contains(err.Error(), "top secret") {
			t.Fatalf("%s: %v", ref, err)
		}
		tl = &Tool{Name: "t", Description: "d", Execute: noop, InputSchema: json.RawMessage(`{"type":"object"}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":` + string(q) + `}}}`)}
		if err := NewRegistry().Register(tl); err == nil || !strings.Contains(err.Error(), "self-contained") {
			t.Fatalf("output %s: %v", ref, err)
		}
	}
}
