package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Search attributes that let an operator find parked sessions in the
// Temporal UI, e.g. `EveStatus = "waiting-input"`. They must be registered
// on the namespace (eve dev does it; see docs/operations.md and eve doctor);
// a worker enables them only when they are.
var (
	searchStatus  = temporal.NewSearchAttributeKeyKeyword("EveStatus")
	searchTools   = temporal.NewSearchAttributeKeyKeywordList("EveTools")
	searchSession = temporal.NewSearchAttributeKeyKeyword("EveSessionId")
)

// Statuses of EveStatus.
const (
	statusIdle         = "idle"
	statusRunning      = "running"
	statusWaitingInput = "waiting-input"
	statusWaitingTasks = "waiting-tasks"
)

// setStatus records a status (and the tools waited on) for visibility. A
// no-op unless the session recorded that the attributes exist.
func setStatus(ctx workflow.Context, cfg Config, sessionID, status string, tools []string) {
	if !cfg.SearchAttributes {
		return
	}
	if tools == nil {
		tools = []string{}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		searchStatus.ValueSet(status),
		searchTools.ValueSet(tools),
		searchSession.ValueSet(sessionID),
	)
}
