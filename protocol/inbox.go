package protocol

import (
	"encoding/json"
	"strings"
	"time"
)

// InboxItem is one open request in GET /eve/v1/inbox: an approval, a
// question or a session-limit prompt of a parked turn, which the caller may
// settle with POST /eve/v1/inbox/{id}.
type InboxItem struct {
	// ID names the request across sessions: InboxID(SessionID, RequestID).
	ID        string       `json:"id"`
	SessionID string       `json:"sessionId"`
	TurnID    string       `json:"turnId"`
	Kind      string       `json:"kind"`
	ToolName  string       `json:"toolName,omitempty"`
	Request   InputRequest `json:"request"`
	// The requester: the caller of the turn that asked (empty when
	// anonymous).
	RequesterPrincipalID   string    `json:"requesterPrincipalId,omitempty"`
	RequesterPrincipalType string    `json:"requesterPrincipalType,omitempty"`
	OpenedAt               time.Time `json:"openedAt"`
	// Deadline is when the request expires unanswered (absent: never).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Editable: the approval may be given with an edited input
	// (InboxAnswer.Input), which must match InputSchema, the tool's input
	// schema (absent when too large for the inbox). The original input is
	// Request.Action.Input.
	Editable    bool            `json:"editable,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// EscalatedAt is when the approval escalated to EscalatedTo, a second
	// group (absent: it has not).
	EscalatedAt *time.Time `json:"escalatedAt,omitempty"`
	EscalatedTo string     `json:"escalatedTo,omitempty"`
	// RootSessionID, Path and Depth place a subagent's request under its
	// root session (docs/subagents.md): the root, the chain of subagents
	// from the root's child down to SessionID, and its length. Absent for
	// a root session's own request.
	RootSessionID string        `json:"rootSessionId,omitempty"`
	Path          []SubagentHop `json:"path,omitempty"`
	Depth         int           `json:"depth,omitempty"`
}

// InboxPage is a page of the inbox; NextCursor (empty on the last page)
// asks for the next.
type InboxPage struct {
	Items      []InboxItem `json:"items"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// InboxAnswer is the body of POST /eve/v1/inbox/{id}: an InputResponse
// without its requestId (the id names it).
type InboxAnswer struct {
	OptionID string `json:"optionId,omitempty"`
	Text     string `json:"text,omitempty"`
	// Input approves with an edited input (OptionID "approve", an
	// Editable item).
	Input json.RawMessage `json:"input,omitempty"`
}

// InboxID joins a session id and a request id ("ses_…:apr_…"); session ids
// never contain ':'.
func InboxID(sessionID, requestID string) string { return sessionID + ":" + requestID }

// SplitInboxID reverses InboxID.
func SplitInboxID(id string) (sessionID, requestID string, ok bool) {
	s, r, ok := strings.Cut(id, ":")
	return s, r, ok && s != "" && r != ""
}
