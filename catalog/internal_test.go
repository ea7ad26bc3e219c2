package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestTokenize(t *testing.T) {
	cases := map[string][]string{
		"gmail.send_email":                {"gmail", "send", "email"},
		"sendEmail":                       {"send", "email"},
		"HTMLBody":                        {"html", "body"},
		"pageToken":                       {"page", "token"},
		"github.create-pull-request":      {"github", "create", "pull", "request"},
		"Search the user's emails":        {"search", "the", "user", "email"},
		"oauth2Token v2":                  {"oauth2", "token", "v2"},
		"replies, boxes, address, status": {"reply", "box", "address", "status"},
		"a b":                             nil,
	}
	for in, want := range cases {
		if got := tokenize(in, false); !reflect.DeepEqual(got, want) {
			t.Errorf("tokenize(%q) = %v; want %v", in, got, want)
		}
	}
	if got := tokenize("Search the user's emails", true); !reflect.DeepEqual(got, []string{"search", "user", "email"}) {
		t.Errorf("stop words kept: %v", got)
	}
}

func TestParseTreeKeepsOrderAndRejectsDuplicates(t *testing.T) {
	v, err := parseTree([]byte(` {"b":1,"a":[true,false,null,"x\u00e9\"",-1.5e3],"c":{}} `))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(marshalTree(v)); got != `{"b":1,"a":[true,false,null,"xé\"",-1.5e3],"c":{}}` {
		t.Fatalf("round trip: %s", got)
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":}`, `[1,]`, `{} {}`, ``} {
		if _, err := parseTree([]byte(bad)); err == nil {
			t.Errorf("parseTree(%q) accepted", bad)
		}
	}
}

// FuzzParseTree checks the ordered parser against encoding/json.
func FuzzParseTree(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"\u0041\n"}`, `[]`, `"x"`, `1e5`, `{"":{"":[]}}`, `  true `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		wantErr := dec.Decode(&want)
		if wantErr == nil && !json.Valid(data) {
			wantErr = errors.New("trailing data")
		}
		v, err := parseTree(data)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("parseTree accepted invalid JSON %q", data)
			}
			return
		}
		if err != nil {
			// Only duplicate keys may be refused beyond encoding/json.
			return
		}
		var got any
		dec = json.NewDecoder(bytes.NewReader(marshalTree(v)))
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("re-encoded tree is invalid: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parseTree(%q) = %#v; want %#v", data, got, want)
		}
	})
}

func TestStripOptionalNulls(t *testing.T) {
	root, _ := parseTree([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"o":{"$ref":"#/$defs/o"},"l":{"type":"array","items":{"$ref":"#/$defs/o"}}},"required":["a"],"$defs":{"o":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x"]}}}`))
	out, changed := stripOptionalNulls(root.(*object), json.RawMessage(`{"a":null,"b":null,"o":{"x":null,"y":null},"l":[{"x":1,"y":null}],"extra":null}`))
	if !changed || string(out) != `{"a":null,"o":{"x":null},"l":[{"x":1}],"extra":null}` {
		t.Fatalf("stripped %s (%v)", out, changed)
	}
}
