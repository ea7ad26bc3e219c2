// Package auth holds the identities a session carries: who created it (the
// initiator) and who sent the message that started the current turn.
package auth

// Principal is one authenticated caller. The field names follow eve's
// RuntimeSessionAuthContext so they serialize the same way on the wire.
type Principal struct {
	ID         string            `json:"principalId"`
	Type       string            `json:"principalType,omitempty"` // user, service, runtime, unknown
	Attributes map[string]string `json:"attributes,omitempty"`    // e.g. tenantId
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
