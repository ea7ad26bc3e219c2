package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
)

// A keys file's reviews grant: what it loads to, and the mistakes it
// refuses at load time.
func TestParseKeysReviews(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       *auth.ReviewGrant
		err        string
	}{
		{"tenant", "keys:\n  sk_bob_0123456789:\n    principalId: bob\n    attributes: {tenantId: acme}\n    reviews: {sameAttributes: [tenantId]}\n",
			&auth.ReviewGrant{SameAttributes: []string{"tenantId"}}, ""},
		{"owners", `{"keys":{"sk_bob_0123456789":{"principalId":"bob","reviews":{"owners":["alice","*"]}}}}`,
			&auth.ReviewGrant{Owners: []string{"alice", "*"}}, ""},
		{"empty", "keys:\n  sk_bob_0123456789:\n    principalId: bob\n    reviews: {}\n", nil, "reviews needs owners"},
		{"attribute the reviewer lacks", "keys:\n  sk_bob_0123456789:\n    principalId: bob\n    reviews: {sameAttributes: [tenantId]}\n", nil, `names "tenantId", which bob's attributes lack`},
		{"empty owner", "keys:\n  sk_bob_0123456789:\n    principalId: bob\n    reviews: {owners: [\"\"]}\n", nil, "empty principal id"},
		{"unknown field", "keys:\n  sk_bob_0123456789:\n    principalId: bob\n    reviews: {owner: [alice]}\n", nil, "owner"},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, err := ParseKeys([]byte(c.file))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "sk_bob_0123456789") {
					t.Fatalf("err = %v, want one containing %q (and not the key)", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := keys["sk_bob_0123456789"].Review; !reflect.DeepEqual(got, c.want) {
				t.Errorf("grant = %+v, want %+v", got, c.want)
			}
		})
	}
}

// A reviewer may stream, read decisions and answer approvals of the
// sessions its grant covers, and nothing else: not send, cancel or
// answer the owner's questions.
func TestReviewerAllows(t *testing.T) {
	s := newTestServer(t, func(o *Options) { o.Keys = map[string]*auth.Principal{"k": {ID: "x"}} })
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser, Attributes: map[string]string{"tenantId": "acme"}}
	carol := &auth.Principal{ID: "carol", Type: auth.TypeUser, Attributes: map[string]string{"tenantId": "globex"}}
	bob := &auth.Principal{ID: "bob", Type: auth.TypeUser, Attributes: map[string]string{"tenantId": "acme"}, Review: &auth.ReviewGrant{SameAttributes: []string{"tenantId"}}}
	approval := []protocol.InputRequest{{RequestID: "apr_1", Kind: protocol.KindToolApproval}}
	question := []protocol.InputRequest{{RequestID: "q_1", Kind: protocol.KindQuestion}}
	for _, c := range []struct {
		name     string
		action   string
		owner    *auth.Principal
		requests []protocol.InputRequest
		want     bool
	}{
		{"stream", ActionStream, alice, nil, true},
		{"decisions", ActionDecisions, alice, nil, true},
		{"an approval", ActionRespond, alice, approval, true},
		{"a question", ActionRespond, alice, question, false},
		{"an approval and a question", ActionRespond, alice, append(approval, question...), false},
		{"answers of unknown requests", ActionRespond, alice, nil, false},
		{"send", ActionSend, alice, nil, false},
		{"cancel", ActionCancel, alice, nil, false},
		{"another tenant's stream", ActionStream, carol, nil, false},
		{"another tenant's approval", ActionRespond, carol, approval, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := s.allows(t.Context(), SessionAccess{SessionID: "ses_1", Action: c.action, Owner: c.owner, Caller: bob, Requests: c.requests})
			if got != c.want {
				t.Errorf("allows = %v, want %v", got, c.want)
			}
		})
	}
}
