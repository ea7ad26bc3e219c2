package e2e

import (
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/auth"
	eveclient "github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// Every listing route answers a principal that may see nothing the same,
// and without a cursor, whether or not other principals' matches exist:
// before alice has anything, after (filters that match hers: her id, her
// session, her tool, the time she parked), and for filters that match
// nothing. alice, meanwhile, pages through hers.
func TestListingsRevealNothing(t *testing.T) {
	e, _ := consoleStack(t)
	ctx := e.Ctx(3 * time.Minute)
	keys := maps.Clone(apiTestKeys)
	keys["key-mallory"] = &auth.Principal{ID: "mallory", Type: auth.TypeUser}
	m := newAPIEnv(t, e.Env, func(o *api.Options) { o.Keys = keys })
	alice := e.as("key-alice")
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	const unknown = "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ"
	paths := func(session, jobSession string) []string {
		return []string{
			"/eve/v1/inbox?limit=1",
			"/eve/v1/inbox?requester=alice&limit=1",
			"/eve/v1/inbox?session=" + session + "&limit=1",
			"/eve/v1/inbox?openedAfter=" + since + "&limit=1",
			"/eve/v1/inbox?tool=refund_charge&kind=tool-approval&limit=1",
			"/eve/v1/jobs?limit=1",
			"/eve/v1/jobs?session=" + jobSession + "&limit=1",
			"/eve/v1/jobs?tool=run_report&limit=1",
			"/eve/v1/sessions?limit=1",
			"/eve/v1/sessions?status=waiting-input&limit=1",
			"/eve/v1/sessions?tool=refund_charge&limit=1",
			"/eve/v1/decisions?since=" + since,
			"/eve/v1/decisions?since=" + since + "&principal=alice",
		}
	}
	answers := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			r := m.do(t, "GET", p, nil, bearer("key-mallory"))
			out = append(out, p+" → "+strings.TrimSpace(http.StatusText(r.Status)+" "+strings.TrimSpace(string(r.Body))))
		}
		return out
	}
	before := answers(paths(unknown, unknown))

	// alice's activity: two parked refunds, a settled one (a decision), a
	// delegated job.
	p1 := parkOver(t, ctx, alice, "", "refund ch_1 for 5")
	p2 := parkOver(t, ctx, alice, "", "refund ch_2 for 6")
	p3 := parkOver(t, ctx, alice, "", "refund ch_3 for 7")
	if _, _, err := alice.RespondAndWait(ctx, p3.SessionID, []protocol.InputResponse{{RequestID: p3.Open[0].RequestID, OptionID: "approve"}}, nil); err != nil {
		t.Fatal(err)
	}
	job, err := alice.CreateAndSend(ctx, "run the sales report")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Cancel(ctx, job.SessionID, job.TurnID)
	// Visibility lists them (alice sees them all), so mallory's queries
	// match them too.
	waitListed(t, "alice's parked refunds", func() ([]eveclient.InboxItem, error) {
		return inboxAll(t, e, alice, eveclient.InboxFilter{Requester: "alice", Tool: "refund_charge"}), nil
	}, func(items []eveclient.InboxItem) bool {
		ids := inboxSessions(items)
		return slices.Contains(ids, p1.SessionID) && slices.Contains(ids, p2.SessionID)
	})
	waitListed(t, "alice's job", func() (eveclient.JobPage, error) {
		return alice.Jobs(ctx, eveclient.JobFilter{SessionID: job.SessionID})
	},
		func(p eveclient.JobPage) bool { return len(p.Items) == 1 })
	waitListed(t, "alice's waiting sessions", func() (eveclient.SessionPage, error) {
		return alice.Sessions(ctx, eveclient.SessionFilter{Status: "waiting-input", Tool: "refund_charge"})
	}, func(p eveclient.SessionPage) bool { return len(p.Items) >= 2 })

	after := answers(paths(p1.SessionID, job.SessionID))
	nothing := answers(paths(unknown, unknown))
	for i := range before {
		_, got, _ := strings.Cut(after[i], " → ")
		want := "OK {\"items\":[]}"
		if strings.Contains(after[i], "/decisions") {
			want = "OK"
		}
		if got != want {
			t.Errorf("mallory: %s, want %s", after[i], want)
		}
		if _, b, _ := strings.Cut(before[i], " → "); b != got {
			t.Errorf("mallory before alice's activity: %s; after: %s", before[i], after[i])
		}
		if _, n, _ := strings.Cut(nothing[i], " → "); n != got {
			t.Errorf("mallory, filters matching nothing: %s; matching alice's: %s", nothing[i], after[i])
		}
	}

	// alice pages through her parked refunds one turn a page: a cursor
	// with each full page, each request once.
	var seen []string
	f := eveclient.InboxFilter{Requester: "alice", Tool: "refund_charge", Limit: 1}
	for pages := 0; ; pages++ {
		p, err := alice.Inbox(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 1 || len(p.Items) == 1 && p.NextCursor == "" || pages > 50 {
			t.Fatalf("page %d: %+v", pages, p)
		}
		seen = append(seen, inboxSessions(p.Items)...)
		if p.NextCursor == "" {
			break
		}
		f.Cursor = p.NextCursor
	}
	if !slices.Contains(seen, p1.SessionID) || !slices.Contains(seen, p2.SessionID) || len(seen) != len(slices.Compact(slices.Sorted(slices.Values(seen)))) {
		t.Fatalf("alice's pages listed %v", seen)
	}
	// Her cursor is hers: mallory's use of it is refused, and so is a
	// cursor with other filters.
	p, err := alice.Inbox(ctx, eveclient.InboxFilter{Requester: "alice", Tool: "refund_charge", Limit: 1})
	if err != nil || p.NextCursor == "" {
		t.Fatalf("alice's first page: %+v %v", p, err)
	}
	for _, c := range []struct{ key, path string }{
		{"key-mallory", "/eve/v1/inbox?requester=alice&tool=refund_charge&limit=1&cursor=" + p.NextCursor},
		{"key-alice", "/eve/v1/inbox?requester=alice&limit=1&cursor=" + p.NextCursor},
	} {
		wantError(t, m.do(t, "GET", c.path, nil, bearer(c.key)), http.StatusBadRequest, api.CodeBadRequest, "cursor:")
	}
}

func inboxSessions(items []eveclient.InboxItem) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.SessionID)
	}
	return ids
}

// visibilityCalls counts a client's Visibility queries.
type visibilityCalls struct{ n atomic.Int64 }

func (v *visibilityCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasSuffix(method, "/ListWorkflowExecutions") || strings.HasSuffix(method, "/CountWorkflowExecutions") {
		v.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Filter values a Visibility store cannot take, and cursors this server
// never issued (forged, byte-flipped, 100 KB), answer 400 naming the
// field, and no Visibility query is made; a good listing queries as
// before. (The SQLite Visibility of the dev server used to hang on such a
// value until the call timed out, 503 after 10 s.)
func TestListingsRefuseBadInputBeforeVisibility(t *testing.T) {
	e, _ := consoleStack(t)
	var calls visibilityCalls
	c, err := e.Env.Server.Dial(client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	counted := newAPIEnv(t, e.Env, func(o *api.Options) {
		o.Keys = apiTestKeys
		o.Sessions = &sessions.Service{Client: c, TaskQueue: e.TaskQueue}
	})
	alice := counted.as("key-alice")
	ctx := e.Ctx(60 * time.Second)
	if _, err := alice.Create(ctx); err != nil {
		t.Fatal(err)
	}
	// A full page (one session, limit 1) comes with a cursor.
	good := waitListed(t, "alice's session", func() (eveclient.SessionPage, error) { return alice.Sessions(ctx, eveclient.SessionFilter{Limit: 1}) },
		func(p eveclient.SessionPage) bool { return len(p.Items) == 1 && p.NextCursor != "" })
	if calls.n.Load() == 0 {
		t.Fatal("a good listing made no Visibility query: the counter counts nothing")
	}
	if p, err := alice.Sessions(ctx, eveclient.SessionFilter{Limit: 1, Cursor: good.NextCursor}); err != nil || len(p.Items) != 0 || p.NextCursor != "" {
		t.Fatalf("the page after: %+v %v", p, err)
	}
	for _, tc := range badListingCases(t, good.NextCursor) {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.n.Load()
			r := counted.do(t, "GET", tc.path, nil, bearer("key-alice"))
			wantError(t, r, http.StatusBadRequest, api.CodeBadRequest, tc.field+":")
			if got := calls.n.Load() - before; got != 0 {
				t.Fatalf("%d Visibility queries", got)
			}
		})
	}
}

type badListing struct{ name, path, field string }

// badListingCases: for each listing route, each filter value shape
// Visibility cannot take, and each cursor shape this server never issued.
// sessionsCursor is a real cursor of alice's /sessions?limit=1 listing
// (valid for no other route or filters).
func badListingCases(t *testing.T, sessionsCursor string) []badListing {
	t.Helper()
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"eyJMYXN0Q2xvc2VUaW1lIjoiMCJ9","a":"ses_x/turn_0"}`))
	var out []badListing
	for _, route := range []string{"inbox", "sessions", "jobs"} {
		base := "/eve/v1/" + route + "?"
		for name, v := range map[string]string{"quote": `x"y`, "NUL": "x\x00y", "backslash": `x\y`, "newline": "x\ny", "300 bytes": strings.Repeat("t", 300)} {
			out = append(out, badListing{route + " tool " + name, base + "tool=" + url.QueryEscape(v), "tool"})
		}
		out = append(out,
			badListing{route + " forged cursor", base + "cursor=" + forged, "cursor"},
			badListing{route + " 100 KB cursor", base + "cursor=" + strings.Repeat("A", 100<<10), "cursor"},
			badListing{route + " cursor not base64", base + "cursor=%21%2A", "cursor"})
		raw, _ := base64.RawURLEncoding.DecodeString(sessionsCursor)
		raw[len(raw)-3] ^= 0x20
		flipped := base64.RawURLEncoding.EncodeToString(raw)
		out = append(out, badListing{route + " byte-flipped cursor", base + "limit=1&cursor=" + flipped, "cursor"})
		if route != "sessions" {
			out = append(out, badListing{route + " another listing's cursor", base + "limit=1&cursor=" + sessionsCursor, "cursor"})
		}
	}
	out = append(out,
		badListing{"inbox kind quote", "/eve/v1/inbox?kind=" + url.QueryEscape(`tool-approval"`), "kind"},
		badListing{"inbox requester NUL", "/eve/v1/inbox?requester=" + url.QueryEscape("alice\x00"), "requester"},
		badListing{"inbox tenant quote", "/eve/v1/inbox?tenant=" + url.QueryEscape(`acme"`), "tenant"},
		badListing{"sessions status quote", "/eve/v1/sessions?status=" + url.QueryEscape(`idle"`), "status"},
		badListing{"sessions owner quote", "/eve/v1/sessions?owner=" + url.QueryEscape(`alice"`), "owner"},
		badListing{"decisions tool quote", "/eve/v1/decisions?since=2026-01-01T00:00:00Z&tool=" + url.QueryEscape(`x"y`), "tool"},
	)
	return out
}
