package approval

import (
	"context"
	"encoding/json"
	"time"

	"github.com/eve-temporal/eve/auth"
)

// Who may settle a call: a response policy (as eve's approval "response").
// Without one, only the person whose turn requested the call may approve or
// cancel it (RequesterOnly). A policy that refuses a response leaves the
// request pending for someone else; it never settles it.

// Decisions a response carries.
const (
	DecisionApprove = "approve"
	DecisionCancel  = "cancel"
)

// Request is the approval request a response policy judges.
type Request struct {
	RequestID string `json:"requestId"`
	CallID    string `json:"callId"`
	ToolName  string `json:"toolName"`
	// ToolInput is the input the call runs with if the response settles
	// it: the reviewer's edit when they edited it (Policy.Editable).
	ToolInput json.RawMessage `json:"toolInput"`
	// OriginalInput is the model's input when the response edits it
	// (ToolInput is then the edit); absent otherwise.
	OriginalInput json.RawMessage `json:"originalInput,omitempty"`
	// Principal asked for the call: the caller of the turn, captured when
	// the approval was requested. Nil for an anonymous caller.
	Principal *auth.Principal `json:"principal,omitempty"`
	// EscalatedAt is when the request escalated (Policy.WithEscalation),
	// nil while it has not; Escalation is the group's label.
	EscalatedAt *time.Time `json:"escalatedAt,omitempty"`
	Escalation  string     `json:"escalation,omitempty"`
}

// Input decodes the tool input (already validated) into v.
func (r Request) Input(v any) error { return json.Unmarshal(r.ToolInput, v) }

// Response is one person's answer to an approval request.
type Response struct {
	// Decision is DecisionApprove or DecisionCancel; a policy runs for
	// both, so a responder it rejects can neither approve nor cancel.
	Decision string `json:"decision"`
	// Note is the text sent with a cancel (the reason the model reads).
	Note string `json:"note,omitempty"`
	// Principal is the authenticated responder, with its attributes.
	Principal *auth.Principal `json:"principal,omitempty"`
}

// ResponseContext is what a response policy sees.
type ResponseContext struct {
	Request  Request  `json:"request"`
	Response Response `json:"response"`
	// Session is the session's identity: its id, the caller of the turn
	// (Auth.Current) and its creator (Auth.Initiator).
	Session auth.Session `json:"session"`
	TurnID  string       `json:"turnId"`
}

// Verdict statuses.
const (
	Allowed  = "allowed"
	Rejected = "rejected"
)

// Verdict is a response policy's answer.
type Verdict struct {
	Status string `json:"status"`
	// Reason says why a response was rejected; the responder reads it in
	// approval.candidate.
	Reason string `json:"reason,omitempty"`
}

// Allow accepts a response; Reject refuses it, leaving the request pending.
func Allow() Verdict               { return Verdict{Status: Allowed} }
func Reject(reason string) Verdict { return Verdict{Status: Rejected, Reason: reason} }

// ResponsePolicy decides whether a response may settle a call. It runs in a
// local activity (it may read a database) bounded by a timeout; an error, a
// panic, an unknown status or the timeout settles nothing: the candidate
// ends failed or timed-out and the request stays pending. It decides and
// must not act: it may run again when its workflow task is retried.
type ResponsePolicy func(ctx context.Context, c ResponseContext) (Verdict, error)

// ReasonRequesterOnly is why the default refuses another person's response.
const ReasonRequesterOnly = "Only the person who requested this action can respond to this approval."

// SamePrincipal reports whether a and b are one identity (id and type).
func SamePrincipal(a, b *auth.Principal) bool {
	if a == nil || b == nil {
		return false
	}
	return a.ID == b.ID && a.Type == b.Type
}

// MayRespond is the default response policy, decided in workflow code:
// only the requester may settle; an anonymous (nil) requester lets anyone.
func MayRespond(requester, responder *auth.Principal) bool {
	return requester == nil || SamePrincipal(requester, responder)
}

// PromptContext is what a prompt builder sees: the validated input of the
// exact call a person is asked about.
type PromptContext struct {
	ToolName  string          `json:"toolName"`
	CallID    string          `json:"callId"`
	ToolInput json.RawMessage `json:"toolInput"`
}

// Input decodes the tool input (already validated) into v.
func (c PromptContext) Input(v any) error { return json.Unmarshal(c.ToolInput, v) }

// WithResponse returns p with a response policy: fn decides who may settle
// a call, replacing the default (only the requester).
func (p Policy) WithResponse(fn ResponsePolicy) Policy {
	p.response = fn
	return p
}

// WithPrompt returns p with a prompt builder: the reviewer reads fn's text
// (for example "Refund $25.00 for charge ch_42?") instead of
// "Approve <Tool>?". An empty text, or a panic, keeps the default.
func (p Policy) WithPrompt(fn func(c PromptContext) string) Policy {
	p.prompt = fn
	return p
}

// HasResponsePolicy reports whether p carries a response policy.
func (p Policy) HasResponsePolicy() bool { return p.response != nil || p.escalation != nil }

// EvaluateResponse runs the response policy (the default when p has none).
func (p Policy) EvaluateResponse(ctx context.Context, c ResponseContext) (Verdict, error) {
	if e := p.escalation; e != nil && c.Request.EscalatedAt != nil && e.Includes(c.Response.Principal) {
		return Allow(), nil // the second group, once escalated
	}
	if p.response == nil {
		if MayRespond(c.Request.Principal, c.Response.Principal) {
			return Allow(), nil
		}
		return Reject(ReasonRequesterOnly), nil
	}
	return p.response(ctx, c)
}

// Prompt builds the reviewer's prompt; "" when p has no builder.
func (p Policy) Prompt(c PromptContext) (text string) {
	if p.prompt == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			text = ""
		}
	}()
	return p.prompt(c)
}

// Valid reports whether v is one of the two statuses.
func (v Verdict) Valid() bool { return v.Status == Allowed || v.Status == Rejected }
