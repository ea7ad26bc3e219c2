package actions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/tools"
)

// fakeToken looks like a capability: base64url claims naming the action, a dot, a MAC.
func fakeToken(actionID string) string {
	claims, _ := json.Marshal(map[string]string{"act": actionID, "wid": "ses_1/turn_0"})
	return base64.RawURLEncoding.EncodeToString(claims) + ".c2VjcmV0LW1hYy1kby1ub3QtbG9n"
}

type seen struct {
	mu    sync.Mutex
	paths []string
	auth  []string
}

func recorder(s *seen, status int, body string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
}

func TestCapabilityTravelsInHeader(t *testing.T) {
	var s seen
	srv := recorder(&s, 200, `{"ok":true,"cancelRequested":true}`)
	defer srv.Close()
	tok := fakeToken("act_abc")
	for _, c := range []tools.Completion{
		{ID: "act_abc", URL: srv.URL + "/eve/v1/actions/" + tok},
		{URL: srv.URL + "/eve/v1/actions/" + tok}, // id read from the claims
	} {
		s = seen{}
		if err := Complete(context.Background(), c, map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		if err := Fail(context.Background(), c, "X", "m"); err != nil {
			t.Fatal(err)
		}
		stop, err := Heartbeat(context.Background(), c, nil)
		if err != nil || !stop {
			t.Fatalf("heartbeat %v %v", stop, err)
		}
		want := []string{"/eve/v1/actions/act_abc", "/eve/v1/actions/act_abc", "/eve/v1/actions/act_abc/heartbeat"}
		for i := range want {
			if s.paths[i] != want[i] || s.auth[i] != "Bearer "+tok {
				t.Fatalf("request %d: %s %q", i, s.paths[i], s.auth[i])
			}
		}
	}
	// The legacy form, on request.
	s = seen{}
	cl := &Client{TokenInURL: true}
	if err := cl.Complete(context.Background(), tools.Completion{ID: "act_abc", URL: srv.URL + "/eve/v1/actions/" + tok}, 1); err != nil {
		t.Fatal(err)
	}
	if s.paths[0] != "/eve/v1/actions/"+tok || s.auth[0] != "" {
		t.Fatalf("legacy: %s %q", s.paths[0], s.auth[0])
	}
}

func TestErrorsNeverContainTheCapability(t *testing.T) {
	tok := fakeToken("act_abc")
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	var s seen
	down := recorder(&s, 503, `{"ok":false,"error":"try later","code":"temporal_unavailable"}`)
	defer down.Close()
	gone := recorder(&s, 410, `{"ok":false,"error":"action act_abc ended first","code":"action_ended"}`)
	defer gone.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) }))
	defer hang.Close()

	fast := func(c *Client) *Client { c.MaxAttempts, c.InitialBackoff = 2, time.Millisecond; return c }
	for _, c := range []struct {
		name string
		cl   *Client
		url  string
		ctx  time.Duration
		is   error
	}{
		{"connection refused", fast(&Client{}), closedURL + "/eve/v1/actions/" + tok, 0, nil},
		{"connection refused, token in URL", fast(&Client{TokenInURL: true}), closedURL + "/eve/v1/actions/" + tok, 0, nil},
		{"5xx", fast(&Client{}), down.URL + "/eve/v1/actions/" + tok, 0, nil},
		{"410", fast(&Client{}), gone.URL + "/eve/v1/actions/" + tok, 0, ErrGone},
		{"timeout, token in URL", &Client{TokenInURL: true, HTTP: &http.Client{Timeout: 50 * time.Millisecond}, MaxAttempts: 1}, hang.URL + "/eve/v1/actions/" + tok, 0, nil},
		{"context deadline, token in URL", &Client{TokenInURL: true}, hang.URL + "/eve/v1/actions/" + tok, 100 * time.Millisecond, context.DeadlineExceeded},
		{"proxy path", fast(&Client{}), closedURL + "/prefix/actions/" + tok + "?x=" + tok, 0, nil},
		{"not a URL", fast(&Client{}), "http://[::1" + tok + "/eve/v1/actions/" + tok, 0, nil},
		{"bad scheme", fast(&Client{}), "ftp://example.com/eve/v1/actions/" + tok, 0, nil},
	} {
		ctx := context.Background()
		if c.ctx > 0 {
			var cancel func()
			ctx, cancel = context.WithTimeout(ctx, c.ctx)
			defer cancel()
		}
		comp := tools.Completion{ID: "act_abc", URL: c.url}
		errs := []error{c.cl.Complete(ctx, comp, 1), c.cl.Fail(ctx, comp, "X", "m")}
		_, herr := c.cl.Heartbeat(ctx, comp, nil)
		errs = append(errs, herr)
		for _, err := range errs {
			if err == nil {
				t.Fatalf("%s: no error", c.name)
			}
			if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), strings.Split(tok, ".")[1]) {
				t.Fatalf("%s: error leaks the capability: %v", c.name, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("%s: %v is not %v", c.name, err, c.is)
			}
		}
	}
}

func TestRedact(t *testing.T) {
	tok := fakeToken("act_abc")
	for in, want := range map[string]string{
		"https://u:p@eve.example.com/eve/v1/actions/" + tok + "?a=b#f": "https://eve.example.com/eve/v1/actions/…",
		"http://127.0.0.1:4111/eve/v1/actions/" + tok + "/heartbeat":   "http://127.0.0.1:4111/eve/v1/actions/…/heartbeat",
		"/eve/v1/actions/" + tok:                                 "/eve/v1/actions/…",
		"/eve/support/v1/actions/" + tok + "/heartbeat":          "/eve/support/v1/actions/…/heartbeat",
		"http://127.0.0.1:4111/eve/v1/actions/act_abc/heartbeat": "http://127.0.0.1:4111/eve/v1/actions/act_abc/heartbeat",
		"http://127.0.0.1:4111/eve/v1/sessions/ses_1":            "http://127.0.0.1:4111/eve/v1/sessions/ses_1",
		"http://[::1" + tok:                                      "…",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
