package api

import (
	"net/url"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/signals"
)

func TestInboxFilter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	soon, later := now.Add(time.Hour), now.Add(48*time.Hour)
	f, err := inboxFilterOf(url.Values{"tenant": {"acme"}, "dueBefore": {now.Add(2 * time.Hour).Format(time.RFC3339)}, "escalated": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	acme := signals.InboxMemo{Requester: &auth.Principal{ID: "alice", Attributes: map[string]string{TenantAttribute: "acme"}}}
	if !f.turn(acme) || f.turn(signals.InboxMemo{Requester: &auth.Principal{ID: "bob"}}) || f.turn(signals.InboxMemo{}) {
		t.Fatal("the tenant filter")
	}
	for _, c := range []struct {
		e    signals.InboxEntry
		want bool
	}{
		{signals.InboxEntry{Deadline: &soon, EscalatedAt: &now}, true},
		{signals.InboxEntry{Deadline: &later, EscalatedAt: &now}, false},
		{signals.InboxEntry{EscalatedAt: &now}, false},
		{signals.InboxEntry{Deadline: &soon}, false},
	} {
		if f.entry(c.e) != c.want {
			t.Errorf("entry %+v: %v, want %v", c.e, !c.want, c.want)
		}
	}
	for _, bad := range []url.Values{{"dueBefore": {"tomorrow"}}, {"escalated": {"yes"}}} {
		if _, err := inboxFilterOf(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
