package catalog_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eve-temporal/eve/catalog"
)

// Schemas never load anything from outside themselves: not a local file,
// not a network URL.
func TestSchemaRefusesFileAndNetworkRefs(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(local, []byte(`{"type":"string","enum":["top secret"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()

	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cases := []struct {
		ref    string
		input  bool
		schema string
	}{
		{"file://" + local, true, `{"type":"object","properties":{"a":{"$ref":` + q("file://"+local) + `}}}`},
		{srv.URL + "/s.json", true, `{"type":"object","properties":{"a":{"$ref":` + q(srv.URL+"/s.json") + `}}}`},
		{"file://" + local, false, `{"type":"object","properties":{"a":{"$ref":` + q("file://"+local) + `}}}`},
		{"file://" + local, true, `{"$id":` + q("file://"+dir+"/root.json") + `,"type":"object","properties":{"a":{"$ref":"secret.json"}}}`},
	}
	for _, c := range cases {
		d := valid("x.a")
		rule := catalog.RuleInputRef
		if c.input {
			d.InputSchema = json.RawMessage(c.schema)
		} else {
			d.OutputSchema = json.RawMessage(c.schema)
			rule = catalog.RuleOutputRef
		}
		le := loadErr(t, d)
		if !le.Has("x.a", rule) {
			t.Fatalf("%s: %v", c.schema, le)
		}
		msg := le.Error()
		if !strings.Contains(msg, c.ref) || !strings.Contains(msg, "self-contained") || strings.Contains(msg, "top secret") {
			t.Fatalf("%s: %s", c.schema, msg)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the compiler fetched %d network refs", n)
	}
}
