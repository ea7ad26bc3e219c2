package workflows

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
)

// Starters send signals.ExecutionInput; the workflow decodes its own
// ExecutionInput from the same JSON, so every field must survive.
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
	var got ExecutionInput
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := ExecutionInput{ExecutionID: "exec_x", Tool: "demo.echo", UserID: "u", ConnectionID: "c", IdempotencyKey: "k",
		InputHash: "h", Caller: &auth.Principal{ID: "u", Type: "user"}, Plan: p, SkipApproval: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	back, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(b) {
		t.Fatalf("the workflow's input encodes as\n%s\nthe contract's as\n%s", back, b)
	}
	if reflect.TypeOf(ExecutionInput{}).NumField() != reflect.TypeOf(signals.ExecutionInput{}).NumField() {
		t.Fatal("workflows.ExecutionInput and signals.ExecutionInput have different fields")
	}
}
