package catalog_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
)

func names(r catalog.SearchToolsResult) []string {
	out := make([]string, len(r.Tools))
	for i, d := range r.Tools {
		out[i] = d.Name
	}
	return out
}

func search(t *testing.T, c *catalog.Catalog, opts catalog.SearchToolsOptions) []string {
	t.Helper()
	r, err := c.Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Scores) != len(r.Tools) {
		t.Fatalf("%d scores for %d tools", len(r.Scores), len(r.Tools))
	}
	for i := 1; i < len(r.Scores); i++ {
		if r.Scores[i] > r.Scores[i-1] || r.Scores[i] == r.Scores[i-1] && r.Tools[i].Name < r.Tools[i-1].Name {
			t.Fatalf("results out of order at %d: %v %v", i, names(r), r.Scores)
		}
	}
	return names(r)
}

func TestSearchRanking(t *testing.T) {
	c := catalogtest.Catalog()
	top := []struct{ query, want string }{
		{"send email", "gmail.send_email"},
		{"sendEmail", "gmail.send_email"},
		{"send an email to a customer", "gmail.send_email"},
		{"draft an email for review", "gmail.create_draft"},
		{"search emails in mailbox", "gmail.search_emails"},
		{"emails", "gmail.get_email"}, // plural matches singular; the shortest name wins
		{"create github issue", "github.create_issue"},
		{"open a bug report issue", "github.create_issue"},
		{"merge pull request", "github.merge_pull_request"},
		{"squash", "github.merge_pull_request"},
		{"search source code", "github.search_code"},
		{"read file contents from repo", "github.get_file_contents"},
		{"trigger CI workflow run", "github.run_workflow"},
		{"post message to slack channel", "slack.send_message"},
		{"emoji reaction", "slack.add_reaction"},
		{"set my slack status", "slack.set_status"},
		{"find a free time slot for a meeting", "calendar.find_free_slots"},
		{"schedule a meeting with attendees", "calendar.create_event"},
		{"accept invitation", "calendar.respond_to_invitation"},
		{"pageToken", "gmail.search_emails"}, // parameter names are searched
		{"durationMinutes", "calendar.find_free_slots"},
		{"list labels", "gmail.list_labels"},
		{"labelIds", "gmail.add_label"},
	}
	for _, tc := range top {
		got := search(t, c, catalog.SearchToolsOptions{Query: tc.query, Limit: 5})
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("search %q: top %v; want %s first", tc.query, got, tc.want)
		}
	}
	// Every delete tool, before anything else.
	got := search(t, c, catalog.SearchToolsOptions{Query: "delete", Limit: 10})
	want := map[string]bool{"calendar.delete_event": true, "gmail.delete_email": true, "github.delete_repository": true}
	for i := 0; i < 3; i++ {
		if !want[got[i]] {
			t.Errorf("delete: %v; want the three delete tools first", got)
		}
	}
}

func TestSearchFilters(t *testing.T) {
	c := catalogtest.Catalog()
	got := search(t, c, catalog.SearchToolsOptions{Query: "delete", Toolkits: []string{"calendar"}})
	if !reflect.DeepEqual(got, []string{"calendar.delete_event"}) {
		t.Errorf("delete in calendar: %v", got)
	}
	got = search(t, c, catalog.SearchToolsOptions{Query: "email message", Capability: "email.read", Limit: 50})
	if len(got) == 0 {
		t.Fatal("no email.read results")
	}
	for _, n := range got {
		d, _ := c.Lookup(n)
		if d.Capability != "email.read" {
			t.Errorf("%s (%s) passed the capability filter", n, d.Capability)
		}
	}
	// Filters apply before ranking: the best slack tool for "send email" is
	// still found though Gmail tools would outrank it.
	got = search(t, c, catalog.SearchToolsOptions{Query: "send email", Toolkits: []string{"slack"}, Limit: 1})
	if !reflect.DeepEqual(got, []string{"slack.send_message"}) {
		t.Errorf("send email in slack: %v", got)
	}
	if _, err := c.Search(catalog.SearchToolsOptions{Query: "x", Toolkits: []string{"nope"}}); !errors.Is(err, catalog.ErrUnknownToolkit) {
		t.Errorf("unknown toolkit: %v", err)
	}
}

func TestSearchLimitsAndEmptyQuery(t *testing.T) {
	c := catalogtest.Catalog()
	if got := search(t, c, catalog.SearchToolsOptions{Query: "list"}); len(got) > catalog.DefaultSearchLimit {
		t.Errorf("default limit: %d results", len(got))
	}
	if got := search(t, c, catalog.SearchToolsOptions{Query: "repository owner", Limit: 3}); len(got) != 3 {
		t.Errorf("limit 3: %v", got)
	}
	// No searchable words: the filtered tools in name order.
	got := search(t, c, catalog.SearchToolsOptions{Query: "the of a", Toolkits: []string{"calendar"}, Limit: 3})
	if !reflect.DeepEqual(got, []string{"calendar.create_event", "calendar.delete_event", "calendar.find_free_slots"}) {
		t.Errorf("empty query: %v", got)
	}
	if got := search(t, c, catalog.SearchToolsOptions{Query: "zzzqqq"}); len(got) != 0 {
		t.Errorf("nonsense query matched %v", got)
	}
}

func TestSearchDeterministicTies(t *testing.T) {
	var defs []catalog.Definition
	for _, n := range []string{"dup.charlie", "dup.alpha", "dup.bravo"} {
		d := valid(n)
		d.Description = "Identical description about widgets."
		defs = append(defs, d)
	}
	c, err := catalog.New(defs...)
	if err != nil {
		t.Fatal(err)
	}
	first := search(t, c, catalog.SearchToolsOptions{Query: "widgets"})
	if !reflect.DeepEqual(first, []string{"dup.alpha", "dup.bravo", "dup.charlie"}) {
		t.Fatalf("ties: %v; want name order", first)
	}
	fixture := catalogtest.Catalog()
	a := search(t, fixture, catalog.SearchToolsOptions{Query: "list messages channel", Limit: 20})
	for i := 0; i < 20; i++ {
		if b := search(t, fixture, catalog.SearchToolsOptions{Query: "list messages channel", Limit: 20}); !reflect.DeepEqual(a, b) {
			t.Fatalf("search not deterministic: %v vs %v", a, b)
		}
	}
	// Loading the same tools in another order gives the same ranking.
	defs2 := catalogtest.Definitions()
	for i, j := 0, len(defs2)-1; i < j; i, j = i+1, j-1 {
		defs2[i], defs2[j] = defs2[j], defs2[i]
	}
	c2, err := catalog.New(defs2...)
	if err != nil {
		t.Fatal(err)
	}
	if b := search(t, c2, catalog.SearchToolsOptions{Query: "list messages channel", Limit: 20}); !reflect.DeepEqual(a, b) {
		t.Fatalf("load order changed ranking: %v vs %v", a, b)
	}
}

func TestSearchConcurrent(t *testing.T) {
	c := catalogtest.Catalog()
	want := search(t, c, catalog.SearchToolsOptions{Query: "send message"})
	done := make(chan []string)
	for i := 0; i < 8; i++ {
		go func() {
			var last []string
			for j := 0; j < 50; j++ {
				r, _ := c.Search(catalog.SearchToolsOptions{Query: "send message"})
				last = names(r)
			}
			done <- last
		}()
	}
	for i := 0; i < 8; i++ {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Fatalf("concurrent search: %v; want %v", got, want)
		}
	}
}
