package approval

import (
	"context"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"

	"github.com/eve-temporal/eve/model"
)

func TestDecide(t *testing.T) {
	deny := Deny("not yours")
	for _, c := range []struct {
		kind         string
		approvedOnce bool
		custom       Status
		want         Status
	}{
		{"", false, Status{}, Skip()},
		{KindNever, false, Status{}, Skip()},
		{KindAlways, true, Status{}, Ask()},
		{KindOnce, false, Status{}, Ask()},
		{KindOnce, true, Status{}, Skip()},
		{KindCustom, false, deny, deny},
		{KindCustom, false, Approve(), Approve()},
		{KindCustom, true, Ask(), Ask()},
		{KindCustom, false, Status{}, Status{Type: UserApproval, Reason: ReasonPolicyFailed}},
		{KindCustom, false, Status{Type: "maybe"}, Status{Type: UserApproval, Reason: ReasonPolicyFailed}},
	} {
		if got := Decide(c.kind, c.approvedOnce, c.custom); got != c.want {
			t.Errorf("Decide(%q, %v, %+v) = %+v, want %+v", c.kind, c.approvedOnce, c.custom, got, c.want)
		}
	}
}

func TestParseReview(t *testing.T) {
	for _, c := range []struct {
		text, finish string
		want         string // verdict, or "" for an error
	}{
		{`{"verdict":"clear","reason":"ok"}`, "stop", VerdictClear},
		{"Sure. {\"verdict\": \"Caution\", \"reason\": \"big\"} Done.", "stop", VerdictCaution},
		{`{"verdict":"maybe"}`, "stop", ""},
		{`no json`, "stop", ""},
		{`{"verdict":"clear"`, "length", ""},
	} {
		r, err := ParseReview(model.Response{Text: c.text, FinishReason: c.finish})
		if (err == nil) != (c.want != "") || r.Verdict != c.want {
			t.Errorf("ParseReview(%q) = %+v, %v; want %q", c.text, r, err, c.want)
		}
	}
}

func TestEscalation(t *testing.T) {
	e := Escalation{After: time.Hour, Attribute: "group", Value: "managers"}
	manager := &auth.Principal{ID: "carol", Type: "user", Attributes: map[string]string{"group": "managers"}}
	if err := e.Check(); err != nil || !e.Includes(manager) || e.Includes(&auth.Principal{ID: "bob"}) || e.Includes(nil) || e.GroupLabel() != "group=managers" {
		t.Fatalf("escalation %+v: check %v", e, err)
	}
	for _, bad := range []Escalation{{After: 0}, {After: time.Hour, Attribute: "group"}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil", bad)
		}
	}
	p := Always().EscalateAfter(time.Hour, "group", "managers")
	if !p.HasResponsePolicy() {
		t.Fatal("an escalating policy must be judged")
	}
	alice := &auth.Principal{ID: "alice", Type: "user"}
	now := time.Now()
	for _, c := range []struct {
		escalated *time.Time
		who       *auth.Principal
		want      string
	}{{nil, manager, Rejected}, {&now, manager, Allowed}, {nil, alice, Allowed}, {&now, &auth.Principal{ID: "bob", Type: "user"}, Rejected}} {
		v, _ := p.EvaluateResponse(context.Background(), ResponseContext{Request: Request{Principal: alice, EscalatedAt: c.escalated}, Response: Response{Principal: c.who}})
		if v.Status != c.want {
			t.Errorf("escalated %v, %s: %s, want %s", c.escalated != nil, c.who.ID, v.Status, c.want)
		}
	}
	if d := Always().WithDeadline(func(PromptContext) time.Duration { panic("x") }).Deadline(PromptContext{}); d != 0 {
		t.Fatalf("a panicking deadline gave %v", d)
	}
}

// Once an approval escalated, its second group settles it without the
// app's own response policy being asked; every other answer, before or
// after the escalation, still goes to that policy (docs/approvals.md,
// docs/http-api.md say so).
func TestEscalatedGroupBypassesTheResponsePolicy(t *testing.T) {
	var asked []string
	p := Always().WithResponse(func(_ context.Context, c ResponseContext) (Verdict, error) {
		asked = append(asked, c.Response.Principal.ID)
		return Reject("the app's policy refuses everyone"), nil
	}).EscalateAfter(time.Hour, "role", "manager")
	alice := &auth.Principal{ID: "alice", Type: "user"}
	manager := &auth.Principal{ID: "carol", Type: "user", Attributes: map[string]string{"role": "manager"}}
	now := time.Now()
	tests := []struct {
		name      string
		escalated *time.Time
		who       *auth.Principal
		want      string
		asked     bool
	}{
		{name: "manager after the escalation", escalated: &now, who: manager, want: Allowed, asked: false},
		{name: "manager before it", who: manager, want: Rejected, asked: true},
		{name: "requester after it", escalated: &now, who: alice, want: Rejected, asked: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			v, err := p.EvaluateResponse(context.Background(), ResponseContext{Request: Request{Principal: alice, EscalatedAt: tc.escalated}, Response: Response{Principal: tc.who}})
			if err != nil || v.Status != tc.want || (len(asked) > 0) != tc.asked {
				t.Fatalf("verdict %s (%v), the app's policy asked: %v; want %s, asked %v", v.Status, err, asked, tc.want, tc.asked)
			}
		})
	}
}
