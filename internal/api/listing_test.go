package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/eve-temporal/eve/auth"
)

// badListings are listing requests with a filter value or cursor a
// Visibility store cannot take, or that this server never issued.
func badListings(t *testing.T, s *Server, caller *auth.Principal) []struct{ name, path, field string } {
	t.Helper()
	good := s.cursors.seal(listScope("inbox", caller, url.Values{}), listPos{Token: []byte("token")})
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[len(raw)/2] ^= 1
	flipped := base64.RawURLEncoding.EncodeToString(raw)
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"AAAA","a":"ses_x/turn_0"}`))
	var out []struct{ name, path, field string }
	add := func(name, path, field string) {
		out = append(out, struct{ name, path, field string }{name, path, field})
	}
	for _, route := range []string{"inbox", "sessions", "jobs"} {
		add(route+" quote in tool", "/eve/v1/"+route+"?tool=x%22y", "tool")
		add(route+" NUL in tool", "/eve/v1/"+route+"?tool=x%00y", "tool")
		add(route+" backslash in tool", "/eve/v1/"+route+"?tool=x%5Cy", "tool")
		add(route+" long tool", "/eve/v1/"+route+"?tool="+strings.Repeat("t", MaxFilterLength+1), "tool")
		add(route+" forged cursor", "/eve/v1/"+route+"?cursor="+forged, "cursor")
		add(route+" 100 KB cursor", "/eve/v1/"+route+"?cursor="+strings.Repeat("A", 100<<10), "cursor")
		add(route+" not base64", "/eve/v1/"+route+"?cursor=%21%21", "cursor")
	}
	add("inbox byte-flipped cursor", "/eve/v1/inbox?cursor="+flipped, "cursor")
	add("sessions with the inbox's cursor", "/eve/v1/sessions?cursor="+good, "cursor")
	add("inbox cursor with other filters", "/eve/v1/inbox?tool=t&cursor="+good, "cursor")
	add("inbox quote in kind", "/eve/v1/inbox?kind=x%22y", "kind")
	add("inbox unknown kind", "/eve/v1/inbox?kind=approval", "kind")
	add("inbox quote in requester", "/eve/v1/inbox?requester=a%22b", "requester")
	add("inbox control character in tenant", "/eve/v1/inbox?tenant=a%0Ab", "tenant")
	add("sessions NUL in status", "/eve/v1/sessions?status=idle%00", "status")
	add("sessions quote in owner", "/eve/v1/sessions?owner=a%22b", "owner")
	add("decisions quote in tool", "/eve/v1/decisions?since=2026-01-01T00:00:00Z&tool=x%22y", "tool")
	return out
}

// Bad filter values and cursors answer 400 naming the field before
// anything reaches Temporal: this server has no Temporal client, so any
// Visibility query would fail the request with 500.
func TestListingsRefuseBadInputBeforeTemporal(t *testing.T) {
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser}
	s := newTestServer(t, func(o *Options) { o.Keys = map[string]*auth.Principal{"key-alice": alice} })
	for _, c := range badListings(t, s, alice) {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, c.path, nil)
			req.Header.Set("Authorization", "Bearer key-alice")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.field+":") {
				t.Fatalf("%s: %d %s, want 400 naming %s", c.path[:min(len(c.path), 80)], rec.Code, rec.Body.String()[:min(rec.Body.Len(), 300)], c.field)
			}
		})
	}
}

// A cursor opens only for the listing, caller and filters it was sealed
// for, and only with the key that sealed it.
func TestCursorSealing(t *testing.T) {
	a, err := newCursorSealer([]byte("a shared secret of the servers"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newCursorSealer([]byte("a shared secret of the servers"))
	other, _ := newCursorSealer(nil)
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser}
	mallory := &auth.Principal{ID: "mallory", Type: auth.TypeUser}
	scope := listScope("inbox", alice, url.Values{"tool": {"refund"}, "limit": {"5"}})
	pos := listPos{Token: []byte("visibility token"), Size: 500, After: "ses_1/turn_2"}
	c := a.seal(scope, pos)
	if got, err := b.open(scope, c); err != nil || !slices.Equal(got.Token, pos.Token) || got.After != pos.After || got.Size != pos.Size {
		t.Fatalf("another server with the same secret: %+v, %v", got, err)
	}
	if got, err := b.open(listScope("inbox", alice, url.Values{"tool": {"refund"}, "limit": {"50"}}), c); err != nil || got.After != pos.After {
		t.Fatalf("another limit: %+v, %v", got, err)
	}
	for name, open := range map[string]func() (listPos, error){
		"another key":    func() (listPos, error) { return other.open(scope, c) },
		"another caller": func() (listPos, error) { return a.open(listScope("inbox", mallory, url.Values{"tool": {"refund"}}), c) },
		"another route":  func() (listPos, error) { return a.open(listScope("jobs", alice, url.Values{"tool": {"refund"}}), c) },
		"another filter": func() (listPos, error) { return a.open(listScope("inbox", alice, url.Values{"tool": {"transfer"}}), c) },
		"a filter added": func() (listPos, error) {
			return a.open(listScope("inbox", alice, url.Values{"tool": {"refund"}, "kind": {"question"}}), c)
		},
		"truncated": func() (listPos, error) { return a.open(scope, c[:len(c)-4]) },
		"base64 of plain": func() (listPos, error) {
			return a.open(scope, base64.RawURLEncoding.EncodeToString([]byte(`{"t":"dG9rZW4="}`)))
		},
	} {
		if _, err := open(); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// fakeVisibility pages a list of entries by a token holding the offset.
type fakeVisibility struct {
	entries []string
	queries int
}

func (f *fakeVisibility) fetch(_ context.Context, token []byte, size int) ([]string, []byte, error) {
	f.queries++
	from := 0
	if len(token) > 0 {
		fmt.Sscan(string(token), &from)
	}
	to := min(from+size, len(f.entries))
	var next []byte
	if to < len(f.entries) {
		next = []byte(fmt.Sprint(to))
	}
	return slices.Clone(f.entries[from:to]), next, nil
}

// entries makes n entries, those of owner "a" at the positions mine says.
func entries(n int, mine ...int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("b%d", i)
	}
	for _, i := range mine {
		out[i] = fmt.Sprintf("a%d", i)
	}
	return out
}

// listAll pages a listing of the caller who sees entries starting with
// "a" until no cursor comes, returning every page.
func listAll(t *testing.T, f *fakeVisibility, limit int) [][]string {
	t.Helper()
	keep := func(_ context.Context, es []string) ([]bool, error) {
		ok := make([]bool, len(es))
		for i, e := range es {
			ok[i] = strings.HasPrefix(e, "a")
		}
		return ok, nil
	}
	var pages [][]string
	pos := listPos{}
	for range 100 {
		kept, next, err := scan(t.Context(), pos, limit, f.fetch, func(e string) string { return e }, keep)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, kept)
		if next == nil {
			return pages
		}
		pos = *next
	}
	t.Fatal("no end after 100 pages")
	return nil
}

// A listing pages over what the caller sees: the pages and the cursors
// are the same whatever other principals' entries Visibility holds (below
// MaxListScan), and every entry the caller sees is listed once.
func TestScanPagesOverWhatTheCallerSees(t *testing.T) {
	for _, c := range []struct {
		name      string
		vis       []string
		limit     int
		wantPages [][]string
	}{
		{"nothing at all", nil, 1, [][]string{nil}},
		{"nothing of the caller's among 3", entries(3), 1, [][]string{nil}},
		{"nothing of the caller's among 4,999", entries(4999), 1, [][]string{nil}},
		{"one among others", entries(1200, 700), 1, [][]string{{"a700"}, nil}},
		{"two, limit 1", entries(1200, 3, 1100), 1, [][]string{{"a3"}, {"a1100"}, nil}},
		{"two, limit 2", entries(1200, 3, 1100), 2, [][]string{{"a3", "a1100"}, nil}},
		{"three, limit 2", entries(50, 0, 1, 2), 2, [][]string{{"a0", "a1"}, {"a2"}}},
		{"only the caller's", entries(4, 0, 1, 2, 3), 2, [][]string{{"a0", "a1"}, {"a2", "a3"}, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := listAll(t, &fakeVisibility{entries: c.vis}, c.limit)
			if !slices.EqualFunc(got, c.wantPages, slices.Equal) {
				t.Errorf("pages = %v, want %v", got, c.wantPages)
			}
		})
	}
}

// A page stops after MaxListScan entries: the cursor then says only that
// more than that many entries match.
func TestScanBound(t *testing.T) {
	f := &fakeVisibility{entries: entries(MaxListScan+listScanPage+1, MaxListScan+listScanPage)}
	pages := listAll(t, f, 1)
	want := [][]string{nil, {fmt.Sprintf("a%d", MaxListScan+listScanPage)}, nil}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages = %v, want %v", pages, want)
	}
	if f.queries > (MaxListScan+listScanPage+1)/listScanPage+3 {
		t.Errorf("%d queries", f.queries)
	}
}

// An entry that left Visibility between pages: the next page resumes
// from its page's start, so an entry may show twice, but none is skipped.
func TestScanResumesWhenTheLastEntryLeft(t *testing.T) {
	f := &fakeVisibility{entries: entries(10, 1, 2, 3)}
	keep := func(_ context.Context, es []string) ([]bool, error) {
		ok := make([]bool, len(es))
		for i, e := range es {
			ok[i] = strings.HasPrefix(e, "a")
		}
		return ok, nil
	}
	id := func(e string) string { return e }
	first, next, err := scan(t.Context(), listPos{}, 1, f.fetch, id, keep)
	if err != nil || !slices.Equal(first, []string{"a1"}) || next == nil {
		t.Fatalf("first page %v, next %+v, %v", first, next, err)
	}
	f.entries = slices.Delete(f.entries, 1, 2) // a1 settled
	second, _, err := scan(t.Context(), *next, 5, f.fetch, id, keep)
	if err != nil || !slices.Equal(second, []string{"a2", "a3"}) {
		t.Fatalf("second page %v, %v", second, err)
	}
}

func TestCheckFilter(t *testing.T) {
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"refund_charge", true},
		{"lib.pack", true},
		{"Zoë", true},
		{"tool-approval", true},
		{`x"y`, false},
		{"x'y", false},
		{`x\y`, false},
		{"x\x00y", false},
		{"x\ny", false},
		{"x\x7fy", false},
		{"\xff", false},
		{strings.Repeat("x", MaxFilterLength), true},
		{strings.Repeat("x", MaxFilterLength+1), false},
	} {
		if err := checkFilter("tool", c.value); (err == nil) != c.ok {
			t.Errorf("checkFilter(%q) = %v, want ok %v", c.value, err, c.ok)
		}
	}
}

// A listing's Visibility query that times out is 504 visibility_timeout,
// never a 503 with Retry-After: the same query would time out again.
func TestListFailureTimeout(t *testing.T) {
	s := newTestServer(t, nil)
	for _, err := range []error{context.DeadlineExceeded, fmt.Errorf("list the inbox from Visibility: %w", context.DeadlineExceeded), serviceerror.NewDeadlineExceeded("deadline exceeded")} {
		rec := httptest.NewRecorder()
		s.fail(rec, s.listFailure("list the inbox", err))
		if rec.Code != http.StatusGatewayTimeout || rec.Header().Get("Retry-After") != "" || !strings.Contains(rec.Body.String(), `"code":"`+CodeVisibilityTimeout+`"`) || strings.Contains(strings.ToLower(rec.Body.String()), "retry") {
			t.Errorf("%v: %d %v %s", err, rec.Code, rec.Header(), rec.Body.String())
		}
	}
}
