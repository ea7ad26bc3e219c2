package api

import (
	"net/url"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
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
	for _, bad := range []url.Values{{"dueBefore": {"tomorrow"}}, {"escalated": {"yes"}}, {"root": {"not a session"}}} {
		if _, err := inboxFilterOf(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// ?root= keeps a root session's own turns and its subagents' at any depth.
func TestInboxFilterRoot(t *testing.T) {
	f, err := inboxFilterOf(url.Values{"root": {"ses_root"}})
	if err != nil {
		t.Fatal(err)
	}
	child := (*protocol.SubagentOrigin)(nil).Child("ses_root", "mid", "ses_sub_mid")
	grandchild := child.Child("ses_sub_mid", "researcher", "ses_sub_res")
	other := (*protocol.SubagentOrigin)(nil).Child("ses_other", "mid", "ses_sub_x")
	for _, c := range []struct {
		name string
		m    signals.InboxMemo
		want bool
	}{
		{"the root itself", signals.InboxMemo{SessionID: "ses_root"}, true},
		{"a child", signals.InboxMemo{SessionID: "ses_sub_mid", Origin: child}, true},
		{"a grandchild", signals.InboxMemo{SessionID: "ses_sub_res", Origin: grandchild}, true},
		{"another root", signals.InboxMemo{SessionID: "ses_other"}, false},
		{"another root's child", signals.InboxMemo{SessionID: "ses_sub_x", Origin: other}, false},
		{"a child without origin", signals.InboxMemo{SessionID: "ses_sub_old"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := f.turn(c.m); got != c.want {
				t.Errorf("turn = %v, want %v", got, c.want)
			}
		})
	}
	// The item says where it sits.
	it := inboxItem(signals.InboxMemo{SessionID: "ses_sub_res", Origin: grandchild}, signals.InboxEntry{Request: protocol.InputRequest{RequestID: "apr_1"}})
	if it.RootSessionID != "ses_root" || it.Depth != 2 || len(it.Path) != 2 || it.Path[0] != (protocol.SubagentHop{Agent: "mid", SessionID: "ses_sub_mid"}) ||
		it.Path[1] != (protocol.SubagentHop{Agent: "researcher", SessionID: "ses_sub_res"}) {
		t.Errorf("item %+v", it)
	}
	if it := inboxItem(signals.InboxMemo{SessionID: "ses_root"}, signals.InboxEntry{}); it.RootSessionID != "" || it.Path != nil || it.Depth != 0 {
		t.Errorf("a root's item %+v", it)
	}
}
