package tools

import (
	"encoding/json"
	"errors"
	"time"
)

// Nexus configures a Nexus tool: an operation of a Nexus service behind a
// Nexus endpoint, which the turn (or a tools API execution) calls when the
// model calls the tool. The endpoint routes it to its handler, usually in
// another namespace that the caller never learns; the operation receives
// the call's input (as JSON) and its result is the call's output
// (docs/workflow-tools.md).
type Nexus struct {
	// Endpoint is the Nexus endpoint's name (required), as the operator
	// created it (temporal operator nexus endpoint create).
	Endpoint string
	// Service and Operation name the operation (both required).
	Service   string
	Operation string
	// ScheduleToClose bounds the operation, from its scheduling to its
	// result, retries included, and is the call's deadline: the call fails
	// with DEADLINE_EXCEEDED then. DefaultDeadline when zero.
	ScheduleToClose time.Duration
}

// DefineNexus defines a Nexus tool: a call runs the operation n.Operation
// of n.Service behind n.Endpoint and settles with its result (checked
// against outputSchema, when given). A cancelled call asks the operation
// to cancel. Approval policies, response policies, edits and the rest of
// a Tool's fields apply as to any tool.
func DefineNexus(name, description string, inputSchema, outputSchema json.RawMessage, n Nexus) *Tool {
	return &Tool{Name: name, Description: description, InputSchema: inputSchema, OutputSchema: outputSchema, Nexus: &n}
}

func (t *Tool) nexusDeadline() time.Duration {
	if t.Nexus.ScheduleToClose > 0 {
		return t.Nexus.ScheduleToClose
	}
	return DefaultDeadline
}

func (t *Tool) compileNexus() []error {
	var errs []error
	n := t.Nexus
	if t.Execute != nil {
		errs = append(errs, errors.New("a Nexus tool runs its operation, not Execute: drop Execute"))
	}
	if n.Endpoint == "" || n.Service == "" || n.Operation == "" {
		errs = append(errs, errors.New("Nexus.Endpoint, Nexus.Service and Nexus.Operation are required"))
	}
	if n.ScheduleToClose < 0 {
		errs = append(errs, errors.New("Nexus.ScheduleToClose must not be negative (0 means DefaultDeadline)"))
	}
	if t.Local {
		errs = append(errs, errors.New("a Nexus tool cannot be Local: it runs as a Nexus operation"))
	}
	if t.Retry != nil || t.Idempotent || t.Timeout != 0 || t.HeartbeatTimeout != 0 {
		errs = append(errs, errors.New("a Nexus tool has no activity: set Nexus.ScheduleToClose instead of Retry, Idempotent, Timeout or HeartbeatTimeout"))
	}
	return errs
}
