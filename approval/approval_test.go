package approval

import "testing"

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
