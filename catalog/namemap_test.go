package catalog_test

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/catalog"
)

func checkNameMap(t *testing.T, names []string, m catalog.ToolNameMap) {
	t.Helper()
	distinct := map[string]bool{}
	for _, n := range names {
		distinct[n] = true
	}
	if len(m.CanonicalToWire) != len(distinct) || len(m.WireToCanonical) != len(distinct) {
		t.Fatalf("map sizes %d/%d for %d distinct names (a collision?)", len(m.CanonicalToWire), len(m.WireToCanonical), len(distinct))
	}
	for n := range distinct {
		w, ok := m.CanonicalToWire[n]
		if !ok {
			t.Fatalf("%q has no wire name", n)
		}
		if !catalog.WirePattern.MatchString(w) {
			t.Fatalf("wire name %q (for %q) does not match %s", w, n, catalog.WirePattern)
		}
		if back := m.WireToCanonical[w]; back != n {
			t.Fatalf("round trip %q -> %q -> %q", n, w, back)
		}
	}
}

func TestNameMapExamples(t *testing.T) {
	long := "toolkit." + strings.Repeat("very_long_tool_name_", 5)
	m := catalog.BuildNameMap([]string{"gmail.send_email", "github.create-issue", "app.getWeather", long})
	for canon, want := range map[string]string{
		"gmail.send_email":    "gmail_send_email",
		"github.create-issue": "github_create-issue",
		"app.getWeather":      "app_getWeather",
	} {
		if got := m.CanonicalToWire[canon]; got != want {
			t.Errorf("%s -> %s; want %s", canon, got, want)
		}
	}
	w := m.CanonicalToWire[long]
	if len(w) != 64 || !strings.HasPrefix(w, "toolkit_very_long_tool_name_very_long") || w[55] != '_' {
		t.Errorf("long name -> %q (%d)", w, len(w))
	}
	checkNameMap(t, []string{"gmail.send_email", "github.create-issue", "app.getWeather", long}, m)
}

func TestNameMapCollisions(t *testing.T) {
	// Both sanitize to "a_b_c"; the first in sorted order keeps it.
	names := []string{"a_b.c", "a.b_c"}
	m := catalog.BuildNameMap(names)
	checkNameMap(t, names, m)
	if m.CanonicalToWire["a.b_c"] != "a_b_c" {
		t.Errorf("a.b_c -> %s; want a_b_c", m.CanonicalToWire["a.b_c"])
	}
	if w := m.CanonicalToWire["a_b.c"]; !strings.HasPrefix(w, "a_b_c_") || len(w) != len("a_b_c_")+8 {
		t.Errorf("a_b.c -> %s; want a_b_c_<hash8>", w)
	}
	// Independent of order.
	m2 := catalog.BuildNameMap([]string{"a.b_c", "a_b.c", "a.b_c"})
	for k, v := range m.CanonicalToWire {
		if m2.CanonicalToWire[k] != v {
			t.Errorf("order changed %s: %s vs %s", k, v, m2.CanonicalToWire[k])
		}
	}
	// A name whose candidate is another name's hashed form.
	tricky := []string{"a_b.c", "a.b_c", m.CanonicalToWire["a_b.c"]}
	checkNameMap(t, tricky, catalog.BuildNameMap(tricky))
	// Long names that share their first 64 characters.
	prefix := "kit." + strings.Repeat("x", 70)
	longs := []string{prefix + "1", prefix + "2", prefix + "3"}
	checkNameMap(t, longs, catalog.BuildNameMap(longs))
	// Odd input: empty, non-ASCII, only punctuation.
	odd := []string{"", "tool", "é.ü", "_.__", "...", "..", "a..b"}
	checkNameMap(t, odd, catalog.BuildNameMap(odd))
}

func TestNameMapLarge(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	alphabet := "ab_.-X"
	var names []string
	for i := 0; i < 5000; i++ {
		n := make([]byte, 1+r.Intn(90))
		for j := range n {
			n[j] = alphabet[r.Intn(len(alphabet))]
		}
		names = append(names, string(n))
	}
	m := catalog.BuildNameMap(names)
	checkNameMap(t, names, m)
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	m2 := catalog.BuildNameMap(names)
	for k, v := range m.CanonicalToWire {
		if m2.CanonicalToWire[k] != v {
			t.Fatalf("shuffled input changed %q: %q vs %q", k, v, m2.CanonicalToWire[k])
		}
	}
}

// FuzzNameMap checks that the name map is deterministic (independent of
// input order and repetition), collision-free, round-trips, and only emits
// names matching ^[a-zA-Z0-9_-]{1,64}$.
func FuzzNameMap(f *testing.F) {
	f.Add("gmail.send_email\ngithub.create_issue\nslack.send_message", int64(1))
	f.Add("a_b.c\na.b_c\na_b_c", int64(2))
	f.Add("kit."+strings.Repeat("y", 80)+"\nkit."+strings.Repeat("y", 81), int64(3))
	f.Add("\n\n.\né", int64(4))
	f.Fuzz(func(t *testing.T, blob string, seed int64) {
		names := strings.Split(blob, "\n")
		m := catalog.BuildNameMap(names)
		checkNameMap(t, names, m)

		shuffled := append([]string(nil), names...)
		r := rand.New(rand.NewSource(seed))
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, names[r.Intn(len(names))])
		m2 := catalog.BuildNameMap(shuffled)
		if len(m2.CanonicalToWire) != len(m.CanonicalToWire) {
			t.Fatalf("sizes differ after shuffle")
		}
		for k, v := range m.CanonicalToWire {
			if m2.CanonicalToWire[k] != v {
				t.Fatalf("not deterministic: %q -> %q and %q", k, v, m2.CanonicalToWire[k])
			}
		}
		// Names that are already valid wire names without dots and unique
		// after sanitizing keep themselves.
		for _, n := range names {
			if catalog.WirePattern.MatchString(n) {
				if w := m.CanonicalToWire[n]; w != n {
					// Allowed only if another name sanitizes to n and sorts first.
					other, ok := m.WireToCanonical[n]
					if !ok || other >= n {
						t.Fatalf("valid wire name %q mapped to %q", n, w)
					}
				}
			}
		}
	})
}
