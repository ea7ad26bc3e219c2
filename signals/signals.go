// Package signals is eve's contract with its workflows: the names of the
// workflow types and of every message into them (Updates, Signals and
// Queries), their payloads, the start inputs a starter needs
// (SessionInput), and the rules of delegated actions (delegated.go).
// Clients, servers, jobs and workflows all use it, so none of these can
// drift apart.
//
// It stays light enough for any client to import: no Temporal SDK, no tool
// catalog, no payload store (imports_test.go at the module root checks).
package signals

import (
	"encoding/json"
	"strconv"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/protocol"
)

// Workflow type names.
const (
	SessionWorkflow = "eve.Session"
	TurnWorkflow    = "eve.Turn"
)

// TurnID names the turn that runs a session's message number seq.
func TurnID(seq int) string { return "turn_" + strconv.Itoa(seq) }

// TurnWorkflowID is the workflow id of a session's turn. Ids are derived,
// never stored, so a reader finds a turn's workflow without asking the
// session, and an operator finds a session's turns by prefix.
func TurnWorkflowID(sessionID, turnID string) string { return sessionID + "/" + turnID }

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
	// QueryTurnTasks lists the turn's tasks ([]protocol.TaskInfo), working
	// and settled, in the order they started.
	QueryTurnTasks = "eve.turn.tasks"
	// UpdateTaskCancel stops one working task of the turn from outside the
	// conversation (POST /eve/v1/session/{id}/tasks/{taskId}/cancel).
	// Payload TaskCancelRequest, result TaskCancelResult. Its validator
	// refuses a task the turn does not have (ErrTypeUnknownTask) or that
	// does not work (ErrTypeTaskNotWorking), recording nothing.
	UpdateTaskCancel = "eve.task.cancel"
)

// Failure types of the task cancel Update's validator.
const (
	ErrTypeUnknownTask    = "eve.UnknownTask"
	ErrTypeTaskNotWorking = "eve.TaskNotWorking"
)

// TaskCancelRequest asks the turn to stop one task's current work.
type TaskCancelRequest struct {
	TaskID string `json:"taskId"`
	// Caller is who asked (authorized by the API server).
	Caller *auth.Principal `json:"caller,omitempty"`
}

// TaskCancelResult: the task's call settled cancelled.
type TaskCancelResult struct {
	TaskID    string `json:"taskId"`
	CallID    string `json:"callId"`
	TurnID    string `json:"turnId"`
	Resumable bool   `json:"resumable,omitempty"`
}

// ErrSessionBusy is the application error type of a send refused because
// too many messages wait for their turn (HTTP 429).
const ErrSessionBusy = "SessionBusy"

// ErrSessionEnded is the application error type of a send refused because
// the session's lifetime is over (agent.Agent.SessionLifetime).
const ErrSessionEnded = "SessionEnded"

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
	// TurnPolicy is eve's turnPolicy for a message sent while a turn runs:
	// TurnPolicySteer (the default when empty) or TurnPolicyQueue.
	TurnPolicy string `json:"turnPolicy,omitempty"`
	// OutputSchema, when set, is the JSON Schema (an object) of the
	// structured result this message's turn must produce (eve's
	// per-turn outputSchema): the model answers by calling eve__reply
	// with it, result.completed carries it, and the outcome's Data is it.
	// Such a message never joins a running turn: it runs as its own.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// RelayTo is set by a tool's code sending to a subagent's session it
	// opened (tools.Context.Agent): the turn this message starts relays
	// its people-in-the-loop events to that call's turn, as a subagent
	// called by the model does, so the root's person answers them
	// (docs/subagents.md). It answers nothing there: the code reads the
	// turn's outcome. eve's HTTP API never sets it.
	RelayTo *AgentReplyTo `json:"relayTo,omitempty"`
}

// eve's turnPolicy values. A message from the person the turn serves that
// does not answer the turn's first open prompt steers it (the model reads
// it before its next step, pending approvals are withdrawn) or, queued,
// waits for the turn's end. A queued message still steers a turn held on an
// approval: that turn cannot end until the person acts.
const (
	TurnPolicySteer = "steer"
	TurnPolicyQueue = "queue"
)

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
	// Data is the turn's structured result, when its message asked for
	// one (SendRequest.OutputSchema) and the turn completed.
	Data json.RawMessage `json:"data,omitempty"`
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

// RunRef locates events [From, To) in an earlier run of the session.
type RunRef struct {
	RunID string `json:"runId"`
	From  int    `json:"from"`
	To    int    `json:"to"`
}

// EventsPage is the session's answer. Events of a running turn live in the
// turn workflow until it ends: ActiveTurn says where to read them.
type EventsPage struct {
	Events []protocol.Event `json:"events"`
	// From is the global index of Events[0].
	From int `json:"from"`
	// Runs hold the requested events older than this run (continue-as-new).
	Runs []RunRef `json:"runs,omitempty"`
	// Total is the number of events the session itself holds.
	Total      int         `json:"total"`
	ActiveTurn *ActiveTurn `json:"activeTurn,omitempty"`
}

// ActiveTurn locates the running turn's events.
type ActiveTurn struct {
	WorkflowID string `json:"workflowId"`
	TurnID     string `json:"turnId"`
	// Base is the global index of the turn's first event.
	Base     int `json:"base"`
	Sequence int `json:"sequence"`
}

// SessionSummary is the session's state at a glance.
type SessionSummary struct {
	SessionID  string          `json:"sessionId"`
	Initiator  *auth.Principal `json:"initiator,omitempty"`
	Turns      int             `json:"turns"`
	Queued     int             `json:"queued"`
	ActiveTurn *ActiveTurn     `json:"activeTurn,omitempty"`
	// Conversation is the stored conversation (conversation.Load reads it).
	Conversation *conversation.Ref   `json:"conversation,omitempty"`
	Usage        protocol.TokenUsage `json:"usage"`
	// Tasks are the idle resumable tasks the session keeps between turns
	// (status "idle"), most recently used last.
	Tasks []protocol.TaskInfo `json:"tasks,omitempty"`
}

// Answers to input requests. The turn workflow that asked holds its open
// requests, so these go to the running turn (sessions.Service finds it).
const (
	// UpdateRespond applies a batch of answers. Payload RespondRequest, result
	// RespondResult. Its validator rejects the whole batch, recording nothing,
	// when any answer is invalid.
	UpdateRespond = "eve.respond"
	// SignalRespond takes the same payload for senders that cannot wait. An
	// invalid answer is recorded as input.resolved{outcome:"invalid"}.
	SignalRespond = "eve.respond"
)

// Failure types of the respond Update for an edited input
// (InputResponse.Input): ErrTypeInvalidEdit, the edit breaks the tool's
// input schema (the failure's details hold the JSON pointer of the failing
// field); ErrTypeNotEditable, the request takes no edit; ErrTypeEditRefused,
// the approval policy or the response policy refused the edited call (the
// request stays open).
const (
	ErrTypeInvalidEdit = "eve.InvalidEdit"
	ErrTypeNotEditable = "eve.NotEditable"
	ErrTypeEditRefused = "eve.EditRefused"
)

// RespondRequest is a batch of answers from one responder.
type RespondRequest struct {
	Responses []protocol.InputResponse `json:"responses"`
	// Responder is who answered (authorized by the API server).
	Responder *auth.Principal `json:"responder,omitempty"`
	// Wait makes the update return when the turn ends or parks again.
	Wait bool `json:"wait,omitempty"`
}

// RespondResult lists what the batch settled; repeats of applied answers
// are listed with Duplicate set and change nothing.
type RespondResult struct {
	Resolutions []protocol.InputResolution `json:"resolutions"`
	Duplicates  []string                   `json:"duplicates,omitempty"`
	// Outcome is set when Wait was requested.
	Outcome *TurnOutcome `json:"outcome,omitempty"`
	// EditRefused says why the approval policy or the response policy
	// refused the batch's edited inputs when they settled nothing (the
	// requests stay open; approval.candidate records each refusal).
	EditRefused string `json:"editRefused,omitempty"`
	// Refused are the batch's answers the policies judged and refused, in
	// the order they were judged (the requests stay open). A worker older
	// than this field leaves it empty and reports edits in EditRefused.
	Refused []protocol.Refusal `json:"refused,omitempty"`
}

// Session controls.
const (
	// UpdateControl runs one control operation on a session. Payload
	// ControlRequest, result ControlResult.
	UpdateControl = "eve.control"
)

// Control operations.
const (
	ControlCancel  = "cancel"  // cancel the running turn
	ControlClear   = "clear"   // forget the conversation (events stay)
	ControlCompact = "compact" // shrink the conversation the model sees
	ControlResetOp = "reset"   // cancel, clear and start over
)

// ControlRequest asks for one control operation.
type ControlRequest struct {
	Op     string          `json:"op"`
	TurnID string          `json:"turnId,omitempty"` // cancel: only this turn
	Reason string          `json:"reason,omitempty"`
	Caller *auth.Principal `json:"caller,omitempty"`
}

// Control statuses, as the protocol names them.
const (
	ControlAccepted        = "accepted"
	ControlNoActiveTurn    = "no_active_turn"
	ControlNoActiveSession = "no_active_session"
	ControlReset           = "reset"
)

// ControlResult says what happened.
type ControlResult struct {
	Status            string `json:"status"`
	SessionID         string `json:"sessionId,omitempty"`
	PreviousSessionID string `json:"previousSessionId,omitempty"`
}

// Messages between a session and its running turn.
const (
	// SignalTurnInputs (turn → session) mirrors the turn's open input
	// requests, so the session can route a message that answers one, and
	// answers its waiters that the turn parked. A turn of a session that
	// lets its turns decide (eve-turn-decides) sends it only while someone
	// waits for its outcome.
	SignalTurnInputs = "eve.turn.inputs"
	// SignalTurnMessage (session → turn) offers a user message; the turn
	// answers a prompt with it, steers with it, or leaves it for the next
	// turn (TurnOutput.Taken lists those it used).
	SignalTurnMessage = "eve.turn.message"
	// SignalTurnTaken (turn → session) answers an offer that asked for it
	// (TurnMessage.Ack): whether the turn took the message, and so reads
	// it, or left it for the turns after it.
	SignalTurnTaken = "eve.turn.taken"
)

// TurnTaken is the turn's answer to one offered message.
type TurnTaken struct {
	TurnID     string `json:"turnId"`
	DeliveryID string `json:"deliveryId"`
	Taken      bool   `json:"taken"`
}

// TurnInputs is the turn's open input requests.
type TurnInputs struct {
	TurnID string                  `json:"turnId"`
	Open   []protocol.InputRequest `json:"open"`
	// Judged are the open approvals a response policy decides: another
	// person's typed answer to one goes to the turn.
	Judged []string `json:"judged,omitempty"`
}

// TurnMessage is a user message offered to the running turn.
type TurnMessage struct {
	Message    string          `json:"message"`
	DeliveryID string          `json:"deliveryId"`
	Caller     *auth.Principal `json:"caller,omitempty"`
	// TurnPolicy: the message answers the turn's first open prompt if it
	// can, else steers or (TurnPolicyQueue, no approval open) is left for
	// the next turn.
	TurnPolicy string `json:"turnPolicy"`
	// Ack asks the turn to answer with SignalTurnTaken: a session that
	// keeps its messages in order (0.5.0) offers one message at a time and
	// answers its sender once the turn has decided.
	Ack bool `json:"ack,omitempty"`
	// AnswerOnly: messages accepted before this one wait for the turn's
	// end; the turn takes it only if it answers its first open prompt.
	AnswerOnly bool `json:"answerOnly,omitempty"`
	// Report: its sender waits for the outcome of the turn that reads it
	// (SendRequest.Wait), so a turn that takes it tells the session when
	// it parks (SignalTurnInputs), which a turn started without anyone
	// waiting does not (eve-turn-decides).
	Report bool `json:"report,omitempty"`
}

// SignalTextDelta (model step activity → turn) carries streamed text,
// recorded as message.appended.
const SignalTextDelta = "eve.turn.delta"

// SignalAsk (tool activity → turn) asks the session's person a question
// in the middle of a call (tools.Context.Ask); QueryAsked reads the
// answer (AskState) by request id.
const (
	SignalAsk  = "eve.turn.ask"
	QueryAsked = "eve.turn.asked"
)

// AskRequest is SignalAsk's payload: the request (kind question) of the
// running call CallID. Its RequestID derives from the call and the
// question's place in it (AskID), so a retried attempt asks the same
// request.
type AskRequest struct {
	CallID  string                `json:"callId"`
	Request protocol.InputRequest `json:"request"`
}

// AskPrefix is how the ids of call callID's questions begin:
// "ask_<callId>_", or "ask_<tag>_<callId>_" in a subagent's turn, whose
// tag (its session's, "s" and 8 hex digits) keeps its calls' questions
// apart from a sibling's with the same call id when both are proxied to
// the root (docs/subagents.md).
func AskPrefix(tag, callID string) string {
	if tag == "" {
		return "ask_" + callID + "_"
	}
	return "ask_" + tag + "_" + callID + "_"
}

// AskID is the request id of call callID's question named key (its
// number in the call, or a workflow tool's key; tools/wfcall).
func AskID(tag, callID, key string) string { return AskPrefix(tag, callID) + key }

// AskState is QueryAsked's answer: Known once the turn holds the request,
// Settled once it is settled (Resolution says how).
type AskState struct {
	Known      bool                     `json:"known"`
	Settled    bool                     `json:"settled"`
	Resolution protocol.InputResolution `json:"resolution"`
}

// TextDelta is coalesced streamed text of one step.
type TextDelta struct {
	StepIndex int    `json:"stepIndex"`
	Delta     string `json:"delta"`
}

// MaxEventsPageBytes bounds the event data one events query answers with
// (QueryEvents, QueryTurnEvents): a page holds at least one event, then
// stops before this many bytes of event data. Readers ask again from the
// next index; Total (or the turn's length) says how many events exist.
const MaxEventsPageBytes = 1 << 20

// PageEvents returns the longest prefix of evs within MaxEventsPageBytes,
// never empty when evs is not.
func PageEvents(evs []protocol.Event) []protocol.Event {
	size := 0
	for i, e := range evs {
		size += len(e.Data) + 128
		if i > 0 && size > MaxEventsPageBytes {
			return evs[:i]
		}
	}
	return evs
}
