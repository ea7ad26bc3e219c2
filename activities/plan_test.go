package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/tools"
)

type callsModel struct{ calls []model.ToolCall }

func (callsModel) ID() string { return "test:calls" }
func (m callsModel) Step(context.Context, model.Request, model.Stream) (model.Response, error) {
	return model.Response{ToolCalls: m.calls}, nil
}

func planTools() []*tools.Tool {
	obj := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`)
	authored := &tools.Tool{Name: "count", Description: "Count.", InputSchema: obj, Idempotent: true, Timeout: 5 * time.Second,
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]int{}, nil }}
	refund := &tools.Tool{Name: "refund", Description: "Refund.", InputSchema: obj, Approval: approval.Always(), Local: true,
		Retry: &tools.RetryPolicy{InitialInterval: time.Second}, MaxOutputBytes: 4096,
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]int{}, nil }}
	report := tools.DefineDelegated("report", "Report.", obj, json.RawMessage(`{"type":"object"}`),
		tools.Delegated{Deadline: time.Hour, Delegate: func(*tools.Context, json.RawMessage, tools.Action) (tools.Pending, error) {
			return tools.Pending{}, nil
		}})
	return []*tools.Tool{authored, refund, report, tools.AskQuestion()}
}

// The plans a model step records are PlanCall's, and PlanCall's output for
// each kind of tool is pinned: plans are recorded in history, so what they
// hold for a tool and an input must not change.
func TestPlanCallPinned(t *testing.T) {
	reg := tools.NewRegistry()
	reg.MustRegister(planTools()...)
	calls := []model.ToolCall{
		{ID: "c1", Name: "count", Input: json.RawMessage(`{"n":2}`)},
		{ID: "c2", Name: "count", Input: json.RawMessage(`{"n":0}`)},
		{ID: "c3", Name: "refund", Input: json.RawMessage(`{"n":1}`)},
		{ID: "c4", Name: "report", Input: json.RawMessage(`{"n":1}`)},
		{ID: "c5", Name: "ask_question", Input: json.RawMessage(`{"question":"which?","options":["a"]}`)},
		{ID: "c6", Name: "nope", Input: json.RawMessage(`{}`)},
	}
	store, err := payloadstore.Open(context.Background(), "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := newActivitySet(Options{Tools: reg, Model: callsModel{calls}, Store: store})
	out, err := a.ModelStep(context.Background(), work.ModelStepInput{SessionID: "s", TurnID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"call":{"id":"c1","name":"count","input":{"n":2}},"known":true,"kind":"authored","approval":"never","title":"Count","maxOutputBytes":1048576,"timeout":5000000000,"retry":{"InitialInterval":1000000000,"BackoffCoefficient":2,"MaximumInterval":30000000000,"MaximumAttempts":3}}`,
		`{"call":{"id":"c2","name":"count","input":{"n":0}},"known":true,"kind":"authored","inputError":"invalid input for tool count: /n: minimum: got 0, want 1. Call it again with input that matches its input schema.","approval":"never","title":"Count","maxOutputBytes":1048576,"timeout":5000000000,"retry":{"InitialInterval":1000000000,"BackoffCoefficient":2,"MaximumInterval":30000000000,"MaximumAttempts":3}}`,
		`{"call":{"id":"c3","name":"refund","input":{"n":1}},"known":true,"kind":"authored","approval":"always","title":"Refund","maxOutputBytes":4096,"local":true,"timeout":60000000000,"retry":{"InitialInterval":1000000000,"BackoffCoefficient":0,"MaximumInterval":0,"MaximumAttempts":3}}`,
		`{"call":{"id":"c4","name":"report","input":{"n":1}},"known":true,"kind":"delegated","approval":"never","title":"Report","outputSchema":{"type":"object"},"deadline":3600000000000,"maxOutputBytes":1048576,"timeout":60000000000,"retry":{"InitialInterval":0,"BackoffCoefficient":0,"MaximumInterval":0,"MaximumAttempts":1}}`,
		`{"call":{"id":"c5","name":"ask_question","input":{"question":"which?","options":["a"]}},"known":true,"kind":"client","approval":"never","title":"Ask Question","request":{"prompt":"which?","display":"select","options":[{"id":"a","label":"a"}],"allowFreeform":true},"outputSchema":{"type":"object","properties":{"optionId":{"type":"string"},"text":{"type":"string"}},"additionalProperties":false},"maxOutputBytes":1048576,"timeout":60000000000,"retry":{"InitialInterval":0,"BackoffCoefficient":0,"MaximumInterval":0,"MaximumAttempts":1}}`,
		`{"call":{"id":"c6","name":"nope","input":{}},"known":false,"timeout":60000000000,"retry":{"InitialInterval":0,"BackoffCoefficient":0,"MaximumInterval":0,"MaximumAttempts":1}}`,
	}
	if len(out.Plans) != len(want) {
		t.Fatalf("%d plans", len(out.Plans))
	}
	for i, p := range out.Plans {
		tl, _ := reg.Get(calls[i].Name)
		direct := work.PlanCall(tl, calls[i])
		got, _ := json.Marshal(p)
		again, _ := json.Marshal(direct)
		if string(got) != want[i] || string(again) != want[i] {
			t.Errorf("plan %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
}

// An editable approval's plan carries the tool's input schema (the turn
// checks edits against it); a plain approval's does not.
func TestPlanCallEditable(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	pay := &tools.Tool{Name: "pay", Description: "Pay.", InputSchema: obj, Approval: approval.Always().Editable(),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { return map[string]int{}, nil }}
	if err := tools.NewRegistry().Register(pay); err != nil {
		t.Fatal(err)
	}
	p := work.PlanCall(pay, model.ToolCall{ID: "c1", Name: "pay", Input: json.RawMessage(`{"n":1}`)})
	if !p.Editable || string(p.InputSchema) != string(obj) {
		t.Fatalf("plan %+v", p)
	}
	if p := work.PlanCall(pay, model.ToolCall{ID: "c2", Name: "pay", Input: json.RawMessage(`{"n":"x"}`)}); p.Editable || p.InputSchema != nil || p.InputError == "" {
		t.Fatalf("plan of invalid input %+v", p)
	}
	for _, tl := range planTools() {
		if p := work.PlanCall(tl, model.ToolCall{ID: "c3", Name: tl.Name, Input: json.RawMessage(`{"n":1}`)}); p.Editable || p.InputSchema != nil {
			t.Fatalf("%s: plan %+v", tl.Name, p)
		}
	}
}
