package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
)

// MaxWireLen is the longest wire name providers accept.
const MaxWireLen = 64

// hashLen is the number of hex digits in a wire name's hash suffix.
const hashLen = 8

// BuildNameMap assigns each canonical name a wire name matching
// ^[a-zA-Z0-9_-]{1,64}$. The map depends only on the set of names (not their
// order or repetitions), is collision-free, and round-trips:
// WireToCanonical[CanonicalToWire[n]] == n for every n.
//
// The algorithm (docs/catalog.md):
//  1. candidate: every byte outside [a-zA-Z0-9_-] becomes '_'
//     ("gmail.send_email" -> "gmail_send_email"); an empty result becomes "tool".
//  2. a candidate longer than 64 is cut to 55 bytes + "_" + the first 8 hex
//     digits of SHA-256(canonical name).
//  3. names sharing a candidate are sorted; the first keeps it, the others
//     (and any name whose candidate another name already holds) get
//     prefix(55) + "_" + hash8(name), rehashing with a counter ("name#1",
//     "name#2", ...) in the unlikely case that is taken too.
func BuildNameMap(canonical []string) ToolNameMap {
	names := append([]string(nil), canonical...)
	sort.Strings(names)
	names = dedupeSorted(names)

	m := ToolNameMap{
		CanonicalToWire: make(map[string]string, len(names)),
		WireToCanonical: make(map[string]string, len(names)),
	}
	cands := make([]string, len(names))
	owner := make(map[string]int, len(names)) // candidate -> index of first (sorted) name
	for i, n := range names {
		c := wireCandidate(n)
		cands[i] = c
		if _, taken := owner[c]; !taken {
			owner[c] = i
		}
	}
	// Pass 1: every candidate's first owner keeps it.
	for c, i := range owner {
		m.CanonicalToWire[names[i]] = c
		m.WireToCanonical[c] = names[i]
	}
	// Pass 2: the rest, in sorted order, get hashed names not yet taken.
	for i, n := range names {
		if owner[cands[i]] == i {
			continue
		}
		for k := 0; ; k++ {
			key := n
			if k > 0 {
				key = n + "#" + strconv.Itoa(k)
			}
			w := hashedWire(cands[i], key)
			if _, taken := m.WireToCanonical[w]; !taken {
				m.CanonicalToWire[n] = w
				m.WireToCanonical[w] = n
				break
			}
		}
	}
	return m
}

func dedupeSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// wireCandidate is steps 1 and 2 of BuildNameMap.
func wireCandidate(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !isWireByte(c) {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" {
		s = "tool"
	}
	if len(s) > MaxWireLen {
		return hashedWire(s, name)
	}
	return s
}

// hashedWire is prefix(base, 55) + "_" + hex(SHA-256(key))[:8].
func hashedWire(base, key string) string {
	sum := sha256.Sum256([]byte(key))
	prefix := base
	if max := MaxWireLen - 1 - hashLen; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

func isWireByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
