package protocol

import "time"

// Events of deadlines beyond eve (docs/events.md, "Reminders and
// escalation"): eve's clients ignore them.
const (
	// InputReminder: a request is still open before its deadline; the
	// worker's reminder hook notifies whoever may answer.
	InputReminder = "input.reminder"
	// ApprovalEscalated: an approval left unanswered widened to a second
	// group (its response policy sees it as escalated).
	ApprovalEscalated = "approval.escalated"
)

// InputReminderData is input.reminder: the Number-th reminder of an open
// request, due At, before its Deadline.
type InputReminderData struct {
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	Deadline  time.Time `json:"deadline"`
	Number    int       `json:"number"`
	StepRef
}

// ApprovalEscalatedData is approval.escalated: At, the approval RequestID
// escalated to Group (its label, e.g. "group=managers").
type ApprovalEscalatedData struct {
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	Group     string    `json:"group"`
	StepRef
}
