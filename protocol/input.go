package protocol

import (
	"encoding/json"
	"time"
)

// Input request kinds.
const (
	KindToolApproval = "tool-approval"
	KindQuestion     = "question"
	// KindSessionLimit asks whether a session over its usage limits goes
	// on (options continue and stop).
	KindSessionLimit = "session-limit"
)

// Displays of an input request.
const (
	DisplayConfirmation = "confirmation"
	DisplaySelect       = "select"
	DisplayText         = "text"
)

// Resolution outcomes.
const (
	OutcomeAnswered  = "answered"
	OutcomeApproved  = "approved"
	OutcomeCancelled = "cancelled"
	OutcomeDenied    = "denied"
	OutcomeIgnored   = "ignored"
	OutcomeInvalid   = "invalid"
	// OutcomeExpired: nobody answered before the request's deadline
	// (tools.Tool.InputDeadline, agent.Agent.InputDeadline); not a denial
	// and not a cancellation.
	OutcomeExpired = "expired"
)

// InputOption is one choice of an input request.
type InputOption struct {
	Description string `json:"description,omitempty"`
	ID          string `json:"id"`
	Label       string `json:"label"`
	Style       string `json:"style,omitempty"` // primary, danger, default
}

// InputRequest asks a person for input: eve's strict wire shape, and in
// input.requested (from eve for Go 0.5) the request's times when it has
// them, which eve's reducer keeps with the request (docs/events.md).
type InputRequest struct {
	Action        ToolCallAction `json:"action"`
	AllowFreeform bool           `json:"allowFreeform,omitempty"`
	Display       string         `json:"display,omitempty"`
	Kind          string         `json:"kind"`
	Options       []InputOption  `json:"options,omitempty"`
	Prompt        string         `json:"prompt"`
	RequestID     string         `json:"requestId"`
	// Deadline is when the request expires unanswered (input.resolved
	// expired); NextReminderAt when its first reminder is due
	// (input.reminder); EscalatesAt when it escalates to a second group
	// (approval.escalated). Each only when set, and only in input.requested.
	Deadline       *time.Time `json:"deadline,omitempty"`
	NextReminderAt *time.Time `json:"nextReminderAt,omitempty"`
	EscalatesAt    *time.Time `json:"escalatesAt,omitempty"`
}

// InputResponse answers one input request.
type InputResponse struct {
	OptionID  string `json:"optionId,omitempty"`
	RequestID string `json:"requestId"`
	Text      string `json:"text,omitempty"`
	// Input approves a tool call with this input instead of the model's
	// (only with the approving option, on a tool whose approval is
	// editable: approval.Policy.Editable). eve's own clients never send it.
	Input json.RawMessage `json:"input,omitempty"`
}

// InputResolution is one accepted terminal resolution.
type InputResolution struct {
	Kind      string         `json:"kind"`
	Outcome   string         `json:"outcome"`
	RequestID string         `json:"requestId"`
	Response  *InputResponse `json:"response,omitempty"`
	// OriginalInput and EditedBy are set when a person approved the call
	// with an edited input (Response.Input, the input that ran): the
	// model's input, and who edited it.
	OriginalInput json.RawMessage `json:"originalInput,omitempty"`
	EditedBy      *PrincipalRef   `json:"editedBy,omitempty"`
}

type InputRequestedData struct {
	Requests []InputRequest `json:"requests"`
	StepRef
	// TaskID is set when a task's work asked (tools.Context.Ask from a
	// task tool's call): the task the request serves.
	TaskID string `json:"taskId,omitempty"`
	// CallID is set on a request proxied from a subagent (eve's relay):
	// the parent's call whose child session asked. The requests keep the
	// child's ids and the step reference is the child's.
	CallID string `json:"callId,omitempty"`
}

type InputResolvedData struct {
	Resolutions []InputResolution `json:"resolutions"`
	StepRef
}

// Outcomes of approval.candidate: pending (recorded before the policy
// runs), then rejected (the policy's reason), failed (the policy erred),
// timed-out (it did not answer in time) or stale (the request was settled
// or withdrawn meanwhile). An allowed candidate ends in approval.settled.
const (
	CandidatePending  = "pending"
	CandidateRejected = "rejected"
	CandidateFailed   = "failed"
	CandidateTimedOut = "timed-out"
	CandidateStale    = "stale"
)

// ApprovalCandidateData is approval.candidate: one responder's response to
// an approval request, judged by the tool's response policy.
type ApprovalCandidateData struct {
	CandidateID          string `json:"candidateId"`
	Outcome              string `json:"outcome"`
	RequestID            string `json:"requestId"`
	ResponderPrincipalID string `json:"responderPrincipalId"`
	Reason               string `json:"reason,omitempty"`
	StepRef
}

// ApprovalSettledData is approval.settled: the durable settlement of an
// approval request by a person, before its input.resolved. Outcome is
// "approved" or "cancelled".
type ApprovalSettledData struct {
	Outcome              string `json:"outcome"`
	RequestID            string `json:"requestId"`
	ResponderPrincipalID string `json:"responderPrincipalId"`
	StepRef
}
