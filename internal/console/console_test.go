package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every answer carries the strict policy and the page loads only its own
// files: no inline script or style in the HTML.
func TestHandlerServesTheConsoleWithAStrictPolicy(t *testing.T) {
	h := Handler(Config{TemporalUIWorkflowURL: "http://ui/namespaces/default/workflows"})
	for path, want := range map[string]string{
		"/console/":            "text/html",
		"/console/index.html":  "text/html",
		"/console/app.js":      "javascript",
		"/console/app.css":     "text/css",
		"/console/config.json": "application/json",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), want) {
			t.Fatalf("%s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, d) {
				t.Fatalf("%s: CSP %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Fatalf("%s: CSP %q allows unsafe sources", path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: headers %v", path, rec.Header())
		}
		body := rec.Body.String()
		if want == "text/html" && (strings.Contains(body, "<script>") || strings.Contains(body, "<style") || strings.Contains(body, " style=")) {
			t.Fatalf("%s: inline script or style", path)
		}
		if path == "/console/config.json" && !strings.Contains(body, `"temporalUIWorkflowURL":"http://ui/namespaces/default/workflows"`) {
			t.Fatalf("config = %s", body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/nope.js", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("unknown file: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/console/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
}
