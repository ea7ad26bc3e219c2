package sessions

import (
	"fmt"
	"testing"

	"github.com/eve-temporal/eve/signals"
)

func TestTurnHintsAreBounded(t *testing.T) {
	var h turnHints
	for i := range maxTurnHints + 500 {
		id := fmt.Sprintf("ses_%d", i)
		h.put(id, signals.TurnWorkflowID(id, "turn_0"))
	}
	if n := len(h.m); n != maxTurnHints {
		t.Fatalf("%d hints held, want at most %d", n, maxTurnHints)
	}
	last := fmt.Sprintf("ses_%d", maxTurnHints+499)
	if wid, ok := h.get(last); !ok || wid != last+"/turn_0" {
		t.Fatalf("newest hint = %q, %v", wid, ok)
	}
	// Dropping a stale guess keeps a newer one learned meanwhile.
	h.put(last, last+"/turn_1")
	h.drop(last, last+"/turn_0")
	if wid, _ := h.get(last); wid != last+"/turn_1" {
		t.Fatalf("hint after dropping an older guess = %q", wid)
	}
	h.drop(last, last+"/turn_1")
	if _, ok := h.get(last); ok {
		t.Fatal("hint kept after it was dropped")
	}
}
