package signals

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The first message to a subagent is eve's subagent prompt
// (formatSubagentPrompt), byte for byte.
func TestSubagentPrompt(t *testing.T) {
	for _, c := range []struct{ name, description, message, want string }{
		{"researcher", "Researches a topic.", "tidal power",
			"You are the subagent \"researcher\".\nDescription: Researches a topic.\n\nThe caller delegated the following task to you. Complete it and return the result directly. The caller may send follow-up messages after you answer.\n\nCaller message:\ntidal power"},
		{"x", " ", "hi",
			"You are the subagent \"x\".\n\nThe caller delegated the following task to you. Complete it and return the result directly. The caller may send follow-up messages after you answer.\n\nCaller message:\nhi"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, SubagentPrompt(c.name, c.description, c.message)); diff != "" {
				t.Errorf("prompt (-want +got):\n%s", diff)
			}
		})
	}
}
