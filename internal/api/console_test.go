package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/sessions"
)

// The console is served by every server, without a key (the page signs in
// itself), while the routes it calls need one; an open server serves it
// to loopback Hosts only, as it does the API.
func TestConsoleServedLikeTheAPI(t *testing.T) {
	get := func(s *Server, host, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = host
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	open, err := New(Options{Sessions: &sessions.Service{}})
	if err != nil {
		t.Fatal(err)
	}
	if w := get(open, "127.0.0.1:4111", "/console/"); w.Code != 200 || !strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("open, loopback: %d %v", w.Code, w.Header())
	}
	if w := get(open, "127.0.0.1:4111", "/console/config.json"); !strings.Contains(w.Body.String(), `"open":true`) {
		t.Fatalf("open config: %s", w.Body)
	}
	if w := get(open, "evil.example", "/console/"); w.Code != http.StatusForbidden {
		t.Fatalf("open, foreign Host: %d", w.Code)
	}
	if w := get(open, "127.0.0.1:4111", "/console"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/console/" {
		t.Fatalf("/console: %d %v", w.Code, w.Header())
	}

	keyed, err := New(Options{Sessions: &sessions.Service{}, Keys: map[string]*auth.Principal{"k": {ID: "alice", Type: "user"}}})
	if err != nil {
		t.Fatal(err)
	}
	if w := get(keyed, "eve.example.com", "/console/app.js"); w.Code != 200 {
		t.Fatalf("keyed console: %d", w.Code)
	}
	if w := get(keyed, "eve.example.com", "/console/config.json"); !strings.Contains(w.Body.String(), `"open":false`) {
		t.Fatalf("keyed config: %s", w.Body)
	}
	for _, p := range []string{"/eve/v1/sessions", "/eve/v1/jobs", "/eve/v1/inbox/events"} {
		if w := get(keyed, "eve.example.com", p); w.Code != http.StatusUnauthorized {
			t.Fatalf("%s without a key: %d", p, w.Code)
		}
	}
}
