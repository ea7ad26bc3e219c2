package signals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// Subagents (agent.Agent.Subagents): a subagent's call starts a child
// session of that agent, a session workflow of its own on the subagent's
// task queue, and sends it the call's message; the child answers the
// turn that sent it when its turn ends.

// SubagentSessionID is the session id (and workflow id) of the child
// session a subagent's task runs in: derived from the parent session and
// the task id (itself derived from the parent's session, turn and call),
// so a retried workflow task, or a replay on another worker, names the
// same child and Temporal never starts it twice. It is an ordinary
// session id ("ses_sub_…"): the session routes (its stream) take it.
func SubagentSessionID(parentSessionID, taskID string) string {
	sum := sha256.Sum256([]byte(parentSessionID + "\x00" + taskID))
	return "ses_sub_" + hex.EncodeToString(sum[:12])
}

// MemoOrigin is the memo key of a subagent's child session's place under
// its root session (a protocol.SubagentOrigin), set by the parent turn
// that starts it.
const MemoOrigin = "eveOrigin"

// SubagentTaskQueue is the task queue of a subagent's sessions: its
// parent's queue and its name. The worker host (eve's worker command,
// eve.NewWorker) runs one worker per declared subagent on it.
func SubagentTaskQueue(parentQueue, name string) string { return parentQueue + "/" + name }

// SessionStreamPath is eve's route of a session's stream
// (/eve/v1/session/:id/stream).
func SessionStreamPath(sessionID string) string {
	return "/eve/v1/session/" + url.PathEscape(sessionID) + "/stream"
}

// SignalAgentMessage (parent turn → child session) delivers a subagent
// call's message; payload AgentMessage. The child runs it as a turn of its
// own and answers with SignalAgentReply to ReplyTo when the turn ends.
const SignalAgentMessage = "eve.agent.message"

// SignalAgentReply (child session → parent turn) carries the child turn's
// outcome for one call; payload AgentReply.
const SignalAgentReply = "eve.agent.reply"

// AgentMessage is one message from a parent turn to its subagent's child
// session.
type AgentMessage struct {
	Message string `json:"message"`
	// DeliveryID names the delivery (the parent's call), so a re-sent
	// signal joins the first.
	DeliveryID string `json:"deliveryId"`
	// ReplyTo is the parent turn's workflow id; CallID the call to answer.
	ReplyTo string          `json:"replyTo"`
	CallID  string          `json:"callId"`
	Caller  *auth.Principal `json:"caller,omitempty"`
}

// SignalAgentCancel (parent turn → child session) stops the work of one
// call: the child cancels the turn that reads the call's message (its
// conversation stays, so a later call by taskId continues it), or drops
// the message if it still waits in the queue; payload AgentCancel. Sent
// when the call is cancelled (eve__task_cancel, the task cancel API, the
// calling turn cancelled or failed). A repeat changes nothing.
const SignalAgentCancel = "eve.agent.cancel"

// AgentCancel names the call whose work stops, by its message's delivery.
type AgentCancel struct {
	DeliveryID string `json:"deliveryId"`
	CallID     string `json:"callId"`
}

// AgentReply is a child session's answer to one AgentMessage: its turn's
// status (TurnStatusCompleted, …), final reply or error.
type AgentReply struct {
	CallID string `json:"callId"`
	Status string `json:"status"`
	Reply  string `json:"reply,omitempty"`
	Error  string `json:"error,omitempty"`
	// Usage is the token usage the child session spent since its last
	// delivered reply: this turn's, its own subagents' included, and any
	// turn no reply carried yet. The parent counts it as its own (its
	// session limits, turn.waiting, session.waiting). Nil from a child
	// recorded before the change eve-subagent-usage.
	Usage *protocol.TokenUsage `json:"usage,omitempty"`
}

// AgentReplyTo is where a child session answers one message.
type AgentReplyTo struct {
	WorkflowID string `json:"workflowId"`
	CallID     string `json:"callId"`
}

// SignalAgentInput (child turn → parent turn) relays a subagent's people
// in the loop: the child turn's input.requested, approval.candidate,
// approval.settled and input.resolved, so the parent records them on its
// own stream (as eve proxies a descendant's requests to the root) and
// routes the answers it is given back down to ChildTurn with
// SignalRespond. A parent that is itself a subagent's turn relays them
// further up, so a request from any depth reaches the root.
const SignalAgentInput = "eve.agent.input"

// AgentInput is one relayed event of a child turn.
type AgentInput struct {
	// CallID is the parent's call the child works for (its AgentReplyTo).
	CallID string `json:"callId"`
	// ChildSession and ChildTurn name the child's session and the turn
	// workflow that asked (where answers go).
	ChildSession string `json:"childSession"`
	ChildTurn    string `json:"childTurn"`
	// Type is the event's type, Data its data as the child recorded it.
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	// Rules say, for each request of a relayed input.requested, who may
	// answer it, so the root can route a typed answer ("approve") to it
	// and leave one the child would refuse for the turn's end.
	Rules []AnswerRule `json:"rules,omitempty"`
}

// AnswerRule is who may answer one relayed request, as the turn that
// asked it decides.
type AnswerRule struct {
	RequestID string `json:"requestId"`
	// Judged: a response policy judges whoever answers (an approval).
	Judged bool `json:"judged,omitempty"`
	// RequesterOnly: only Requester may settle it (an approval without a
	// response policy); a nil Requester is anyone.
	RequesterOnly bool            `json:"requesterOnly,omitempty"`
	Requester     *auth.Principal `json:"requester,omitempty"`
}
