package workerhost

import "testing"

// A namespace registered before the inbox lacks only the inbox's
// attributes: its sessions still record their status.
func TestOnlyInbox(t *testing.T) {
	cases := []struct {
		missing []string
		want    bool
	}{
		{[]string{"EveInbox", "EveParkedAt", "EveRequestKinds", "EveRequester"}, true},
		{[]string{"EveInbox"}, true},
		{[]string{"EveStatus", "EveInbox"}, false},
		{[]string{"EveSessionId"}, false},
	}
	for _, c := range cases {
		if got := onlyInbox(c.missing); got != c.want {
			t.Errorf("onlyInbox(%v) = %v, want %v", c.missing, got, c.want)
		}
	}
}
