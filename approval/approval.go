// Package approval gates tool calls behind a decision: never ask (the
// default), ask once per session, always ask, or a custom policy that looks
// at the caller, the tool and its input.
//
// Built-in policies decide in workflow code. A custom policy is application
// code (it may read a database), so it runs in an activity; if it errors,
// panics or times out it fails closed: a person is asked, nothing is
// approved automatically.
package approval

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/eve-temporal/eve/auth"
)

// Status types a policy returns.
const (
	UserApproval  = "user-approval"  // park and ask a person
	NotApplicable = "not-applicable" // run without asking
	Approved      = "approved"       // approved automatically
	Denied        = "denied"         // denied automatically; Reason reaches the model
)

// Status is a policy's answer.
type Status struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
	// Review is the decision model's verdict and reason (Auto), kept in
	// the workflow's history with the status.
	Review *Review `json:"review,omitempty"`
	// OnceFor names the tool a person's approval of this call approves for
	// the rest of the session, as Once does (see AskOnce).
	OnceFor string `json:"onceFor,omitempty"`
}

// AskOnce asks a person, and their approval approves tool for the rest of
// the session, as Once does: a policy that stands for another tool's Once
// (a connection set's call tool, in search mode) answers Skip once
// Context.IsApproved(tool).
func AskOnce(tool string) Status { return Status{Type: UserApproval, OnceFor: tool} }

// Ask, Skip, Approve and Deny build statuses.
func Ask() Status               { return Status{Type: UserApproval} }
func Skip() Status              { return Status{Type: NotApplicable} }
func Approve() Status           { return Status{Type: Approved} }
func Deny(reason string) Status { return Status{Type: Denied, Reason: reason} }
func FromBool(ask bool) Status {
	// The predicate form: true asks a person, false runs without a prompt.
	if ask {
		return Ask()
	}
	return Skip()
}

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s.Type {
	case UserApproval, NotApplicable, Approved, Denied:
		return true
	}
	return false
}

// Context is what a custom policy sees.
type Context struct {
	// Session carries auth.Current (the caller of this turn) and
	// auth.Initiator (who created the session).
	Session       auth.Session    `json:"session"`
	ToolName      string          `json:"toolName"`
	ToolInput     json.RawMessage `json:"toolInput"`
	CallID        string          `json:"callId"`
	ApprovedTools []string        `json:"approvedTools"`
	// ToolAnnotations are the tool's annotations as its definition (for a
	// connection tool, the remote server) declares them: hints, to trust
	// only as far as their source.
	ToolAnnotations *ToolAnnotations `json:"toolAnnotations,omitempty"`
}

// ToolAnnotations describe a tool's behaviour to a policy.
type ToolAnnotations struct {
	ReadOnly    bool `json:"readOnly,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
	Idempotent  bool `json:"idempotent,omitempty"`
	OpenWorld   bool `json:"openWorld,omitempty"`
}

// Input decodes the tool input into v.
func (c Context) Input(v any) error { return json.Unmarshal(c.ToolInput, v) }

// IsApproved reports whether the session already approved the tool (once).
func (c Context) IsApproved(tool string) bool { return slices.Contains(c.ApprovedTools, tool) }

// Kinds of policy.
const (
	KindNever  = "never"
	KindOnce   = "once"
	KindAlways = "always"
	KindCustom = "custom"
)

// Func is a custom policy. ctx carries a deadline; honour it.
type Func func(ctx context.Context, c Context) (Status, error)

// Policy is a tool's approval configuration. The zero value is Never.
type Policy struct {
	kind string
	fn   Func
	// response decides who may settle a call (nil: only the requester);
	// prompt builds the reviewer's text (nil: "Approve <Tool>?").
	response ResponsePolicy
	prompt   func(PromptContext) string
	// auto configures Auto.
	auto *AutoConfig
	// editable lets the reviewer approve with an edited input (Editable).
	editable bool
	// deadline gives a call its own deadline; escalation widens who may
	// settle it after a while (deadline.go).
	deadline   func(PromptContext) time.Duration
	escalation *Escalation
}

// Never runs the tool without asking (the default).
func Never() Policy { return Policy{kind: KindNever} }

// Always asks a person before every call.
func Always() Policy { return Policy{kind: KindAlways} }

// Once asks until a person explicitly approves a call of the tool; later
// calls in the same session run unasked. A denial, or no answer, is not
// remembered, and calls already waiting when the approval lands still ask.
func Once() Policy { return Policy{kind: KindOnce} }

// Custom decides with application code. It runs in a local activity,
// which may run again when its workflow task fails or is retried; only the
// decision of the attempt that completes counts, so fn decides and must not
// act (docs/architecture.md, "Exactly once").
func Custom(fn func(c Context) Status) Policy {
	return Policy{kind: KindCustom, fn: func(_ context.Context, c Context) (Status, error) { return fn(c), nil }}
}

// CustomContext decides with application code that may fail (for example
// a database read); an error asks a person.
func CustomContext(fn Func) Policy { return Policy{kind: KindCustom, fn: fn} }

// Predicate is the older boolean form: true asks, false runs unasked.
func Predicate(fn func(c Context) bool) Policy {
	return Custom(func(c Context) Status { return FromBool(fn(c)) })
}

// ReasonPolicyFailed is the reason a person is asked when a custom policy
// failed (an error, a panic, a timeout, or an answer that is no status).
const ReasonPolicyFailed = "the approval policy failed"

// Decide is the gate of one call, a pure function that workflow code calls
// (a turn's calls, a tools API execution, the tools API's early check):
// kind is the tool's policy kind, approvedOnce whether the session already
// approved the tool (approval.Once), and custom what a custom policy
// answered. Always asks; Once asks until approved once; Never (and an unset
// kind) runs without asking; Custom and Auto take custom (what the policy,
// or the review, answered), and an invalid status (it failed) fails
// closed: a person is asked.
func Decide(kind string, approvedOnce bool, custom Status) Status {
	switch kind {
	case KindAlways:
		return Ask()
	case KindOnce:
		if approvedOnce {
			return Skip()
		}
		return Ask()
	case KindCustom, KindAuto:
		if !custom.Valid() {
			return Status{Type: UserApproval, Reason: ReasonPolicyFailed}
		}
		return custom
	}
	return Skip()
}

// Kind names the policy.
func (p Policy) Kind() string {
	if p.kind == "" {
		return KindNever
	}
	return p.kind
}

// Evaluate runs a custom policy. Built-in kinds are decided by the workflow
// and return NotApplicable here.
func (p Policy) Evaluate(ctx context.Context, c Context) (Status, error) {
	if p.fn == nil {
		return Skip(), nil
	}
	return p.fn(ctx, c)
}
