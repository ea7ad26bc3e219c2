//go:build cluster

package cluster

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/eve-temporal/eve/client"
)

// TestClusterListings: the listings on Temporal's PostgreSQL Visibility,
// behind two API servers sharing EVE_ACTION_SECRET. Filter values the
// store cannot take, and cursors neither server issued (forged,
// byte-flipped, another listing's, 100 KB), answer 400 naming the field on
// both servers; a real cursor pages on either server, since both seal with
// the same key. Run alone:
//
//	EVE_TEMPORAL_BIN=… go test -tags cluster -count=1 -run TestClusterListings ./test/cluster/
func TestClusterListings(t *testing.T) {
	c := newCluster(t)
	c.startPostgres()
	c.setupSchemas()
	c.writeServerConfig()
	c.startServer()
	c.createNamespace()
	c.buildApp()
	c.startWorker(0)
	c.startAPI(0)
	c.startAPI(1)
	c.waitPollers(1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Two sessions: a page of one comes with a cursor, which the other
	// server continues.
	for range 2 {
		if _, err := c.api(0).Create(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var first client.SessionPage
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		all, err := c.api(0).Sessions(ctx, client.SessionFilter{Limit: 10})
		if err == nil && len(all.Items) == 2 {
			if first, err = c.api(0).Sessions(ctx, client.SessionFilter{Limit: 1}); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Visibility lists %+v, %v: want the 2 sessions", all, err)
		}
	}
	if len(first.Items) != 1 || first.NextCursor == "" {
		t.Fatalf("first page %+v: want one session and a cursor", first)
	}
	second, err := c.api(1).Sessions(ctx, client.SessionFilter{Limit: 1, Cursor: first.NextCursor})
	if err != nil || len(second.Items) != 1 || second.Items[0].SessionID == first.Items[0].SessionID {
		t.Fatalf("second page, on the other server: %+v %v", second, err)
	}
	if third, err := c.api(0).Sessions(ctx, client.SessionFilter{Limit: 1, Cursor: second.NextCursor}); err != nil || len(third.Items) != 0 || third.NextCursor != "" {
		t.Fatalf("third page: %+v %v", third, err)
	}

	raw, _ := base64.RawURLEncoding.DecodeString(first.NextCursor)
	raw[len(raw)-3] ^= 0x20
	flipped := base64.RawURLEncoding.EncodeToString(raw)
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"eyJMYXN0Q2xvc2VUaW1lIjoiMCJ9","a":"ses_x/turn_0"}`))
	type bad struct{ path, field string }
	var cases []bad
	for _, route := range []string{"inbox", "sessions", "jobs"} {
		base := "/eve/v1/" + route + "?"
		for _, v := range []string{`x"y`, "x\x00y", `x\y`, "x\ny", strings.Repeat("t", 300)} {
			cases = append(cases, bad{base + "tool=" + url.QueryEscape(v), "tool"})
		}
		cases = append(cases,
			bad{base + "cursor=" + forged, "cursor"},
			bad{base + "limit=1&cursor=" + flipped, "cursor"},
			bad{base + "cursor=" + strings.Repeat("A", 100<<10), "cursor"})
		if route != "sessions" {
			cases = append(cases, bad{base + "limit=1&cursor=" + first.NextCursor, "cursor"})
		}
	}
	cases = append(cases,
		bad{"/eve/v1/inbox?kind=" + url.QueryEscape(`tool-approval"`), "kind"},
		bad{"/eve/v1/inbox?requester=" + url.QueryEscape("alice\x00"), "requester"},
		bad{"/eve/v1/sessions?status=" + url.QueryEscape(`idle"`), "status"})
	for i := range 2 {
		for _, b := range cases {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.apiURL(i)+b.path, nil)
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"bad_request"`) || !strings.Contains(string(body), b.field+":") {
				t.Errorf("API server %d, %.80s: %d %.300s, want 400 naming %s", i+1, b.path, resp.StatusCode, body, b.field)
			}
		}
	}

	// What PostgreSQL Visibility itself does with such a value (for the
	// record, not asserted: eve never sends it).
	start := time.Now()
	qctx, qcancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = c.tc.ListWorkflow(qctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1,
		Query: `WorkflowType = "eve.Turn" AND EveTools = "x\"y"`})
	qcancel()
	t.Logf("PostgreSQL Visibility, EveTools = \"x\\\"y\" sent as is: %v after %s", err, time.Since(start).Round(time.Millisecond))
}
