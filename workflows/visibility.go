package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// Search attributes that let an operator find parked sessions in the
// Temporal UI, e.g. `EveStatus = "waiting-input"`. They must be registered
// on the namespace (eve dev does it; see docs/operations.md and eve doctor);
// a worker enables them only when they are.
var (
	searchStatus  = temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrStatus)
	searchTools   = temporal.NewSearchAttributeKeyKeywordList("EveTools")
	searchSession = temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionID)
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

// visState is everything eve records of one workflow in search attributes:
// its status (and the tools it waits on), its session, and for a turn the
// inbox's attributes. A writer (changeSearchWrites) keeps the last state
// it wrote, or that the workflow started with, and upserts only the keys
// that changed, once per workflow task in which any did.
type visState struct {
	status  string
	tools   []string
	session string
	// inbox: the turn has open requests (EveInbox = "open") by requester,
	// of kinds, the oldest opened at parkedAt.
	inbox     bool
	requester string
	kinds     []string
	parkedAt  time.Time
}

// visStart reads the attributes a workflow started with (set by its
// starter: the API's sessions.Service, a session for its turns), so a
// writer does not upsert what is already there.
func visStart(ctx workflow.Context) visState {
	sa := workflow.GetTypedSearchAttributes(ctx)
	var v visState
	v.status, _ = sa.GetKeyword(searchStatus)
	v.tools, _ = sa.GetKeywordList(searchTools)
	v.session, _ = sa.GetKeyword(searchSession)
	if s, _ := sa.GetKeyword(searchInbox); s == inboxOpen {
		v.inbox = true
		v.requester, _ = sa.GetKeyword(searchRequester)
		v.kinds, _ = sa.GetKeywordList(searchRequestKind)
		v.parkedAt, _ = sa.GetTime(searchParkedAt)
	}
	return v
}

// updates are the upserts that take a workflow from w to v: only the keys
// that changed (a status key once set is never unset; the inbox's keys are
// unset when it closes).
func (w visState) updates(v visState, inbox bool) []temporal.SearchAttributeUpdate {
	var out []temporal.SearchAttributeUpdate
	if v.status != w.status {
		out = append(out, searchStatus.ValueSet(v.status))
	}
	if !slices.Equal(v.tools, w.tools) {
		out = append(out, searchTools.ValueSet(nonNil(v.tools)))
	}
	if v.session != w.session {
		out = append(out, searchSession.ValueSet(v.session))
	}
	if !inbox {
		return out
	}
	switch {
	case v.inbox && (!w.inbox || v.requester != w.requester || !slices.Equal(v.kinds, w.kinds) || !v.parkedAt.Equal(w.parkedAt)):
		out = append(out, searchInbox.ValueSet(inboxOpen), searchRequester.ValueSet(v.requester),
			searchRequestKind.ValueSet(nonNil(v.kinds)), searchParkedAt.ValueSet(v.parkedAt))
	case !v.inbox && w.inbox:
		out = append(out, searchInbox.ValueUnset(), searchRequester.ValueUnset(), searchRequestKind.ValueUnset(), searchParkedAt.ValueUnset())
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writeVisibility starts the writer of a workflow's attributes: whenever
// state() differs from what was written, it upserts the difference. It runs
// as a coroutine of its own, so the changes one workflow task makes (a
// session that takes a message and starts its turn, a turn that parks and
// opens its requests) cost one upsert, written after the task's other
// coroutines have moved. inbox: the turn publishes the inbox's attributes.
//
// A workflow that leaves waiting-input for running (its requests were
// answered) does not write it (changeParkWrites): the attributes keep
// saying waiting-input, and what they lag is in the memo, which is no
// billable action: the turn's inbox memo (the inbox drops a turn whose
// memo has no open request), and with status the session's StatusMemo
// (the sessions listing reads it). The next change that is not such an
// un-park (idle when the turn ends, a new park, waiting-tasks) writes
// everything that differs then. A turn that parks once thus writes once.
//
// versions is the workflow's input Versions (changeOn).
func writeVisibility(ctx workflow.Context, state func() visState, inbox, status bool, versions int) {
	written := visStart(ctx)
	// shown is what readers see: the attributes, or once an un-park was
	// not written (lazy), the memo.
	shown := written
	lazy := false
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var next visState
			if err := workflow.Await(ctx, func() bool {
				next = state()
				return len(shown.updates(next, inbox)) > 0
			}); err != nil {
				return
			}
			ups := written.updates(next, inbox)
			if len(ups) > 0 && unparks(written, next) && (lazy || changeOn(ctx, versions, changeParkWrites)) {
				lazy, ups = true, nil
			}
			if len(ups) > 0 {
				_ = workflow.UpsertTypedSearchAttributes(ctx, ups...)
				written = next
			}
			if lazy && status {
				_ = workflow.UpsertMemo(ctx, map[string]any{signals.MemoStatus: signals.StatusMemo{Status: next.status, Tools: next.tools}})
			}
			shown = next
		}
	})
}

// unparks reports a change from waiting-input (as written) to running with
// no open request: the change changeParkWrites leaves unwritten.
func unparks(written, next visState) bool {
	return written.status == statusWaitingInput && next.status == statusRunning && !next.inbox
}
