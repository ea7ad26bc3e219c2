package protocol

import (
	"encoding/json"
	"time"
)

// DecisionRecorded is the stream event a turn records right after each
// input.resolved: the whole settlement of one request (data Decision). It
// is eve for Go's own event; eve's clients skip event types they do not
// know. GET /eve/v1/decisions exports these records.
const DecisionRecorded = "decision.recorded"

// PrincipalRef names a principal in the decision record.
type PrincipalRef struct {
	ID   string `json:"id"`
	Type string `json:"type,omitempty"`
}

// DecisionCandidate is one response a response policy judged and did not
// let settle the request (rejected, failed, timed-out or stale); the one
// that settled it is the decision itself.
type DecisionCandidate struct {
	CandidateID string        `json:"candidateId"`
	Principal   *PrincipalRef `json:"principal,omitempty"`
	Outcome     string        `json:"outcome"`
	Reason      string        `json:"reason,omitempty"`
	At          time.Time     `json:"at"`
}

// Decision is the record of one settled input request: what was asked,
// who asked, who decided, when and how.
type Decision struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	RequestID string `json:"requestId"`
	// Kind is the request's kind (tool-approval, question, session-limit).
	Kind     string `json:"kind"`
	ToolName string `json:"toolName,omitempty"`
	CallID   string `json:"callId,omitempty"`
	Prompt   string `json:"prompt"`
	// Input is the call's input as the model asked for it.
	Input json.RawMessage `json:"input,omitempty"`
	// Requester is the caller of the turn that asked (absent: anonymous).
	Requester *PrincipalRef `json:"requester,omitempty"`
	// Decider is who settled it: absent when nobody did (expired, the
	// turn was cancelled, a steering message withdrew it).
	Decider   *PrincipalRef `json:"decider,omitempty"`
	AskedAt   time.Time     `json:"askedAt"`
	DecidedAt time.Time     `json:"decidedAt"`
	Deadline  *time.Time    `json:"deadline,omitempty"`
	// Outcome is the resolution's outcome: approved, denied, answered,
	// expired, cancelled or ignored (see input.resolved).
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
	// Text is a question's free-text answer.
	Text string `json:"text,omitempty"`
	// Note is the reason a person gave with a denial.
	Note string `json:"note,omitempty"`
	// Withdrawn: a steering message settled the request, not a person's
	// answer.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// EditedInput is the input the reviewer approved in place of Input.
	EditedInput json.RawMessage `json:"editedInput,omitempty"`
	// Candidates are the responses refused before the decision.
	Candidates []DecisionCandidate `json:"candidates,omitempty"`
	// EscalatedAt is when the request's eligible responders widened.
	EscalatedAt *time.Time `json:"escalatedAt,omitempty"`
	// Stub is set when a tool stub (eve's evals) settled the call after
	// this decision: the approval was real, the tool did not run. Only
	// the decision record (GET /eve/v1/decisions) carries it, from the
	// call's action.result; the decision.recorded event is recorded
	// before the call runs.
	Stub *ActionStub `json:"stub,omitempty"`
	// RootSessionID, Path and Depth name where a decision made in a
	// subagent's child session sits: its root session, the chain of
	// subagents down to SessionID, and its depth (absent: a root session's
	// own decision).
	RootSessionID string        `json:"rootSessionId,omitempty"`
	Path          []SubagentHop `json:"path,omitempty"`
	Depth         int           `json:"depth,omitempty"`
}

// DecisionsIncomplete is the last line of a decision export across
// sessions that could not read some of them (their worker did not answer
// in time, say): the lines before it are true, but not all. Read again
// later, or per session.
type DecisionsIncomplete struct {
	Incomplete bool     `json:"incomplete"`
	Error      string   `json:"error"`
	Sessions   []string `json:"unreadableSessions"`
}
