package protocol

import (
	"encoding/json"
	"testing"
)

func TestDiffTrajectories(t *testing.T) {
	c := func(turn, tool, input string) RecordedCall {
		return RecordedCall{TurnID: turn, Tool: tool, Input: json.RawMessage(input)}
	}
	rec := []RecordedCall{c("turn_0", "a", `{"x":1,"y":2}`), c("turn_0", "b", `{}`), c("turn_1", "c", `{"z":"q"}`)}
	head := "the trajectory differs (-recorded +replayed: turn, tool, input):\n"
	for _, tc := range []struct {
		name string
		got  []RecordedCall
		want string
	}{
		{"same, keys in another order and spaces", []RecordedCall{c("turn_0", "a", `{"y": 2, "x": 1}`), c("turn_0", "b", `{}`), c("turn_1", "c", `{"z":"q"}`)}, ""},
		{"another input", []RecordedCall{c("turn_0", "a", `{"x":1,"y":3}`), c("turn_0", "b", `{}`), c("turn_1", "c", `{"z":"q"}`)},
			head + "- turn_0 a {\"x\":1,\"y\":2}\n+ turn_0 a {\"x\":1,\"y\":3}\n  turn_0 b {}\n  turn_1 c {\"z\":\"q\"}\n"},
		{"another order", []RecordedCall{c("turn_0", "b", `{}`), c("turn_0", "a", `{"x":1,"y":2}`), c("turn_1", "c", `{"z":"q"}`)},
			head + "- turn_0 a {\"x\":1,\"y\":2}\n  turn_0 b {}\n+ turn_0 a {\"x\":1,\"y\":2}\n  turn_1 c {\"z\":\"q\"}\n"},
		{"a call missing, one extra", []RecordedCall{c("turn_0", "a", `{"x":1,"y":2}`), c("turn_1", "c", `{"z":"q"}`), c("turn_1", "d", `null`)},
			head + "  turn_0 a {\"x\":1,\"y\":2}\n- turn_0 b {}\n  turn_1 c {\"z\":\"q\"}\n+ turn_1 d null\n"},
		{"nothing called", nil, head + "- turn_0 a {\"x\":1,\"y\":2}\n- turn_0 b {}\n- turn_1 c {\"z\":\"q\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DiffTrajectories(rec, tc.got); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
