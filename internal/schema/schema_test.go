package schema

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCompileRefusesExternalRefs(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(local, []byte(`{"type":"string","enum":["top secret"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()

	for _, ref := range []string{
		"file://" + local,
		"file://" + local + "#/enum",
		srv.URL + "/s.json",
		"https://example.com/s.json",
		"urn:example:other",
	} {
		raw := json.RawMessage(`{"type":"object","properties":{"a":{"$ref":` + quote(ref) + `}}}`)
		_, err := Compile("t/input", raw)
		if err == nil {
			t.Fatalf("%s: compiled", ref)
		}
		if !errors.Is(err, ErrExternalRef) || !strings.Contains(err.Error(), "self-contained") {
			t.Fatalf("%s: %v", ref, err)
		}
		base := strings.SplitN(ref, "#", 2)[0]
		if !strings.Contains(err.Error(), base) {
			t.Fatalf("%s: error does not name the ref: %v", ref, err)
		}
		if strings.Contains(err.Error(), "top secret") {
			t.Fatalf("%s: file content leaked: %v", ref, err)
		}
	}
	// A relative ref resolved against a file:// $id is refused too.
	raw := json.RawMessage(`{"$id":"file://` + dir + `/root.json","type":"object","properties":{"a":{"$ref":"secret.json"}}}`)
	if _, err := Compile("t/input", raw); !errors.Is(err, ErrExternalRef) {
		t.Fatalf("relative ref: %v", err)
	}
	// A $schema naming a file is refused as well.
	raw = json.RawMessage(`{"$schema":"file://` + local + `","type":"object"}`)
	if _, err := Compile("t/input", raw); err == nil {
		t.Fatal("$schema file:// compiled")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the compiler fetched %d network refs", n)
	}
}

func TestCompileAllowsInDocumentRefs(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/d"}},"$defs":{"d":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#s"}},"$defs":{"d":{"$anchor":"s","type":"string"}}}`,
		`{"$id":"https://example.com/root","type":"object","properties":{"a":{"$ref":"https://example.com/root#/$defs/d"}},"$defs":{"d":{"type":"string"}}}`,
		`{"$id":"https://example.com/root","type":"object","properties":{"a":{"$ref":"other"}},"$defs":{"d":{"$id":"other","type":"string"}}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
	} {
		s, err := Compile("t/input", json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if strings.Contains(raw, `"a"`) {
			if s.Validate(json.RawMessage(`{"a":"x"}`)) != nil || s.Validate(json.RawMessage(`{"a":1}`)) == nil {
				t.Fatalf("%s: ref not applied", raw)
			}
		}
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
