package workflows

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
)

// The contract package and the workflows agree: a starter sends
// signals.SessionInput or signals.ExecutionInput, and the workflow decodes
// its own input type from the same JSON. Every field of the contract's
// type is the workflow's, with the same type and JSON name; the
// session's adds the state only the workflow writes.
func TestInputsMatchTheContract(t *testing.T) {
	for _, c := range []struct {
		name           string
		contract, ours reflect.Type
		sameFields     bool // no field of the workflow's own
	}{
		{"session", reflect.TypeFor[signals.SessionInput](), reflect.TypeFor[sessionInput](), false},
		// The plan is encoded in the contract, decoded in the workflow.
		{"execution", reflect.TypeFor[signals.ExecutionInput](), reflect.TypeFor[executionInput](), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.contract.NumField() {
				f := c.contract.Field(i)
				g, ok := c.ours.FieldByName(f.Name)
				switch {
				case !ok:
					t.Errorf("%s.%s is missing from %s", c.contract, f.Name, c.ours)
				case g.Tag.Get("json") != f.Tag.Get("json"):
					t.Errorf("%s.%s: JSON %q, the contract's %q", c.ours, f.Name, g.Tag.Get("json"), f.Tag.Get("json"))
				case g.Type != f.Type && f.Name != "Plan":
					t.Errorf("%s.%s: type %s, the contract's %s", c.ours, f.Name, g.Type, f.Type)
				}
			}
			if c.sameFields && c.ours.NumField() != c.contract.NumField() {
				t.Errorf("%s has %d fields, %s %d", c.ours, c.ours.NumField(), c.contract, c.contract.NumField())
			}
		})
	}
}

// A session started with the contract's input decodes as the workflow's,
// with no state carried over.
func TestSessionInputDecodes(t *testing.T) {
	raw, err := json.Marshal(signals.SessionInput{SessionID: "ses_1", Initiator: &auth.Principal{ID: "alice", Type: auth.TypeUser}})
	if err != nil {
		t.Fatal(err)
	}
	var got sessionInput
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := sessionInput{SessionID: "ses_1", Initiator: &auth.Principal{ID: "alice", Type: auth.TypeUser}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded %s (-want +got):\n%s", raw, diff)
	}
}

// Starters send signals.ExecutionInput; the workflow decodes its own
// executionInput from the same JSON, so every field survives, and it
// encodes back to the same bytes.
func TestExecutionInputMatchesContract(t *testing.T) {
	p := work.CallPlan{Call: model.ToolCall{ID: signals.ExecutionCallID, Name: "echo", Input: json.RawMessage(`{"a":1}`)}, Known: true, Kind: "authored", Approval: "never", Timeout: 5}
	pj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	in := signals.ExecutionInput{ExecutionID: "exec_x", Tool: "demo.echo", UserID: "u", ConnectionID: "c", IdempotencyKey: "k",
		InputHash: "h", Caller: &auth.Principal{ID: "u", Type: "user"}, Plan: pj, SkipApproval: true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got executionInput
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := executionInput{ExecutionID: "exec_x", Tool: "demo.echo", UserID: "u", ConnectionID: "c", IdempotencyKey: "k",
		InputHash: "h", Caller: &auth.Principal{ID: "u", Type: "user"}, Plan: p, SkipApproval: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	back, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), string(back)); diff != "" {
		t.Errorf("the workflow's input encodes unlike the contract's (-contract +workflow):\n%s", diff)
	}
}
