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
	SearchStatus  = temporal.NewSearchAttributeKeyKeyword("EveStatus")
	SearchTools   = temporal.NewSearchAttributeKeyKeywordList("EveTools")
	SearchSession = temporal.NewSearchAttributeKeyKeyword("EveSessionId")
)

// SearchAttributeTypes names each attribute's type, for registration.
var SearchAttributeTypes = map[string]string{
	"EveStatus":    "Keyword",
	"EveTools":     "KeywordList",
	"EveSessionId": "Keyword",
	// The inbox (inbox.go).
	"EveInbox":        "Keyword",
	"EveRequester":    "Keyword",
	"EveRequestKinds": "KeywordList",
	"EveParkedAt":     "Datetime",
}

// InboxAttributes are the attributes only the inbox needs: a namespace
// that has the others but not these records session status, and its
// parked turns are not listed in the inbox.
var InboxAttributes = []string{"EveInbox", "EveRequester", "EveRequestKinds", "EveParkedAt"}

// Statuses of EveStatus.
const (
	StatusIdle         = "idle"
	StatusRunning      = "running"
	StatusWaitingInput = "waiting-input"
	StatusWaitingTasks = "waiting-tasks"
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
		SearchStatus.ValueSet(status),
		SearchTools.ValueSet(tools),
		SearchSession.ValueSet(sessionID),
	)
}
