// Package signals names every message into eve's workflows (Updates, Signals
// and Queries) and defines their payloads. Clients and workflows both use it,
// so the names cannot drift apart.
package signals

import (
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
)

// Workflow type names.
const (
	SessionWorkflow = "eve.Session"
	TurnWorkflow    = "eve.Turn"
)

// Messages into the session workflow.
const (
	// UpdateSend delivers a user message. Payload SendRequest, result SendResult.
	UpdateSend = "eve.send"
	// QueryEvents reads the session's events. Argument EventsQuery, result EventsPage.
	QueryEvents = "eve.events"
	// QueryState reads a summary of the session. Result SessionSummary.
	QueryState = "eve.state"
)

// Messages into the turn workflow.
const (
	// QueryTurnEvents reads the turn's events from a turn-local index (int).
	QueryTurnEvents = "eve.turn.events"
)

// SendRequest is one user message.
type SendRequest struct {
	Message string `json:"message"`
	// DeliveryID is stamped on every event of the turn this message starts;
	// the server generates it ("dlv_..."). When empty the workflow derives
	// one from the update id.
	DeliveryID string `json:"deliveryId,omitempty"`
	// Caller becomes session.auth.current for the turn.
	Caller *auth.Principal `json:"caller,omitempty"`
	// Wait makes the update return only when the turn ends (or parks).
	Wait bool `json:"wait,omitempty"`
}

// SendResult acknowledges a message.
type SendResult struct {
	SessionID  string `json:"sessionId"`
	DeliveryID string `json:"deliveryId"`
	TurnID     string `json:"turnId"`
	Sequence   int    `json:"sequence"`
	// Set when Wait was requested.
	Outcome *TurnOutcome `json:"outcome,omitempty"`
}

// TurnOutcome summarizes how a turn ended.
type TurnOutcome struct {
	Status string `json:"status"` // completed, failed, cancelled, waiting
	Reply  string `json:"reply,omitempty"`
	Error  string `json:"error,omitempty"`
	// FirstEvent and LastEvent are global event indexes of the turn.
	FirstEvent int `json:"firstEvent"`
	LastEvent  int `json:"lastEvent"`
}

// Turn statuses.
const (
	TurnStatusCompleted = "completed"
	TurnStatusFailed    = "failed"
	TurnStatusCancelled = "cancelled"
	TurnStatusWaiting   = "waiting"
)

// EventsQuery asks for events from a global index.
type EventsQuery struct {
	From int `json:"from"`
}

// EventsPage is the session's answer. Events of a running turn live in the
// turn workflow until it ends: ActiveTurn says where to read them.
type EventsPage struct {
	Events []protocol.Event `json:"events"`
	// Total is the number of events the session itself holds.
	Total      int         `json:"total"`
	ActiveTurn *ActiveTurn `json:"activeTurn,omitempty"`
}

// ActiveTurn locates the running turn's events.
type ActiveTurn struct {
	WorkflowID string `json:"workflowId"`
	TurnID     string `json:"turnId"`
	// Base is the global index of the turn's first event.
	Base int `json:"base"`
}

// SessionSummary is the session's state at a glance.
type SessionSummary struct {
	SessionID  string              `json:"sessionId"`
	Initiator  *auth.Principal     `json:"initiator,omitempty"`
	Turns      int                 `json:"turns"`
	Queued     int                 `json:"queued"`
	ActiveTurn *ActiveTurn         `json:"activeTurn,omitempty"`
	Messages   []model.Message     `json:"messages,omitempty"`
	Usage      protocol.TokenUsage `json:"usage"`
}
