package protocol

// Input request kinds.
const (
	KindToolApproval = "tool-approval"
	KindQuestion     = "question"
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
)

// InputOption is one choice of an input request.
type InputOption struct {
	Description string `json:"description,omitempty"`
	ID          string `json:"id"`
	Label       string `json:"label"`
	Style       string `json:"style,omitempty"` // primary, danger, default
}

// InputRequest asks a person for input. Strict on the wire: no extra fields.
type InputRequest struct {
	Action        ToolCallAction `json:"action"`
	AllowFreeform bool           `json:"allowFreeform,omitempty"`
	Display       string         `json:"display,omitempty"`
	Kind          string         `json:"kind"`
	Options       []InputOption  `json:"options,omitempty"`
	Prompt        string         `json:"prompt"`
	RequestID     string         `json:"requestId"`
}

// InputResponse answers one input request.
type InputResponse struct {
	OptionID  string `json:"optionId,omitempty"`
	RequestID string `json:"requestId"`
	Text      string `json:"text,omitempty"`
}

// InputResolution is one accepted terminal resolution.
type InputResolution struct {
	Kind      string         `json:"kind"`
	Outcome   string         `json:"outcome"`
	RequestID string         `json:"requestId"`
	Response  *InputResponse `json:"response,omitempty"`
}

type InputRequestedData struct {
	Requests []InputRequest `json:"requests"`
	StepRef
}

type InputResolvedData struct {
	Resolutions []InputResolution `json:"resolutions"`
	StepRef
}
