package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/protocol"
)

// inboxHints reads GET /eve/v1/inbox/events as key and sends each hint's
// sessions on the returned channel until ctx ends.
func inboxHints(t *testing.T, ctx context.Context, e *apiEnv, key string) <-chan protocol.InboxHint {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/eve/v1/inbox/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("inbox events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan protocol.InboxHint, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "inbox":
				var h protocol.InboxHint
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &h) == nil {
					out <- h
				}
			}
		}
	}()
	return out
}

// hintFor waits (bounded) for a hint naming session id and returns every
// session the hints named until then.
func hintFor(t *testing.T, hints <-chan protocol.InboxHint, id string) []string {
	t.Helper()
	var named []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatalf("the inbox events stream ended; hints named %v", named)
			}
			named = append(named, h.Sessions...)
			if slices.Contains(h.Sessions, id) {
				return named
			}
		case <-timeout:
			t.Fatalf("no hint named %s within 20 s; hints named %v", id, named)
		}
	}
}

// waitListed retries read (Visibility is eventually consistent) until ok
// holds, for at most 30 s.
func waitListed[T any](t *testing.T, what string, read func() (T, error), ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := read()
		if err == nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last %+v, %v", what, v, err)
		}
		time.Sleep(100 * time.Millisecond) // polling Visibility, not a barrier
	}
}

func sessionIDs(p client.SessionPage) []string {
	var ids []string
	for _, s := range p.Items {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// The console's routes: the inbox events stream pushes a hint when a
// session the caller may access changes (and never names another
// principal's), the sessions list shows each caller only its own sessions
// with their status and filters, and the jobs list shows a delegated job
// with its deadline and last heartbeat until the session's cancel stops it.
func TestConsoleRoutes(t *testing.T) {
	e, _ := consoleStack(t)
	ctx := e.Ctx(120 * time.Second)
	alice, bob := e.as("key-alice"), e.as("key-bob")

	aliceHints, bobHints := inboxHints(t, ctx, e, "key-alice"), inboxHints(t, ctx, e, "key-bob")
	for _, hs := range []<-chan protocol.InboxHint{aliceHints, bobHints} {
		if first := <-hs; len(first.Sessions) != 0 || first.At.IsZero() {
			t.Fatalf("first hint = %+v, want one for everything", first)
		}
	}
	a := parkOver(t, ctx, alice, "", "refund ch_1 for 5")
	hintFor(t, aliceHints, a.SessionID)
	b := parkOver(t, ctx, bob, "", "refund ch_2 for 7")
	if named := hintFor(t, bobHints, b.SessionID); slices.Contains(named, a.SessionID) {
		t.Fatalf("bob was told of alice's session: %v", named)
	}

	// Without a bus, writes through the server itself still tell its streams.
	nobus := newAPIEnv(t, e.Env, func(o *api.Options) { o.Keys = apiTestKeys })
	nobus.Server.Close() // stop hearing the bus: only this server's writes remain
	quiet := inboxHints(t, ctx, nobus, "key-alice")
	<-quiet
	c := parkOver(t, ctx, nobus.as("key-alice"), "", "refund ch_3 for 3")
	hintFor(t, quiet, c.SessionID)

	// Sessions: each principal sees only its own.
	mine := waitListed(t, "alice's waiting sessions", func() (client.SessionPage, error) {
		return alice.Sessions(ctx, client.SessionFilter{Status: "waiting-input"})
	}, func(p client.SessionPage) bool { return slices.Contains(sessionIDs(p), a.SessionID) })
	for _, s := range mine.Items {
		if s.Owner == nil || s.Owner.ID != "alice" {
			t.Fatalf("alice sees %+v", s)
		}
		if s.SessionID == a.SessionID && (s.Status != "waiting-input" || !slices.Contains(s.Tools, "refund_charge") || s.StartedAt.IsZero()) {
			t.Fatalf("item = %+v", s)
		}
	}
	// Visibility lists bob's session eventually (alice's being listed says
	// nothing of a session created after it).
	bobs := waitListed(t, "bob's sessions", func() (client.SessionPage, error) { return bob.Sessions(ctx, client.SessionFilter{}) },
		func(p client.SessionPage) bool { return slices.Contains(sessionIDs(p), b.SessionID) })
	if ids := sessionIDs(bobs); slices.Contains(ids, a.SessionID) {
		t.Fatalf("bob's sessions = %v", ids)
	}
	if p, err := alice.Sessions(ctx, client.SessionFilter{Owner: "bob"}); err != nil || len(p.Items) != 0 {
		t.Fatalf("alice filtering by bob: %+v %v", p, err)
	}
	if p, err := alice.Sessions(ctx, client.SessionFilter{Tool: "run_report"}); err != nil || len(p.Items) != 0 {
		t.Fatalf("alice's sessions waiting on run_report: %+v %v", p, err)
	}
	if r := e.do(t, "GET", "/eve/v1/sessions?status=asleep", nil, map[string]string{"Authorization": "Bearer key-alice"}); r.Status != 400 {
		t.Fatalf("bad status filter: %d", r.Status)
	}
	if r := e.do(t, "GET", "/eve/v1/sessions", nil, nil); r.Status != 401 {
		t.Fatalf("no key: %d", r.Status)
	}

	// Jobs: a delegated job, with its deadline; bob sees none of it.
	job, err := alice.CreateAndSend(ctx, "run the sales report")
	if err != nil {
		t.Fatal(err)
	}
	jobs := waitListed(t, "alice's jobs", func() (client.JobPage, error) { return alice.Jobs(ctx, client.JobFilter{}) },
		func(p client.JobPage) bool { return len(p.Items) == 1 })
	j := jobs.Items[0]
	if j.SessionID != job.SessionID || j.ToolName != "run_report" || j.State != "pending" || !strings.HasPrefix(j.ActionID, "act_") ||
		time.Until(j.Deadline) < 9*time.Minute || time.Until(j.Deadline) > 11*time.Minute || j.WorkflowID != j.SessionID+"/"+j.TurnID {
		t.Fatalf("job = %+v", j)
	}
	if p, err := bob.Jobs(ctx, client.JobFilter{}); err != nil || len(p.Items) != 0 {
		t.Fatalf("bob's jobs: %+v %v", p, err)
	}
	if _, err := alice.Cancel(ctx, j.SessionID, j.TurnID); err != nil {
		t.Fatal(err)
	}
	waitListed(t, "no jobs after the cancel", func() (client.JobPage, error) { return alice.Jobs(ctx, client.JobFilter{}) },
		func(p client.JobPage) bool { return len(p.Items) == 0 })
}
