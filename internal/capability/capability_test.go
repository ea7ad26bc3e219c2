package capability

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	s, err := NewSigner([]byte("0123456789abcdef0123"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	c := Claims{Namespace: "default", WorkflowID: "ses_1/turn_0", ActivityID: "tool/c1", ActionID: "act_1", Tool: "run_report", Expires: now.Unix() + 60}
	tok := s.Sign(c)
	got, err := s.Verify(tok, now)
	if err != nil || got != c {
		t.Fatalf("verify = %+v, %v", got, err)
	}
	// Holders without the secret can still name the action.
	if id := PeekActionID(tok); id != "act_1" {
		t.Fatalf("peek = %q", id)
	}
	if id := PeekActionID("not a token"); id != "" {
		t.Fatalf("peek of junk = %q", id)
	}
	if _, err := s.Verify(tok, now.Add(61*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	// Any change to the claims breaks the signature.
	p, sig, _ := strings.Cut(tok, ".")
	for _, forged := range []string{p + "x." + sig, p + "." + sig[:len(sig)-2] + "AA", "nodot", "", "." + sig} {
		if _, err := s.Verify(forged, now); !errors.Is(err, ErrForged) {
			t.Fatalf("forged %q: %v", forged, err)
		}
	}
	other, _ := NewSigner([]byte("another secret of 16+ bytes"))
	if _, err := other.Verify(tok, now); !errors.Is(err, ErrForged) {
		t.Fatalf("other secret: %v", err)
	}
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
}
