package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// WorkflowRegistry is what can register workflows: a worker, or a replayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// The Worker Versioning behaviour of each workflow, for versioned workers
// (the SDK sends it only from those; docs/deploy.md, Deploying a new
// build). It is registration, not workflow code: no command changes, so
// replay is unaffected.
const (
	// A session lives for days and continues as new: pinned, it would keep
	// an old build alive forever. It moves to the current build at its next
	// workflow task, so its code changes still go behind GetVersion.
	sessionBehavior = workflow.VersioningBehaviorAutoUpgrade
	// A turn (and a tools-API execution, delegated ones included) is short
	// but may park for hours on a person or a job: it finishes on the build
	// that started it, which drains before it is retired.
	turnBehavior      = workflow.VersioningBehaviorPinned
	executionBehavior = workflow.VersioningBehaviorPinned
)

// Register adds the session and turn workflows under their public names.
func (r *runtime) Register(reg WorkflowRegistry) {
	reg.RegisterWorkflowWithOptions(r.Session, workflow.RegisterOptions{Name: signals.SessionWorkflow, VersioningBehavior: sessionBehavior})
	reg.RegisterWorkflowWithOptions(r.Turn, workflow.RegisterOptions{Name: signals.TurnWorkflow, VersioningBehavior: turnBehavior})
}

// Register registers eve's session, turn and tools-API execution workflows
// on w. Sessions started here record cfg (agent.Register builds it from an
// agent.Agent); n, when set, hears each event they record. Register eve's
// activities (work.Register) on the same worker.
func Register(w WorkflowRegistry, cfg Config, n Notifier) {
	r := &runtime{Config: cfg, Notifier: n}
	r.Register(w)
	r.RegisterExecutions(w)
}
