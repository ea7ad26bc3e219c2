package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMaxOutputBytes(t *testing.T) {
	mk := func(name string, n int) *Tool {
		return &Tool{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop, MaxOutputBytes: n}
	}
	neg := mk("read_file", -1)
	err := NewRegistry().Register(neg)
	var re *RegistrationError
	if err == nil || !errors.As(err, &re) || re.Tool != "read_file" ||
		!strings.Contains(err.Error(), `register tool "read_file"`) || !strings.Contains(err.Error(), "MaxOutputBytes -1 must not be negative") {
		t.Fatalf("negative MaxOutputBytes: %v", err)
	}
	def, big := mk("a", 0), mk("b", 2<<20)
	if err := NewRegistry().Register(def, big); err != nil {
		t.Fatal(err)
	}
	if DefaultMaxOutputBytes != 1<<20 || def.EffectiveMaxOutputBytes() != DefaultMaxOutputBytes || big.EffectiveMaxOutputBytes() != 2<<20 {
		t.Fatalf("effective limits: %d %d", def.EffectiveMaxOutputBytes(), big.EffectiveMaxOutputBytes())
	}
}
