package config

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/payloadstore"
)

func TestPayloadStoreFlag(t *testing.T) {
	t.Setenv(payloadstore.EnvVar, "")
	var tc Temporal
	tc.Bind(pflag.NewFlagSet("x", pflag.ContinueOnError), "")
	if tc.PayloadStore != payloadstore.DefaultSpec {
		t.Fatalf("default --payload-store = %q, want %q", tc.PayloadStore, payloadstore.DefaultSpec)
	}

	dir := t.TempDir()
	t.Setenv(payloadstore.EnvVar, "file:"+dir)
	tc = Temporal{}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	tc.Bind(fs, "")
	if tc.PayloadStore != "file:"+dir {
		t.Fatalf("--payload-store from the environment = %q, want file:%s", tc.PayloadStore, dir)
	}
	other := filepath.Join(t.TempDir(), "flag")
	if err := fs.Parse([]string{"--payload-store", "file:" + other}); err != nil {
		t.Fatal(err)
	}
	if tc.PayloadStore != "file:"+other {
		t.Fatalf("--payload-store = %q, want the flag's file:%s", tc.PayloadStore, other)
	}
}

// Store opens once; copies of a bound Temporal share the store.
func TestStoreOpensOnce(t *testing.T) {
	ctx := context.Background()
	var tc Temporal
	tc.Bind(pflag.NewFlagSet("x", pflag.ContinueOnError), "")
	tc.PayloadStore = "file:" + t.TempDir()
	copied := tc
	s1, err := tc.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := copied.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Fatal("a copy of a bound Temporal opened a second store")
	}
	// A literal (never bound) caches too, and falls back to the variable.
	dir := t.TempDir()
	t.Setenv(payloadstore.EnvVar, "file:"+dir)
	lit := Temporal{Address: "127.0.0.1:1"}
	a, err := lit.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := lit.Store(ctx)
	if a != b || a.Location() != "file:"+dir {
		t.Fatalf("literal Temporal: %v / %v at %s, want one store at file:%s", a, b, a.Location(), dir)
	}
}

func TestStoreBadSpec(t *testing.T) {
	tc := Temporal{Address: "127.0.0.1:1", TaskQueue: "eve", PayloadStore: "ftp://x"}
	if _, err := tc.Store(context.Background()); err == nil || !strings.Contains(err.Error(), "EVE_PAYLOAD_STORE=ftp://x") {
		t.Fatalf("Store = %v, want an error naming the spec", err)
	}
	if _, err := tc.Dial(context.Background(), nil, nil); err == nil || !strings.Contains(err.Error(), "s3://bucket/prefix") {
		t.Fatalf("Dial = %v, want the store's error", err)
	}
}
