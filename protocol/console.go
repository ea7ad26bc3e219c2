package protocol

import (
	"encoding/json"
	"time"
)

// SessionItem is one session of GET /eve/v1/sessions.
type SessionItem struct {
	SessionID string `json:"sessionId"`
	// Status: idle, running, waiting-input, waiting-tasks or closed
	// (absent when the namespace lacks eve's status attribute).
	Status string `json:"status,omitempty"`
	// Tools the session waits on (waiting-input, waiting-tasks).
	Tools     []string      `json:"tools,omitempty"`
	Owner     *PrincipalRef `json:"owner,omitempty"`
	StartedAt time.Time     `json:"startedAt"`
	ClosedAt  *time.Time    `json:"closedAt,omitempty"`
}

// SessionPage is a page of sessions, newest first; NextCursor (empty on
// the last page) asks for the next.
type SessionPage struct {
	Items      []SessionItem `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// Job is one delegated action a running turn waits on (GET /eve/v1/jobs).
type Job struct {
	ActionID   string `json:"actionId"`
	SessionID  string `json:"sessionId"`
	TurnID     string `json:"turnId"`
	WorkflowID string `json:"workflowId"`
	CallID     string `json:"callId"`
	ToolName   string `json:"toolName"`
	// State: pending, or settling (a completion was accepted).
	State     string    `json:"state"`
	Deadline  time.Time `json:"deadline"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// LastHeartbeatAt is the job's last heartbeat (absent: none yet), with
	// its details when they are JSON.
	LastHeartbeatAt  *time.Time      `json:"lastHeartbeatAt,omitempty"`
	HeartbeatDetails json.RawMessage `json:"heartbeatDetails,omitempty"`
}

// JobPage is a page of delegated jobs.
type JobPage struct {
	Items      []Job  `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// InboxHint is the data of an "inbox" event of GET /eve/v1/inbox/events:
// these sessions changed (empty: any may have), so requests may have
// opened or settled; re-list the inbox.
type InboxHint struct {
	Sessions []string  `json:"sessions,omitempty"`
	At       time.Time `json:"at"`
}
