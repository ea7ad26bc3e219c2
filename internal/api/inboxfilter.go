package api

import (
	"net/http"
	"net/url"
	"time"

	"github.com/eve-temporal/eve/signals"
)

// TenantAttribute is the requester's attribute that ?tenant= matches.
const TenantAttribute = "tenantId"

// inboxFilter narrows a page's turns and requests by what the memo holds
// (the Visibility query already narrowed the turns by their attributes):
// the page is still one query, and may come out shorter (nextCursor goes
// on).
type inboxFilter struct {
	tenant    string
	root      string
	dueBefore time.Time
	escalated bool
}

func inboxFilterOf(v url.Values) (inboxFilter, error) {
	f := inboxFilter{tenant: v.Get("tenant"), root: v.Get("root")}
	if f.root != "" {
		if err := signals.CheckSessionID(f.root); err != nil {
			return f, errorf(http.StatusBadRequest, CodeInvalidID, "root: %v", err)
		}
	}
	if err := queryTimes(v, map[string]*time.Time{"dueBefore": &f.dueBefore}); err != nil {
		return f, err
	}
	switch v.Get("escalated") {
	case "", "false":
	case "true":
		f.escalated = true
	default:
		return f, errorf(http.StatusBadRequest, CodeBadRequest, "escalated: expected true or false")
	}
	return f, nil
}

// turn: the tenant is the requester's tenantId attribute; the root is the
// session's own id or, for a subagent's child, its root session's.
func (f inboxFilter) turn(m signals.InboxMemo) bool {
	if f.root != "" && m.SessionID != f.root && (m.Origin == nil || m.Origin.RootSessionID != f.root) {
		return false
	}
	return f.tenant == "" || m.Requester.Attr(TenantAttribute) == f.tenant
}

func (f inboxFilter) entry(e signals.InboxEntry) bool {
	if !f.dueBefore.IsZero() && (e.Deadline == nil || !e.Deadline.Before(f.dueBefore)) {
		return false
	}
	return !f.escalated || e.EscalatedAt != nil
}

// queryTimes reads RFC 3339 query parameters into dst (absent ones stay
// zero); a malformed one is a 400 naming it.
func queryTimes(v url.Values, dst map[string]*time.Time) error {
	for name, t := range dst {
		raw := v.Get(name)
		if raw == "" {
			continue
		}
		parsed, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return errorf(http.StatusBadRequest, CodeBadRequest, "%s: expected an RFC 3339 time such as 2026-01-02T15:04:05Z: %v", name, err)
		}
		*t = parsed
	}
	return nil
}
