package e2e

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/cli"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
)

// inboxAPI is the demo agent publishing its requests to Visibility, behind
// a server with apiTestKeys.
func inboxAPI(t *testing.T) *apiEnv {
	t.Helper()
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(a, agent.Host{SearchAttributes: true, InboxAttributes: true})
	return newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys })
}

// inboxAll follows the cursor through every page of c's inbox.
func inboxAll(t *testing.T, e *apiEnv, c *client.Client, f client.InboxFilter) []client.InboxItem {
	t.Helper()
	var out []client.InboxItem
	for pages := 0; ; pages++ {
		p, err := c.Inbox(e.Ctx(20*time.Second), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.NextCursor == "" {
			return out
		}
		if pages > 100 {
			t.Fatal("the inbox cursor does not end")
		}
		f.Cursor = p.NextCursor
	}
}

func inboxIDs(items []client.InboxItem) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

// waitInbox waits until c's inbox (Visibility is eventually consistent)
// holds exactly want.
func waitInbox(t *testing.T, e *apiEnv, c *client.Client, f client.InboxFilter, want ...string) []client.InboxItem {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		items := inboxAll(t, e, c, f)
		got := inboxIDs(items)
		if slices.Equal(got, want) || want == nil && len(got) == 0 {
			return items
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbox %+v = %v, want %v", f, got, want)
		}
		time.Sleep(100 * time.Millisecond) // polling Visibility, not a barrier
	}
}

// The inbox lists open requests across sessions from Visibility: requests
// of 3 sessions of 2 users, and each principal sees only what it may
// settle (the default rule: the requester; a response policy's approval:
// whoever may answer the session). Filters narrow it, the cursor pages it,
// and an answer from the inbox settles the request as inputResponses do.
func TestInboxAcrossSessions(t *testing.T) {
	e := inboxAPI(t)
	ctx := e.Ctx(120 * time.Second)
	alice, bob, manager := e.as("key-alice"), e.as("key-bob"), e.as("key-manager")
	refund := parkOver(t, ctx, alice, "", "refund ch_1 for 5")
	transfer := parkOver(t, ctx, alice, "", "transfer 25 to bob")
	bobs := parkOver(t, ctx, bob, "", "refund ch_2 for 7")
	idOf := func(turn *client.Turn) string { return protocol.InboxID(turn.SessionID, turn.Open[0].RequestID) }
	aRefund, aTransfer, bRefund := idOf(refund), idOf(transfer), idOf(bobs)

	items := waitInbox(t, e, alice, client.InboxFilter{}, aRefund, aTransfer)
	waitInbox(t, e, bob, client.InboxFilter{}, bRefund)
	waitInbox(t, e, manager, client.InboxFilter{}) // may answer no session
	for _, it := range items {
		if it.ID == aRefund && (it.SessionID != refund.SessionID || it.Kind != protocol.KindToolApproval || it.ToolName != "refund_charge" ||
			it.RequesterPrincipalID != "alice" || it.Request.Prompt != "Refund $5.00 for charge ch_1?" || it.OpenedAt.IsZero()) {
			t.Fatalf("item = %+v", it)
		}
	}
	if !items[0].OpenedAt.Before(items[1].OpenedAt) && !items[0].OpenedAt.Equal(items[1].OpenedAt) {
		t.Fatalf("items not oldest first: %+v", items)
	}

	// Filters, and a page of one turn at a time.
	waitInbox(t, e, alice, client.InboxFilter{Tool: "refund_charge"}, aRefund)
	waitInbox(t, e, alice, client.InboxFilter{SessionID: transfer.SessionID}, aTransfer)
	waitInbox(t, e, alice, client.InboxFilter{Kind: protocol.KindQuestion})
	waitInbox(t, e, alice, client.InboxFilter{Requester: "bob"})
	waitInbox(t, e, alice, client.InboxFilter{MinAge: time.Hour})
	waitInbox(t, e, alice, client.InboxFilter{Limit: 1}, aRefund, aTransfer)

	// eve inbox, as bob: his one request; he denies it with a reason.
	out := inboxCLI(t, e, "key-bob", "list", "--json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"id":"`+bRefund+`"`) {
		t.Fatalf("eve inbox list as bob:\n%s", out)
	}
	// His request has no deadline: none is due within the hour.
	if out := inboxCLI(t, e, "key-bob", "list", "--json", "--due-within", "1h"); strings.TrimSpace(out) != "" {
		t.Fatalf("eve inbox list --due-within 1h as bob:\n%s", out)
	}
	if out := inboxCLI(t, e, "key-bob", "show", bRefund); !strings.Contains(out, `"chargeId": "ch_2"`) {
		t.Fatalf("eve inbox show:\n%s", out)
	}
	if out := inboxCLI(t, e, "key-bob", "deny", bRefund, "--reason", "not this one"); strings.TrimSpace(out) != bobs.Open[0].RequestID+" denied" {
		t.Fatalf("eve inbox deny: %q", out)
	}
	if evs := e.WaitIdle(bobs.SessionID); !strings.Contains(e.Reply(bobs.SessionID), "not this one") {
		t.Fatalf("bob's denial: %s reply %q", evetest.Join(evs), e.Reply(bobs.SessionID))
	}
	waitInbox(t, e, bob, client.InboxFilter{})

	// bob may not settle alice's request: 403, and it stays open.
	if _, err := bob.AnswerInbox(ctx, aRefund, protocol.InboxAnswer{OptionID: "approve"}); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob answering alice's request: %v, want 403", err)
	}
	r := e.do(t, "POST", "/eve/v1/inbox/not-an-id", map[string]any{"optionId": "approve"}, bearer("key-alice"))
	wantError(t, r, http.StatusBadRequest, "invalid_id", "inbox id")
	// An answer the turn refuses is refused as inputResponses are.
	if _, err := alice.AnswerInbox(ctx, aRefund, protocol.InboxAnswer{OptionID: "maybe"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("a bad option: %v, want 400", err)
	}
	acc, err := alice.AnswerInbox(ctx, aRefund, protocol.InboxAnswer{OptionID: "approve"})
	if err != nil || len(acc.Resolutions) != 1 || acc.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("alice approves from the inbox: %+v, %v", acc, err)
	}
	evs := e.WaitIdle(refund.SessionID)
	if !strings.Contains(evetest.Join(evs), "approval.settled input.resolved decision.recorded action.result") || e.Reply(refund.SessionID) != "Refund of ch_1: 5" {
		t.Fatalf("events: %s reply %q", evetest.Join(evs), e.Reply(refund.SessionID))
	}
	// Settled: gone from the inbox; a second answer is the session's 409.
	waitInbox(t, e, alice, client.InboxFilter{}, aTransfer)
	if _, err := alice.AnswerInbox(ctx, aRefund, protocol.InboxAnswer{OptionID: "cancel"}); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("answering a settled request: %v, want 409", err)
	}
}

// inboxCLI runs `eve inbox ...` in process against e's server.
func inboxCLI(t *testing.T, e *apiEnv, key string, args ...string) string {
	t.Helper()
	root := cli.NewRootCommand(cli.App{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"inbox"}, append(args, "--url", e.URL, "--api-key", key)...))
	if err := root.ExecuteContext(e.Ctx(30 * time.Second)); err != nil {
		t.Fatalf("eve inbox %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}
