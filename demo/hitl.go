package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// RefundInput is refund_charge's input.
type RefundInput struct {
	ChargeID string  `json:"chargeId"`
	Amount   float64 `json:"amount"`
}

// RefundCharge refunds a charge; a person approves every call.
func RefundCharge() *tools.Tool {
	t := tools.Func("refund_charge", "Refund a charge. A person approves every refund.",
		func(ctx *tools.Context, in RefundInput) (map[string]any, error) {
			// The executor still sees who asked, so it can enforce authorization.
			return map[string]any{"refunded": in.Amount, "chargeId": in.ChargeID, "requestedBy": ctx.Session.Auth.Current.ID, "idempotencyKey": ctx.IdempotencyKey}, nil
		})
	t.InputSchema = json.RawMessage(`{"type":"object","properties":{"chargeId":{"type":"string","minLength":1},"amount":{"type":"number","exclusiveMinimum":0}},"required":["chargeId","amount"],"additionalProperties":false}`)
	t.OutputSchema = nil
	t.Approval = approval.Always().WithPrompt(func(c approval.PromptContext) string {
		var in RefundInput
		if c.Input(&in) != nil {
			return ""
		}
		return fmt.Sprintf("Refund $%.2f for charge %s?", in.Amount, in.ChargeID)
	})
	return t
}

// TransferInput is transfer_funds' input.
type TransferInput struct {
	To     string  `json:"to"`
	Amount float64 `json:"amount"`
}

// FourEyes is a response policy: someone other than the requester, with
// the attribute role=approver (or manager), must approve; anyone allowed
// on the session may cancel.
func FourEyes() approval.ResponsePolicy {
	return func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
		if c.Response.Decision == approval.DecisionCancel {
			return approval.Allow(), nil
		}
		if approval.SamePrincipal(c.Response.Principal, c.Request.Principal) {
			return approval.Reject("A second person must approve transfers."), nil
		}
		switch c.Response.Principal.Attr("role") {
		case "approver", "manager":
			return approval.Allow(), nil
		}
		return approval.Reject("Only approvers can approve transfers."), nil
	}
}

// TransferFunds moves money; a second person approves every call
// (FourEyes), and the tool reports who did.
func TransferFunds() *tools.Tool {
	t := tools.Func("transfer_funds", "Transfer funds. A second person approves every transfer.",
		func(ctx *tools.Context, in TransferInput) (map[string]any, error) {
			approver := ""
			if ctx.Approver != nil {
				approver = ctx.Approver.ID
			}
			return map[string]any{"transferred": in.Amount, "to": in.To, "requestedBy": ctx.Session.Auth.Current.ID, "approvedBy": approver}, nil
		})
	t.InputSchema = json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","minLength":1},"amount":{"type":"number","exclusiveMinimum":0}},"required":["to","amount"],"additionalProperties":false}`)
	t.OutputSchema = nil
	t.Approval = approval.Always().
		WithPrompt(func(c approval.PromptContext) string {
			var in TransferInput
			if c.Input(&in) != nil {
				return ""
			}
			return fmt.Sprintf("Transfer $%.2f to %s?", in.Amount, in.To)
		}).
		WithResponse(FourEyes())
	return t
}

// CreditInput is issue_credit's input.
type CreditInput struct {
	TenantID string  `json:"tenantId"`
	Amount   float64 `json:"amount"`
}

// TenantPolicy denies calls across tenants (with a reason the model sees)
// and asks a person above 1000.
func TenantPolicy() approval.Policy {
	return approval.Custom(func(c approval.Context) approval.Status {
		var in CreditInput
		if err := c.Input(&in); err != nil {
			return approval.Ask()
		}
		caller := c.Session.Auth.Current.Attr("tenantId")
		if caller == "" || caller != in.TenantID {
			return approval.Deny("Caller cannot access this tenant.")
		}
		if in.Amount > 1000 {
			return approval.Ask()
		}
		return approval.Skip()
	})
}

// IssueCredit credits a tenant's account under the tenant policy. Its
// approvals are editable: the reviewer may approve another amount, which
// the policy judges again (another tenant is still denied).
func IssueCredit() *tools.Tool {
	t := tools.Func("issue_credit", "Issue account credit to a tenant.",
		func(ctx *tools.Context, in CreditInput) (map[string]any, error) {
			if ctx.Session.Auth.Current.Attr("tenantId") != in.TenantID {
				// Enforced again in the executor: the policy is a gate, not authorization.
				return nil, tools.NonRetryable(fmt.Errorf("caller is not in tenant %s", in.TenantID))
			}
			return map[string]any{"credited": in.Amount, "tenantId": in.TenantID}, nil
		})
	t.InputSchema = json.RawMessage(`{"type":"object","properties":{"tenantId":{"type":"string","minLength":1},"amount":{"type":"number","exclusiveMinimum":0}},"required":["tenantId","amount"],"additionalProperties":false}`)
	t.OutputSchema = nil
	t.Approval = TenantPolicy().Editable()
	return t
}

// ChoosePlan is a client tool: the user picks a plan in the app.
func ChoosePlan() *tools.Tool {
	return tools.DefineClient("choose_plan", "Ask the user to choose a plan.",
		json.RawMessage(`{"type":"object","properties":{"accountId":{"type":"string"}},"required":["accountId"],"additionalProperties":false}`),
		tools.Client{Request: tools.InputRequest{
			Prompt:  "Choose a plan",
			Display: protocol.DisplaySelect,
			Options: []protocol.InputOption{
				{ID: "basic", Label: "Basic"},
				{ID: "pro", Label: "Pro", Style: "primary"},
			},
		}})
}

// PickAddons is a multi-select client tool.
func PickAddons() *tools.Tool {
	return tools.DefineClient("pick_addons", "Ask the user which add-ons to enable.",
		json.RawMessage(`{"type":"object","properties":{}}`),
		tools.Client{Request: tools.InputRequest{
			Prompt:        "Which add-ons?",
			Options:       []protocol.InputOption{{ID: "backup", Label: "Backups"}, {ID: "sso", Label: "Single sign-on"}, {ID: "audit", Label: "Audit log"}},
			MinSelections: 1, MaxSelections: 2,
		}})
}
