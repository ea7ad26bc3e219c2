package tools

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/eve-temporal/eve/signals"
)

// Completion is how an external job finishes a delegated call: POST the
// result to URL (a signed capability URL; no other credential needed).
// Package actions posts it for Go jobs.
type Completion = signals.Completion

// Action is handed to a delegated tool's Delegate function.
type Action struct {
	// ID is stable across replays and retries: use it as the job's
	// idempotency key.
	ID         string     `json:"id"`
	Completion Completion `json:"completion"`
	// TaskToken is the raw Temporal task token, for jobs that complete the
	// activity with a Temporal client themselves.
	TaskToken []byte    `json:"taskToken,omitempty"`
	Deadline  time.Time `json:"deadline"`
}

// Pending is the sentinel a delegated tool returns once its job is enqueued.
// It never reaches the model: the job's completion does.
type Pending struct{ actionID string }

// Pending returns the sentinel for this action.
func (a Action) Pending() Pending { return Pending{actionID: a.ID} }

// ActionID names the action the sentinel belongs to.
func (p Pending) ActionID() string { return p.actionID }

// DelegateFunc starts an external job for a call and returns action.Pending().
// An error fails the call like any tool error.
type DelegateFunc func(ctx *Context, input json.RawMessage, action Action) (Pending, error)

// DefaultDeadline bounds how long a delegated call waits for its job when
// the tool sets no deadline. No action waits forever.
const DefaultDeadline = 24 * time.Hour

// Delegated configures a delegated tool.
type Delegated struct {
	Delegate DelegateFunc
	// Deadline is the tool's default (DefaultDeadline when zero).
	Deadline time.Duration
	// DeadlineFor, when set, computes a per-call deadline from the input
	// (zero means the tool's default).
	DeadlineFor func(input json.RawMessage) (time.Duration, error)
}

// DefineDelegated defines a delegated tool: Delegate enqueues an external
// job and returns action.Pending(); the job completes the call later through
// action.Completion (or the task token), before the deadline.
func DefineDelegated(name, description string, inputSchema, outputSchema json.RawMessage, d Delegated) *Tool {
	return &Tool{Name: name, Description: description, InputSchema: inputSchema, OutputSchema: outputSchema, Delegated: &d}
}

// DeadlineOf returns the deadline of one call of a delegated, workflow or
// Nexus tool.
func (t *Tool) DeadlineOf(input json.RawMessage) (time.Duration, error) {
	if t.Workflow != nil {
		return t.workflowDeadline(), nil
	}
	if t.Nexus != nil {
		return t.nexusDeadline(), nil
	}
	if t.Delegated == nil {
		return 0, errors.New("not a delegated, workflow or Nexus tool")
	}
	d := t.Delegated.Deadline
	if t.Delegated.DeadlineFor != nil {
		v, err := t.Delegated.DeadlineFor(input)
		if err != nil {
			return 0, err
		}
		if v > 0 {
			d = v
		}
	}
	if d <= 0 {
		d = DefaultDeadline
	}
	return d, nil
}

func (t *Tool) compileDelegated() []error {
	var errs []error
	if t.Execute != nil {
		errs = append(errs, errors.New("a delegated tool has Delegated.Delegate, not Execute"))
	}
	if t.Delegated.Delegate == nil {
		errs = append(errs, errors.New("Delegated.Delegate is required"))
	}
	if t.Delegated.Deadline < 0 {
		errs = append(errs, errors.New("Delegated.Deadline must not be negative"))
	}
	if t.Local {
		errs = append(errs, errors.New("a delegated tool cannot be Local: it is completed asynchronously"))
	}
	return errs
}
