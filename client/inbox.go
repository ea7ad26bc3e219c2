package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// InboxFilter narrows Inbox; every field is optional.
type InboxFilter struct {
	Tool      string
	SessionID string
	// Requester is the requester's principal id.
	Requester string
	// Kind is tool-approval, question or session-limit.
	Kind string
	// MinAge lists only requests open at least this long.
	MinAge time.Duration
	// Tenant lists only requests whose requester's tenantId attribute is
	// this; DueBefore only those with a deadline before it; Escalated only
	// escalated approvals.
	Tenant    string
	DueBefore time.Time
	Escalated bool
	// Root lists only the requests of this session and of its subagents'
	// child sessions at any depth (InboxItem.RootSessionID).
	Root string
	// Limit is how many turns' requests one page holds (default 100, at
	// most 1000).
	Limit int
	// Cursor is the previous page's NextCursor.
	Cursor string
}

// InboxPage is a page of the inbox.
type InboxPage = protocol.InboxPage

// InboxItem is one open request.
type InboxItem = protocol.InboxItem

// Inbox lists the open requests the caller may settle, across sessions
// (GET /eve/v1/inbox). A page holds the requests of up to Limit turns, and
// has a NextCursor only when full (or after the server read 5,000 entries
// for it): follow NextCursor until it is empty.
func (c *Client) Inbox(ctx context.Context, f InboxFilter) (InboxPage, error) {
	q := query(map[string]string{"tool": f.Tool, "session": f.SessionID, "requester": f.Requester, "kind": f.Kind,
		"cursor": f.Cursor, "tenant": f.Tenant, "root": f.Root}, f.Limit)
	if !f.DueBefore.IsZero() {
		q.Set("dueBefore", f.DueBefore.UTC().Format(time.RFC3339))
	}
	if f.Escalated {
		q.Set("escalated", "true")
	}
	if f.MinAge > 0 {
		q.Set("minAge", f.MinAge.String())
	}
	var p InboxPage
	err := c.getJSON(ctx, "/eve/v1/inbox", q, &p)
	return p, err
}

// AnswerInbox settles one inbox item (POST /eve/v1/inbox/{id}) as the
// session's inputResponses would: approve with OptionID "approve", deny
// with "cancel" and the reason in Text, answer a question with an option
// or text. A response policy that refuses the answer makes it an *Error
// (400 rejected) whose Refused gives the reason; the item stays open.
func (c *Client) AnswerInbox(ctx context.Context, id string, a protocol.InboxAnswer) (Accepted, error) {
	var out Accepted
	_, err := c.do(ctx, http.MethodPost, "/eve/v1/inbox/"+url.PathEscape(id), a, &out)
	return out, err
}

// EditInbox approves one inbox item with an edited tool input (POST
// /eve/v1/inbox/{id} with optionId "approve" and input), for items whose
// Editable is set. An input that breaks the tool's input schema is a 422
// *Error with Code "invalid_input" and Field naming the failing field; the
// request stays open either way until an edit is accepted.
func (c *Client) EditInbox(ctx context.Context, id string, input json.RawMessage) (Accepted, error) {
	return c.AnswerInbox(ctx, id, protocol.InboxAnswer{OptionID: "approve", Input: input})
}
