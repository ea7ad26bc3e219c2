package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
)

func noop(*Context, json.RawMessage) (any, error) { return nil, nil }

func TestRegistrationErrorsNameToolAndRule(t *testing.T) {
	cases := []struct {
		tool *Tool
		want []string
	}{
		{&Tool{Name: "bad schema", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integr"}}}`), Execute: noop},
			[]string{`register tool "bad schema"`, "name must match", "input schema: invalid JSON Schema", "/properties/n/type"}},
		{&Tool{Name: "x", Description: "d", InputSchema: json.RawMessage(`{"type":"string"}`), Execute: noop},
			[]string{`register tool "x"`, `root must be {"type":"object"}`}},
		{&Tool{Name: "x", InputSchema: json.RawMessage(`{"type":"object"`), Execute: noop},
			[]string{"description is required", "not valid JSON"}},
		{&Tool{Name: "x", Description: "d"},
			[]string{"input schema is required", "Execute is required"}},
		{&Tool{Name: strings.Repeat("a", 65), Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop},
			[]string{"at most 64"}},
		{&Tool{Name: "x", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"minimum":"ten"}`), Execute: noop},
			[]string{"output schema"}},
	}
	for _, c := range cases {
		err := NewRegistry().Register(c.tool)
		if err == nil {
			t.Fatalf("tool %q registered", c.tool.Name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		var re *RegistrationError
		if !errors.As(err, &re) {
			t.Errorf("error %T is not a RegistrationError", err)
		}
	}
}

func TestDuplicateAndAtomicRegistration(t *testing.T) {
	r := NewRegistry()
	ok := &Tool{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop}
	if err := r.Register(ok); err != nil {
		t.Fatal(err)
	}
	dup := &Tool{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop}
	fresh := &Tool{Name: "b", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: noop}
	err := r.Register(fresh, dup)
	if err == nil || !strings.Contains(err.Error(), "duplicate name") {
		t.Fatalf("duplicate: %v", err)
	}
	if _, added := r.Get("b"); added {
		t.Fatal("a failed Register must add nothing")
	}
}

func TestFuncDerivesSchemasAndValidates(t *testing.T) {
	type In struct {
		City string `json:"city"`
		Days int    `json:"days,omitempty"`
	}
	type Out struct {
		Temp int `json:"temp"`
	}
	tool := Func("forecast", "Forecast.", func(ctx *Context, in In) (Out, error) { return Out{Temp: len(in.City)}, nil })
	if err := NewRegistry().Register(tool); err != nil {
		t.Fatal(err)
	}
	if err := tool.ValidateInput(json.RawMessage(`{"city":"Oslo"}`)); err != nil {
		t.Fatalf("valid input: %v", err)
	}
	err := tool.ValidateInput(json.RawMessage(`{"days":"3"}`))
	if err == nil || !strings.Contains(err.Error(), "city") || !strings.Contains(err.Error(), "/days") {
		t.Fatalf("invalid input error = %v", err)
	}
	if err := tool.ValidateOutput(json.RawMessage(`{"temp":"hot"}`)); err == nil {
		t.Fatal("output breaking the schema accepted")
	}
	if got := (&Tool{Name: "refund_charge"}).DisplayTitle(); got != "Refund Charge" {
		t.Fatalf("title = %q", got)
	}
}

func TestClientAndDelegatedDefinitions(t *testing.T) {
	c := DefineClient("pick", "Pick.", json.RawMessage(`{"type":"object"}`), Client{Request: InputRequest{Prompt: "Pick", Options: nil, Display: "select"}})
	if err := NewRegistry().Register(c); err == nil || !strings.Contains(err.Error(), "display select needs options") {
		t.Fatalf("client tool without options: %v", err)
	}
	d := DefineDelegated("job", "Job.", json.RawMessage(`{"type":"object"}`), nil, Delegated{})
	d.Local = true
	if err := NewRegistry().Register(d); err == nil || !strings.Contains(err.Error(), "Delegate is required") || !strings.Contains(err.Error(), "cannot be Local") {
		t.Fatalf("delegated tool: %v", err)
	}
	q := AskQuestion()
	if err := NewRegistry().Register(q); err != nil {
		t.Fatal(err)
	}
	r, err := q.RequestFor(json.RawMessage(`{"question":"Colour?","options":["red","blue"]}`))
	if err != nil || r.Display != "select" || !r.AllowFreeform || r.Options[1].ID != "blue" {
		t.Fatalf("ask_question request = %+v, %v", r, err)
	}
}

// Only a policy that asks a person can be editable.
func TestEditableApprovalNeedsAPerson(t *testing.T) {
	mk := func(p approval.Policy) *Tool {
		return &Tool{Name: "pay", Description: "Pay.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Execute: func(*Context, json.RawMessage) (any, error) { return nil, nil }, Approval: p}
	}
	for _, p := range []approval.Policy{approval.Always().Editable(), approval.Once().Editable(),
		approval.Custom(func(approval.Context) approval.Status { return approval.Ask() }).Editable()} {
		if err := NewRegistry().Register(mk(p)); err != nil {
			t.Errorf("%s, editable: %v", p.Kind(), err)
		}
	}
	if err := NewRegistry().Register(mk(approval.Never().Editable())); err == nil || !strings.Contains(err.Error(), "editable approval needs a policy that asks a person") {
		t.Errorf("an editable Never registered: %v", err)
	}
	client := DefineClient("pick", "Pick.", json.RawMessage(`{"type":"object","properties":{}}`), Client{Request: InputRequest{Prompt: "Pick"}})
	client.Approval = approval.Always().Editable()
	if err := NewRegistry().Register(client); err == nil || !strings.Contains(err.Error(), "editable") {
		t.Errorf("an editable client tool registered: %v", err)
	}
}

// A heartbeat without details repeats the last checkpoint, so a retried
// attempt finds it; LastHeartbeat reads what the runtime installed.
func TestCheckpointIsRepeated(t *testing.T) {
	var got [][]any
	ctx := NewContext(context.Background(), auth.Session{ID: "s"}, "t", "c", "tool", 1, func(d ...any) { got = append(got, d) })
	ctx.Heartbeat()
	ctx.Checkpoint("task-7")
	ctx.Heartbeat()
	ctx.Heartbeat("progress")
	if len(got) != 4 || len(got[0]) != 0 || got[1][0] != "task-7" || got[2][0] != "task-7" || got[3][0] != "progress" {
		t.Fatalf("heartbeats: %v", got)
	}
	var v string
	if ctx.LastHeartbeat(&v) {
		t.Fatal("no earlier attempt: nothing to read")
	}
	ctx.SetLastHeartbeat(func(p any) error { *(p.(*string)) = "task-7"; return nil })
	if !ctx.LastHeartbeat(&v) || v != "task-7" {
		t.Fatalf("LastHeartbeat = %q", v)
	}
	stop := make(chan struct{})
	ctx.SetWorkerStop(stop)
	if ctx.WorkerStopping() {
		t.Fatal("stopping before the channel closed")
	}
	close(stop)
	if !ctx.WorkerStopping() {
		t.Fatal("not stopping after the channel closed")
	}
}

// HeartbeatNow sends the last checkpoint through what the runtime
// installed (heartbeats past Temporal's throttle), and is Heartbeat
// without it; copies of a Context share its checkpoint.
func TestHeartbeatNow(t *testing.T) {
	var throttled, now [][]any
	ctx := NewContext(context.Background(), auth.Session{ID: "s"}, "t", "c", "tool", 1, func(d ...any) { throttled = append(throttled, d) })
	ctx.Checkpoint("task-7")
	ctx.HeartbeatNow()
	if len(throttled) != 2 || throttled[1][0] != "task-7" {
		t.Fatalf("without a runtime HeartbeatNow is Heartbeat: %v", throttled)
	}
	ctx.SetHeartbeatNow(func(d ...any) { now = append(now, d) })
	inner := *ctx
	inner.Checkpoint("task-8")
	ctx.HeartbeatNow()
	ctx.Heartbeat()
	if len(now) != 1 || now[0][0] != "task-8" || throttled[len(throttled)-1][0] != "task-8" {
		t.Fatalf("sent at once %v, throttled %v; want the copy's checkpoint task-8 in both", now, throttled)
	}
}
