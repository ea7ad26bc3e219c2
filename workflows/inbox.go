package workflows

import (
	"slices"
	"strconv"
	"time"

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
func publishInbox(ctx workflow.Context, b *inputBoard) {
	published := ""
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return b.openKey() != published }); err != nil {
				return
			}
			published = b.openKey()
			upsertInbox(ctx, b)
		}
	})
}

// publishInboxMemo is publishInbox's memo alone: the attributes are the
// turn's attribute writer's (changeSearchWrites). The memo is no billable
// action; it follows every change of the open requests.
//
// relayed counts the open requests the turn's subagents proxied through it
// (0 for a turn that records none: changeProxyTyped), so the memo says
// whether the turn waits on people at all (sessions.List reads it).
func publishInboxMemo(ctx workflow.Context, b *inputBoard, relayed func() int) {
	published := ""
	key := func() string {
		if n := relayed(); n > 0 {
			return b.openKey() + "/" + strconv.Itoa(n)
		}
		return b.openKey() // as before relayed counts: "" for none open
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return key() != published }); err != nil {
				return
			}
			published = key()
			memo := b.inboxMemo()
			memo.Relayed = relayed()
			_ = workflow.UpsertMemo(ctx, map[string]any{signals.MemoInbox: memo})
		}
	})
}

// inboxMemo is the memo of the open requests.
func (b *inputBoard) inboxMemo() signals.InboxMemo {
	memo := signals.InboxMemo{SessionID: b.session.ID, TurnID: b.turnID, Owner: b.session.Auth.Initiator, Requester: b.requester, Items: []signals.InboxEntry{}, Origin: b.origin}
	for _, r := range b.requests {
		if !r.state.closed() {
			memo.Items = append(memo.Items, r.inboxEntry())
		}
	}
	return memo
}

// inboxAttributes are the inbox's attributes of the open requests: whether
// any is open, the requester, their kinds and the oldest one's opening.
func (b *inputBoard) inboxAttributes() (open bool, requester string, kinds []string, parkedAt time.Time) {
	for _, r := range b.requests {
		if r.state.closed() {
			continue
		}
		if !open || r.opened.Before(parkedAt) {
			parkedAt = r.opened
		}
		open = true
		if !slices.Contains(kinds, r.req.Kind) {
			kinds = append(kinds, r.req.Kind)
		}
	}
	if open && b.requester != nil {
		requester = b.requester.ID
	}
	return open, requester, kinds, parkedAt
}

func upsertInbox(ctx workflow.Context, b *inputBoard) {
	memo := signals.InboxMemo{SessionID: b.session.ID, TurnID: b.turnID, Owner: b.session.Auth.Initiator, Requester: b.requester, Items: []signals.InboxEntry{}, Origin: b.origin}
	var kinds []string
	var tools []string
	var parked = workflow.Now(ctx)
	for _, r := range b.requests {
		if r.state.closed() {
			continue
		}
		memo.Items = append(memo.Items, r.inboxEntry())
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
	if p := b.requester; p != nil {
		requester = p.ID
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		searchInbox.ValueSet(inboxOpen),
		searchRequester.ValueSet(requester),
		searchRequestKind.ValueSet(kinds),
		searchParkedAt.ValueSet(parked),
		searchTools.ValueSet(tools),
		searchSession.ValueSet(b.session.ID),
	)
}
