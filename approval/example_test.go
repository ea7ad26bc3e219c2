package approval_test

import (
	"context"
	"fmt"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
)

// A four-eyes policy: the requester may not approve their own call.
func ExamplePolicy_WithResponse() {
	p := approval.Always().WithResponse(func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
		if c.Response.Decision == approval.DecisionApprove && approval.SamePrincipal(c.Response.Principal, c.Request.Principal) {
			return approval.Reject("A second person must approve refunds."), nil
		}
		return approval.Allow(), nil
	})
	alice := &auth.Principal{ID: "alice", Type: "user"}
	carol := &auth.Principal{ID: "carol", Type: "user"}
	for _, who := range []*auth.Principal{alice, carol} {
		v, _ := p.EvaluateResponse(context.Background(), approval.ResponseContext{
			Request:  approval.Request{ToolName: "refund", Principal: alice},
			Response: approval.Response{Decision: approval.DecisionApprove, Principal: who},
		})
		fmt.Println(who.ID, v.Status, v.Reason)
	}
	// Output:
	// alice rejected A second person must approve refunds.
	// carol allowed
}

func ExamplePolicy_WithPrompt() {
	p := approval.Always().WithPrompt(func(c approval.PromptContext) string {
		var in struct {
			ChargeID string  `json:"chargeId"`
			Amount   float64 `json:"amount"`
		}
		if c.Input(&in) != nil {
			return ""
		}
		return fmt.Sprintf("Refund $%.2f for charge %s?", in.Amount, in.ChargeID)
	})
	fmt.Println(p.Prompt(approval.PromptContext{ToolName: "refund", ToolInput: []byte(`{"chargeId":"ch_42","amount":25}`)}))
	// Output: Refund $25.00 for charge ch_42?
}

// Without a response policy only the requester may settle.
func ExampleMayRespond() {
	alice := &auth.Principal{ID: "alice", Type: "user"}
	fmt.Println(approval.MayRespond(alice, alice), approval.MayRespond(alice, &auth.Principal{ID: "bob", Type: "user"}), approval.MayRespond(nil, alice))
	// Output: true false true
}
