package approval

import (
	"testing"

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
