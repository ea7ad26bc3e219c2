package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// WorkflowRegistry is what can register workflows: a worker, or a replayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register adds the session and turn workflows under their public names.
func (r *Runtime) Register(reg WorkflowRegistry) {
	reg.RegisterWorkflowWithOptions(r.Session, workflow.RegisterOptions{Name: signals.SessionWorkflow})
	reg.RegisterWorkflowWithOptions(r.Turn, workflow.RegisterOptions{Name: signals.TurnWorkflow})
}
