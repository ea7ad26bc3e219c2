package eve_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// The contract package and the workflows agree: a session started with
// signals.SessionInput reads the same fields in the workflow's own input
// type, which adds the state only the workflow writes.
func TestSessionInputMatchesTheWorkflows(t *testing.T) {
	start := reflect.TypeFor[signals.SessionInput]()
	wf := reflect.TypeFor[workflows.SessionInput]()
	for i := range start.NumField() {
		f := start.Field(i)
		g, ok := wf.FieldByName(f.Name)
		if !ok || g.Type != f.Type || g.Tag.Get("json") != f.Tag.Get("json") {
			t.Errorf("workflows.SessionInput.%s does not match signals.SessionInput.%s (%s `%s`)", f.Name, f.Name, f.Type, f.Tag)
		}
	}
	raw, err := json.Marshal(signals.SessionInput{SessionID: "ses_1", Initiator: &auth.Principal{ID: "alice", Type: auth.TypeUser}})
	if err != nil {
		t.Fatal(err)
	}
	var in workflows.SessionInput
	if err := json.Unmarshal(raw, &in); err != nil || in.SessionID != "ses_1" || in.Initiator.ID != "alice" || in.State != nil {
		t.Fatalf("decoded %s as %+v, %v", raw, in, err)
	}
}

// The workflows' constants are the contract's.
func TestWorkflowConstantsAreTheContracts(t *testing.T) {
	if workflows.Version != signals.Version || workflows.MaxMessageBytes != signals.MaxMessageBytes {
		t.Fatalf("workflows %s/%d, signals %s/%d", workflows.Version, workflows.MaxMessageBytes, signals.Version, signals.MaxMessageBytes)
	}
}
