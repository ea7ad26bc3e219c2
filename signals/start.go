package signals

import (
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// Version is eve's version, reported in session.started and by the API
// server's /eve/v1/info and the MCP server's initialize. It names the
// newest release whose workflow code has saved histories: the newest
// "v<Version>-" prefix in e2e/testdata/histories (workflows/changes.go).
const Version = "0.5.0"

// MaxMessageBytes bounds one user message: the session's send validator
// refuses a longer one, and the API server answers 413 before asking it.
const MaxMessageBytes = 256 << 10

// MaxQueuedMessages bounds the messages waiting for their turn in one
// session: beyond it a send is refused (ErrSessionBusy; the API answers
// 429), never accepted and dropped.
const MaxQueuedMessages = 100

// MemoInitiator is the memo key of a session's initiator
// (auth.Principal), set by whatever starts the session (the API's sessions
// service, a parent turn, a tool's code), so the owner of a closed session,
// whose queries no longer answer, is known.
const MemoInitiator = "initiator"

// The search attributes a session starts with (when the namespace has
// them): its status and its id (workflows/visibility.go).
const (
	SearchAttrStatus    = "EveStatus"
	SearchAttrSessionID = "EveSessionId"
)

// SessionInput starts a session workflow (SessionWorkflow). The workflow's
// own input type, workflows.SessionInput, has these fields and the state a
// session carries across continue-as-new, which only the workflow writes;
// starters need no more than this.
type SessionInput struct {
	SessionID string          `json:"sessionId"`
	Initiator *auth.Principal `json:"initiator,omitempty"`
	// Stubs are eve's tool stubs (evals), fixed for the session's life.
	// Only a caller granted tool stubs may set them (the API server checks).
	Stubs []protocol.ToolStub `json:"stubs,omitempty"`
	// First is the session's first message, accepted with its start: the
	// workflow queues it (delivery First.DeliveryID, turn 0) before it
	// takes anything else, so the start request, which needs no workflow
	// task to be answered, makes it durable. Its starter checks it as the
	// send Update's validator would (sessions.Service.CreateAndSend). Only
	// workers that know the field read it (eve 0.5.0 with
	// eve-first-message on).
	First *SendRequest `json:"first,omitempty"`
	// Versions says which of eve's workflow changes the session takes as
	// on without recording a version marker for each: eve's starters set
	// SessionVersions (fewer history events and Visibility writes per
	// session); 0 decides each by a marker, as sessions started before it
	// do. Workers of eve 0.5.0 before eve-input-versions ignore it.
	Versions int `json:"versions,omitempty"`
	// Origin places a subagent's child session under its root session:
	// eve sets it on the sessions a parent turn or a tool's code opens.
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
}

// SessionVersions is what eve's starters put in SessionInput.Versions.
// 3: the session writes no status of its own, its running turn's is its
// status (so its starter sets only SearchAttrSessionID), and the sessions
// listing reads the turns. 4: the session keeps no mirror of its running
// turn's open requests; it offers the turn every message that arrives
// while it runs, and the turn decides (it tells the session of a park only
// when someone waits for its outcome).
const SessionVersions = 4
