package protocol

import (
	"encoding/json"
	"testing"
)

func event(typ string, data any) Event {
	b, _ := json.Marshal(data)
	return Event{Type: typ, Data: b}
}

func openIDs(in *Inputs) []string {
	var ids []string
	for _, r := range in.Open() {
		ids = append(ids, r.RequestID)
	}
	return ids
}

// A request is open until a valid answer settles it or its turn ends; the
// log folds to the same state whole or page by page.
func TestInputsFold(t *testing.T) {
	step := func(turn string) StepRef { return StepRef{TurnID: turn} }
	log := []Event{
		event(InputRequested, InputRequestedData{Requests: []InputRequest{{RequestID: "a"}, {RequestID: "b"}}, StepRef: step("turn_0")}),
		event(InputResolved, InputResolvedData{Resolutions: []InputResolution{{RequestID: "a", Outcome: OutcomeInvalid}}}),
		event(InputResolved, InputResolvedData{Resolutions: []InputResolution{{RequestID: "b", Outcome: OutcomeApproved}}}),
		event(TurnCompleted, TurnRef{TurnID: "turn_0"}),
		event(InputRequested, InputRequestedData{Requests: []InputRequest{{RequestID: "c"}}, StepRef: step("turn_1")}),
		event(InputRequested, InputRequestedData{Requests: []InputRequest{{RequestID: "d"}}, StepRef: step("turn_1")}),
	}
	var whole Inputs
	whole.AddEvents(0, log)
	var paged Inputs
	paged.AddEvents(0, log[:2])
	if got := openIDs(&paged); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("after an invalid answer: open %v, want a b", got)
	}
	paged.AddEvents(2, log[2:5])
	paged.AddEvents(5, log[5:])
	for name, in := range map[string]*Inputs{"whole": &whole, "paged": &paged} {
		got := openIDs(in)
		if len(got) != 2 || got[0] != "c" || got[1] != "d" {
			t.Errorf("%s: open %v, want c d", name, got)
		}
		if a, ok := in.Asked("a"); !ok || a.TurnID != "turn_0" || a.Index != 0 || in.Settled("a") || !in.TurnEnded("turn_0") {
			t.Errorf("%s: a = %+v, settled %v", name, a, in.Settled("a"))
		}
		if d, _ := in.Asked("d"); d.Index != 5 || !in.Settled("b") {
			t.Errorf("%s: d at %d, b settled %v", name, d.Index, in.Settled("b"))
		}
	}
	var empty Inputs
	if _, ok := empty.Asked("a"); ok || len(empty.Open()) != 0 {
		t.Fatal("the zero Inputs is not empty")
	}
}
