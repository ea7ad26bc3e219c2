// Package auth holds the identities a session carries: who created it (the
// initiator) and who sent the message that started the current turn.
package auth

import "slices"

// Principal is one authenticated caller. The field names follow eve's
// RuntimeSessionAuthContext so they serialize the same way on the wire.
type Principal struct {
	ID         string            `json:"principalId"`
	Type       string            `json:"principalType,omitempty"` // user, service, runtime, unknown
	Attributes map[string]string `json:"attributes,omitempty"`    // e.g. tenantId
	// CanActFor lists the users a service principal may act for (the keys
	// file's canActFor; AnyUser for all): their sessions and, in the tools
	// API, executions in their name. Empty: only for itself. It is the API
	// server's business and never serialized (workflows do not see it).
	CanActFor []string `json:"-"`
	// Review lets the principal review sessions of other owners (the keys
	// file's reviews): answer their approvals, stream them and read their
	// decision records, for the owners it names (MayReview). Nil: none.
	// Like CanActFor it is the API server's business and never serialized.
	Review *ReviewGrant `json:"-"`
	// AllowToolStubs lets the principal create sessions with eve's tool
	// stubs (evals; the keys file's allowToolStubs). The API server's
	// business, never serialized.
	AllowToolStubs bool `json:"-"`
}

// ReviewGrant scopes a reviewer: the owners whose sessions it may review.
// Every part that is set must hold; a grant with neither part grants
// nothing.
type ReviewGrant struct {
	// Owners are the owners' principal ids (AnyUser: every owner).
	Owners []string
	// SameAttributes are attributes the owner must share with the
	// reviewer, with the same non-empty value (e.g. tenantId: a reviewer of
	// its own tenant).
	SameAttributes []string
}

// MayReview reports whether p's review grant covers sessions of owner: an
// owner the grant names (or AnyUser) and that shares each of the grant's
// SameAttributes with p (both set, equal). A session without an owner is
// nobody's to review.
func (p *Principal) MayReview(owner *Principal) bool {
	if p == nil || p.Review == nil || owner == nil {
		return false
	}
	g := p.Review
	if len(g.Owners) == 0 && len(g.SameAttributes) == 0 {
		return false
	}
	if len(g.Owners) > 0 && !slices.ContainsFunc(g.Owners, func(o string) bool { return o == AnyUser || o == owner.ID }) {
		return false
	}
	for _, a := range g.SameAttributes {
		if v := p.Attr(a); v == "" || owner.Attr(a) != v {
			return false
		}
	}
	return true
}

// Attr returns one attribute, or "" when p is nil or lacks it.
func (p *Principal) Attr(name string) string {
	if p == nil {
		return ""
	}
	return p.Attributes[name]
}

// Auth is a session's auth: the caller of the current turn and the session's creator.
type Auth struct {
	Current   *Principal `json:"current,omitempty"`
	Initiator *Principal `json:"initiator,omitempty"`
}

// Session is what a tool, a policy or a resolver knows of the session it serves.
type Session struct {
	ID   string `json:"id"`
	Auth Auth   `json:"auth"`
}

// Principal types. A keys file may name TypeUser (its default),
// TypeService and TypeOperator; TypeAnonymous is every caller of an open
// API server. An operator reads every session's decision record (an
// audit role); it acts on sessions only as any other principal would.
const (
	TypeUser      = "user"
	TypeService   = "service"
	TypeOperator  = "operator"
	TypeAnonymous = "anonymous"
)

// AnyUser in CanActFor grants acting for every user.
const AnyUser = "*"

// ActsFor reports whether p may act for owner: p is owner (same id, and
// the same type when both name one), or p is a service principal whose
// CanActFor grant names owner's id (or AnyUser) and owner is a user.
func (p *Principal) ActsFor(owner *Principal) bool {
	if p == nil || owner == nil {
		return false
	}
	if p.ID == owner.ID && (p.Type == owner.Type || p.Type == "" || owner.Type == "") {
		return true
	}
	if p.Type != TypeService || (owner.Type != TypeUser && owner.Type != "") {
		return false
	}
	for _, u := range p.CanActFor {
		if u == AnyUser || u == owner.ID {
			return true
		}
	}
	return false
}
