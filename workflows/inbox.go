package workflows

import (
	"encoding/json"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// The inbox's search attributes (docs/http-api.md, "Inbox"): a turn with
// open requests sets them and its memo (signals.MemoInbox); it unsets them
// once none is open, so Visibility lists exactly the parked turns.
var (
	searchInbox       = temporal.NewSearchAttributeKeyKeyword("EveInbox")
	searchRequester   = temporal.NewSearchAttributeKeyKeyword("EveRequester")
	searchRequestKind = temporal.NewSearchAttributeKeyKeywordList("EveRequestKinds")
	searchParkedAt    = temporal.NewSearchAttributeKeyTime("EveParkedAt")
)

// inboxOpen is EveInbox's value on a turn with open requests.
const inboxOpen = "open"

// publishInbox follows the board in a coroutine of its own: whenever the
// set of open requests changes, it upserts the memo and the attributes in
// the same workflow task (so every path that opens or settles a request is
// covered, and a retried task upserts the same).
func (t *turn) publishInbox(ctx workflow.Context) {
	published := ""
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return t.board.openKey() != published }); err != nil {
				return
			}
			published = t.board.openKey()
			t.upsertInbox(ctx)
		}
	})
}

// openKey identifies the set of open requests.
func (b *inputBoard) openKey() string {
	var ids []string
	for _, r := range b.requests {
		if !r.settled {
			id := r.req.RequestID
			if !r.follow.escalatedAt.IsZero() {
				id += "\x01escalated" // republished when it escalates
			}
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, "\x00")
}

func (t *turn) upsertInbox(ctx workflow.Context) {
	memo := signals.InboxMemo{SessionID: t.in.SessionID, TurnID: t.in.TurnID, Owner: t.in.Auth.Initiator, Requester: t.requester(), Items: []signals.InboxEntry{}}
	var kinds []string
	var tools []string
	var parked = workflow.Now(ctx)
	for _, r := range t.board.requests {
		if r.settled {
			continue
		}
		e := signals.InboxEntry{Request: r.req, OpenedAt: r.opened, Judged: t.judged(r), Editable: r.plan.Editable, InputSchema: r.plan.InputSchema}
		if !r.deadline.IsZero() {
			d := r.deadline
			e.Deadline = &d
		}
		r.inboxEscalation(&e)
		if b, _ := json.Marshal(e); len(b) > signals.MaxInboxEntryBytes {
			e.InputSchema = nil // the tool's schema goes first
		}
		if b, _ := json.Marshal(e); len(b) > signals.MaxInboxEntryBytes {
			e.Request.Action.Input = json.RawMessage(`{}`)
		}
		memo.Items = append(memo.Items, e)
		if !slices.Contains(kinds, r.req.Kind) {
			kinds = append(kinds, r.req.Kind)
		}
		if n := r.req.Action.ToolName; n != "" && !slices.Contains(tools, n) {
			tools = append(tools, n)
		}
		if r.opened.Before(parked) {
			parked = r.opened
		}
	}
	_ = workflow.UpsertMemo(ctx, map[string]any{signals.MemoInbox: memo})
	if len(memo.Items) == 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, searchInbox.ValueUnset(), searchRequester.ValueUnset(), searchRequestKind.ValueUnset(), searchParkedAt.ValueUnset())
		return
	}
	requester := ""
	if p := t.requester(); p != nil {
		requester = p.ID
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		searchInbox.ValueSet(inboxOpen),
		searchRequester.ValueSet(requester),
		searchRequestKind.ValueSet(kinds),
		searchParkedAt.ValueSet(parked),
		searchTools.ValueSet(tools),
		searchSession.ValueSet(t.in.SessionID),
	)
}
