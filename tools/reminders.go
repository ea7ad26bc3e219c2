package tools

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eve-temporal/eve/auth"
)

// Reminders say when a person who has not answered an approval or a
// question is reminded before its deadline: the turn records input.reminder
// and the worker's hook (agent.Agent.OnReminder) notifies them. Reminders
// need a deadline; a request without one is never reminded.
type Reminders struct {
	// Before lists offsets before the deadline (e.g. 1h and 10m).
	Before []time.Duration `json:"before,omitempty"`
	// Every reminds at this interval from when the request opened, until
	// the deadline (0: not at intervals).
	Every time.Duration `json:"every,omitempty"`
}

// Bounds of reminders: at most MaxReminders a request (the earliest are
// dropped past it), each offset and interval at least MinReminderInterval.
const (
	MaxReminders        = 24
	MinReminderInterval = time.Second
)

// Check reports what is wrong with r, if anything (nil r is none).
func (r *Reminders) Check() error {
	if r == nil {
		return nil
	}
	if len(r.Before) == 0 && r.Every == 0 {
		return errors.New("give Before offsets, an Every interval, or no Reminders")
	}
	for _, b := range r.Before {
		if b < MinReminderInterval || b > MaxInputDeadline {
			return fmt.Errorf("Before offset %v is out of range: give between %v and %v", b, MinReminderInterval, MaxInputDeadline)
		}
	}
	if r.Every != 0 && (r.Every < MinReminderInterval || r.Every > MaxInputDeadline) {
		return fmt.Errorf("Every %v is out of range: give between %v and %v, or 0", r.Every, MinReminderInterval, MaxInputDeadline)
	}
	return nil
}

// Times are the reminders of a request opened at opened that expires at
// deadline: strictly between the two, in order, without repeats, at most
// MaxReminders (the latest kept). Deterministic: workflow code calls it.
func (r *Reminders) Times(opened, deadline time.Time) []time.Time {
	if r == nil || deadline.IsZero() || !deadline.After(opened) {
		return nil
	}
	var ts []time.Time
	add := func(t time.Time) {
		if t.After(opened) && t.Before(deadline) && !slices.ContainsFunc(ts, t.Equal) {
			ts = append(ts, t)
		}
	}
	for _, b := range r.Before {
		add(deadline.Add(-b))
	}
	if r.Every > 0 {
		for t := opened.Add(r.Every); t.Before(deadline); t = t.Add(r.Every) {
			add(t)
		}
	}
	slices.SortFunc(ts, time.Time.Compare)
	if len(ts) > MaxReminders {
		ts = ts[len(ts)-MaxReminders:]
	}
	return ts
}

// Reminder is one notice the worker's hook (agent.Agent.OnReminder) sends
// to whoever may answer an open request: a reminder before its deadline,
// or (Escalation set) the news that an approval escalated to a second
// group. It runs in an activity, once per notice; a failed attempt is
// retried, so the hook must tolerate a repeat of the same IdempotencyKey.
type Reminder struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	RequestID string `json:"requestId"`
	// Kind is the request's (tool-approval, question); ToolName and
	// Prompt what it asks.
	Kind     string `json:"kind"`
	ToolName string `json:"toolName"`
	Prompt   string `json:"prompt"`
	// Requester is who asked (nil: anonymous); Owner the session's
	// initiator.
	Requester *auth.Principal `json:"requester,omitempty"`
	Owner     *auth.Principal `json:"owner,omitempty"`
	OpenedAt  time.Time       `json:"openedAt"`
	// Deadline is when it expires (zero: none, for an escalation).
	Deadline time.Time `json:"deadline,omitzero"`
	// At is when the reminder was due; Number counts the request's
	// reminders from 1.
	At     time.Time `json:"at"`
	Number int       `json:"number"`
	// Escalation is the second group's label when this notice is the
	// escalation; EscalationAttribute/Value name its members.
	Escalation          string `json:"escalation,omitempty"`
	EscalationAttribute string `json:"escalationAttribute,omitempty"`
	EscalationValue     string `json:"escalationValue,omitempty"`
	// IdempotencyKey is the same on every attempt of this notice
	// (<session>/<turn>/<request>/<n> or …/escalation).
	IdempotencyKey string `json:"idempotencyKey"`
}
