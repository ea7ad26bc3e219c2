package signals

import (
	"encoding/json"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// The inbox (GET /eve/v1/inbox) is read from Temporal Visibility: a parked
// turn keeps its open requests in its memo (MemoInbox) and marks itself
// with search attributes (SearchInbox* in the engine), so listing every open
// request across sessions is one Visibility query per page.

// MemoInbox is the memo key of a turn's open requests (an InboxMemo); a
// turn with none leaves it empty (no items).
const MemoInbox = "eveInbox"

// InboxMemo is what a parked turn publishes about its open requests.
type InboxMemo struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	// Owner is the session's initiator; Requester the caller of the turn
	// (auth.current), whom the default response rule lets settle an
	// approval. Nil for anonymous.
	Owner     *auth.Principal `json:"owner,omitempty"`
	Requester *auth.Principal `json:"requester,omitempty"`
	Items     []InboxEntry    `json:"items"`
	// Relayed counts the open requests the turn's subagents proxied
	// through it (listed under their own turns): a root turn with none of
	// its own open may still wait on them.
	Relayed int `json:"relayed,omitempty"`
	// Origin places a subagent's turn under its root session (nil: a
	// root session's turn, or a child started before eve-subagent-origin).
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
}

// InboxEntry is one open request of a parked turn.
type InboxEntry struct {
	Request  protocol.InputRequest `json:"request"`
	OpenedAt time.Time             `json:"openedAt"`
	// Deadline is when it expires unanswered (nil: never).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Judged: a response policy (application code, run by the turn)
	// decides who may settle this approval, so the inbox shows it to
	// everyone who may answer the session and the policy judges the answer.
	Judged bool `json:"judged,omitempty"`
	// Editable: the approval may be given with an edited input, which
	// must match InputSchema (the tool's; dropped when the entry would
	// exceed MaxInboxEntryBytes).
	Editable    bool            `json:"editable,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// EscalatedAt is when the request escalated to Escalation's group
	// (nil: it has not).
	EscalatedAt *time.Time       `json:"escalatedAt,omitempty"`
	Escalation  *InboxEscalation `json:"escalation,omitempty"`
}

// InboxEscalation is the second group an escalated approval widened to:
// principals whose Attribute has Value (both empty: the app's response
// policy decides who they are).
type InboxEscalation struct {
	Group     string `json:"group"`
	Attribute string `json:"attribute,omitempty"`
	Value     string `json:"value,omitempty"`
}

// MaxInboxEntryBytes bounds one entry in the memo: a larger request is
// published without its tool input (Request.Action.Input), which the
// session's stream still carries, so a huge input can never make the turn's
// memo exceed Temporal's blob limit.
const MaxInboxEntryBytes = 16 << 10

// MemoStatus is the memo key of a workflow's current status (a
// StatusMemo), set once its EveStatus search attribute may lag behind:
// a workflow whose park was answered keeps EveStatus = "waiting-input"
// until its next other change (one billable upsert fewer per park), and
// says "running" here. Readers take the memo over the attribute when it is
// there. A session before eve-status-from-turns writes it; since then a
// turn without the inbox's memo does (with the inbox on, its MemoInbox
// with no open item says that it runs on), and a session writes no status.
const MemoStatus = "eveStatus"

// StatusMemo is a workflow's current status and the tools it waits on.
type StatusMemo struct {
	Status string   `json:"status"`
	Tools  []string `json:"tools,omitempty"`
}
