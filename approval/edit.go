package approval

// Editable returns p letting the reviewer approve a call with an edited
// input (the reviewer's InputResponse.Input) instead of the model's. The
// edit must match the tool's input schema, and p itself (a custom policy,
// Auto) and its response policy judge the edited call again before it
// runs, so an edit cannot make a call the policy would deny, or that this
// reviewer may not approve. The model then reads the call with the input
// that ran, and a note naming who edited it and what it first asked for.
//
// Only a policy that asks a person can be editable: Always, Once, Custom
// and Auto (registering an editable Never, or a client tool, is an error).
func (p Policy) Editable() Policy {
	p.editable = true
	return p
}

// IsEditable reports whether a reviewer may edit the input (Editable).
func (p Policy) IsEditable() bool { return p.editable }
