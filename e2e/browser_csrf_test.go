package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/protocol"
)

// chromium finds Debian's Chromium (make test installs it). Without it the
// test is skipped, unless EVE_REQUIRE_CHROMIUM=1 (set by make test), when
// it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("EVE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("EVE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("Chromium is not installed: make test installs Debian's chromium package (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed (Debian's chromium package; make test installs it)")
	return ""
}

// evilPage is a page on another site that tries what a cross-site page can
// send without a preflight: fetches in no-cors mode with text/plain or no
// content type, and a text/plain form post. It reports to its own origin
// when every request went out.
const evilPage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="%[1]s/eve/v1/session">
<input name='{"message":"form from evil","x":"' value='"}'></form>
<script>
const api = %[1]q, sid = %[2]q;
const reqs = [
  ["/eve/v1/session", "text/plain", '{"message":"from evil"}'],
  ["/eve/v1/session", null, '{"message":"from evil, no type"}'],
  ["/eve/v1/session/" + sid, "text/plain", '{"message":"steer from evil"}'],
  ["/eve/v1/session/" + sid + "/reset", "text/plain", "{}"],
  ["/eve/v1/session/" + sid + "/clear", null, null],
  ["/eve/v1/session/" + sid + "/compact", "text/plain", "{}"],
  ["/eve/v1/session/" + sid + "/cancel", "text/plain", "{}"],
  ["/v1/tools/ops.counter/execute", "text/plain; x=json", '{"input":{"label":"evil"},"userId":"alice"}'],
  ["/v1/tools/ops.counter/execute", null, '{"input":{"label":"evil"},"userId":"alice"}'],
];
(async () => {
  const out = [];
  for (const [path, type, body] of reqs) {
    const opts = {method: "POST", mode: "no-cors"};
    if (type) opts.headers = {"Content-Type": type};
    if (body !== null) opts.body = type ? body : new Blob([body]);
    try { await fetch(api + path, opts); out.push("sent " + path); } catch (e) { out.push("error " + path + ": " + e); }
  }
  await new Promise(done => {
    document.querySelector("iframe").onload = done;
    document.getElementById("f").submit();
  });
  out.push("form sent");
  await fetch("/done", {method: "POST", body: JSON.stringify(out)});
})();
</script></body></html>`

// A real browser on another origin (http://evil.example, mapped to this
// machine) sends every request a page can send without asking: the open
// API server refuses each one before anything runs, so no session is
// created, the known session is untouched and the tool never runs.
func TestBrowserCrossSiteRequestsChangeNothing(t *testing.T) {
	bin := chromium(t)
	e := newSecEnv(t, nil, nil)
	ctx := e.Ctx(90 * time.Second)
	id, err := e.Sessions.Create(ctx, "", api.Anonymous)
	if err != nil {
		t.Fatal(err)
	}
	before := e.Events(ctx, id)

	// Count what reached the API server from the page's origin.
	var fromPage atomic.Int64
	target := strings.TrimPrefix(e.url, "http://")
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Origin"), "http://evil.example") {
			fromPage.Add(1)
		}
		proxyTo(w, r, target)
	}))
	t.Cleanup(counted.Close)

	done := make(chan []string, 1)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			var out []string
			json.NewDecoder(r.Body).Decode(&out)
			done <- out
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, evilPage, counted.URL, id)
	}))
	t.Cleanup(evil.Close)
	page := strings.Replace(evil.URL, "127.0.0.1", "evil.example", 1)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--host-resolver-rules=MAP evil.example 127.0.0.1", page)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var out []string
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the page never reported")
	}
	cancel()
	for _, o := range out {
		if !strings.HasPrefix(o, "sent ") && o != "form sent" {
			t.Fatalf("the browser did not send a request: %v", out)
		}
	}
	if n := fromPage.Load(); n < 10 {
		t.Fatalf("%d requests from the page reached the server, want every one (10): %v", n, out)
	}

	// Nothing happened.
	if n := e.count.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	after := e.Events(ctx, id)
	if len(after) != len(before) {
		t.Fatalf("the session changed: %d events before, %d after", len(before), len(after))
	}
	// No session was created: a legitimate create, afterwards, is the
	// second session on the queue (Visibility shows it once it shows any
	// created before it).
	if r := e.raw(t, "POST", "/eve/v1/session", `{"message":"hello"}`, map[string]string{"Content-Type": "application/json"}); r.Status != 202 {
		t.Fatalf("legitimate create: %d %s", r.Status, r.Body)
	}
	query := fmt.Sprintf("TaskQueue = '%s' AND WorkflowType = 'eve.Session'", e.TaskQueue)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := e.Client.CountWorkflow(ctx, countRequest(query))
		if err == nil && res.GetCount() >= 2 {
			if res.GetCount() != 2 {
				t.Fatalf("%d sessions, want 2 (the test's and the legitimate one)", res.GetCount())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("visibility never showed the legitimate session: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = protocol.SessionStarted
}

// proxyTo forwards one request to the API server as it came (headers,
// Origin included).
func proxyTo(w http.ResponseWriter, r *http.Request, host string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+host+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: query}
}
