package auth

import "testing"

func TestMayReview(t *testing.T) {
	alice := &Principal{ID: "alice", Type: TypeUser, Attributes: map[string]string{"tenantId": "acme"}}
	carol := &Principal{ID: "carol", Type: TypeUser, Attributes: map[string]string{"tenantId": "globex"}}
	anon := &Principal{ID: "dan", Type: TypeUser}
	reviewer := func(g *ReviewGrant, attrs map[string]string) *Principal {
		return &Principal{ID: "bob", Type: TypeUser, Attributes: attrs, Review: g}
	}
	acme := map[string]string{"tenantId": "acme"}
	for _, c := range []struct {
		name     string
		reviewer *Principal
		owner    *Principal
		want     bool
	}{
		{"no grant", reviewer(nil, acme), alice, false},
		{"empty grant", reviewer(&ReviewGrant{}, acme), alice, false},
		{"same tenant", reviewer(&ReviewGrant{SameAttributes: []string{"tenantId"}}, acme), alice, true},
		{"other tenant", reviewer(&ReviewGrant{SameAttributes: []string{"tenantId"}}, acme), carol, false},
		{"owner without the attribute", reviewer(&ReviewGrant{SameAttributes: []string{"tenantId"}}, acme), anon, false},
		{"reviewer without the attribute", reviewer(&ReviewGrant{SameAttributes: []string{"tenantId"}}, nil), anon, false},
		{"named owner", reviewer(&ReviewGrant{Owners: []string{"alice"}}, nil), alice, true},
		{"another owner", reviewer(&ReviewGrant{Owners: []string{"alice"}}, nil), carol, false},
		{"any owner", reviewer(&ReviewGrant{Owners: []string{AnyUser}}, nil), carol, true},
		{"named owner, other tenant", reviewer(&ReviewGrant{Owners: []string{"carol"}, SameAttributes: []string{"tenantId"}}, acme), carol, false},
		{"no owner", reviewer(&ReviewGrant{Owners: []string{AnyUser}}, nil), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.reviewer.MayReview(c.owner); got != c.want {
				t.Errorf("MayReview = %v, want %v", got, c.want)
			}
		})
	}
}
