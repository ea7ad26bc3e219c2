package approval

import (
	"errors"
	"fmt"
	"time"

	"github.com/eve-temporal/eve/auth"
)

// WithDeadline returns p with a per-call deadline: fn reads the validated
// input of the call a person is asked about and returns how long they have
// to answer. It wins over the tool's (tools.Tool.InputDeadline) and the
// agent's default; 0 keeps those, a negative value means no deadline for
// this call, and a panic keeps those too. Like a prompt builder it runs
// when the model asks for the call, and its answer is recorded in the
// call's plan: it must decide from the input only.
func (p Policy) WithDeadline(fn func(c PromptContext) time.Duration) Policy {
	p.deadline = fn
	return p
}

// Deadline is the call's own deadline (0: none given; see WithDeadline).
func (p Policy) Deadline(c PromptContext) (d time.Duration) {
	if p.deadline == nil {
		return 0
	}
	defer func() {
		if recover() != nil {
			d = 0
		}
	}()
	return p.deadline(c)
}

// Escalation widens who may settle an approval left unanswered: After the
// request opened, the turn records approval.escalated and the response
// policy sees the request as escalated (Request.EscalatedAt). With
// Attribute and Value, principals whose attribute has that value (e.g.
// group=managers) may then settle it: the inbox lists it for them and the
// session routes let them answer it, without other access to the session.
// Without them, the app's own response policy decides what escalation
// changes (WithResponse).
type Escalation struct {
	After     time.Duration `json:"after"`
	Attribute string        `json:"attribute,omitempty"`
	Value     string        `json:"value,omitempty"`
	// Label names the second group in approval.escalated (default
	// "<attribute>=<value>").
	Label string `json:"label,omitempty"`
}

// Bounds of Escalation.After.
const (
	MinEscalationAfter = time.Second
	MaxEscalationAfter = 365 * 24 * time.Hour
)

// Check reports what is wrong with e, if anything.
func (e Escalation) Check() error {
	if e.After < MinEscalationAfter || e.After > MaxEscalationAfter {
		return fmt.Errorf("escalation: After %v is out of range: give between %v and %v", e.After, MinEscalationAfter, MaxEscalationAfter)
	}
	if (e.Attribute == "") != (e.Value == "") {
		return errors.New("escalation: give both Attribute and Value (the second group), or neither (your response policy decides)")
	}
	return nil
}

// GroupLabel is e's label: Label, else "<attribute>=<value>", else
// "escalated".
func (e Escalation) GroupLabel() string {
	switch {
	case e.Label != "":
		return e.Label
	case e.Attribute != "":
		return e.Attribute + "=" + e.Value
	}
	return "escalated"
}

// Includes reports whether p belongs to e's second group.
func (e Escalation) Includes(p *auth.Principal) bool {
	return e.Attribute != "" && p != nil && p.Type != auth.TypeAnonymous && p.Attr(e.Attribute) == e.Value
}

// WithEscalation returns p with an escalation (see Escalation). A tool
// whose policy escalates counts as having a response policy: before the
// escalation the requester (or p's own response policy) decides, after it
// the second group may too, without p's response policy being asked for
// them (it still judges every other answer).
func (p Policy) WithEscalation(e Escalation) Policy {
	p.escalation = &e
	return p
}

// EscalateAfter is the common case: after d unanswered, principals whose
// attribute has value (e.g. EscalateAfter(4*time.Hour, "group", "managers"))
// may settle the approval as well.
func (p Policy) EscalateAfter(d time.Duration, attribute, value string) Policy {
	return p.WithEscalation(Escalation{After: d, Attribute: attribute, Value: value})
}

// Escalation returns p's escalation, if it has one.
func (p Policy) Escalation() (Escalation, bool) {
	if p.escalation == nil {
		return Escalation{}, false
	}
	return *p.escalation, true
}
