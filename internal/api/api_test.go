package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// These tests cover what the server decides before it talks to Temporal;
// e2e/api_*_test.go cover the rest against a real dev server.

func newTestServer(t *testing.T, mut func(*Options)) *Server {
	t.Helper()
	opts := Options{Sessions: &sessions.Service{}, MaxBodyBytes: 1024}
	if mut != nil {
		mut(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func serve(s http.Handler, method, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

func wantErr(t *testing.T, w *httptest.ResponseRecorder, status int, code, part string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d: %s", w.Code, status, w.Body)
	}
	var b ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.OK || b.Error == "" || b.Code != code {
		t.Fatalf("body %s: want {ok:false, error, code:%q}", w.Body, code)
	}
	if !strings.Contains(b.Error, part) {
		t.Fatalf("error %q should mention %q", b.Error, part)
	}
}

func TestNewNeedsSessions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("want an error without Sessions")
	}
	if _, err := New(Options{Sessions: &sessions.Service{}, Keys: map[string]*auth.Principal{"k": {}}}); err == nil {
		t.Fatal("want an error for a principal without an id")
	}
}

func TestBodyChecks(t *testing.T) {
	s := newTestServer(t, nil)
	js := map[string]string{"Content-Type": "application/json"}
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"message":`, js), 400, CodeInvalidJSON, "invalid JSON")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `[1]`, js), 400, CodeInvalidJSON, "JSON object")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `null`, js), 400, CodeInvalidJSON, "JSON object")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"message":"hi"}`, map[string]string{"Content-Type": "text/plain"}), 415, CodeUnsupportedMedia, "text/plain")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"message":"hi"}`, nil), 415, CodeUnsupportedMedia, "application/json")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"message":"`+strings.Repeat("x", 2000)+`"}`, js), 413, CodeTooLarge, "1024 bytes")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"inputResponses":[{"requestId":"x"}]}`, js), 400, CodeBadRequest, "new session")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"message":"a","inputResponses":[{"requestId":"x"}]}`, js), 400, CodeBadRequest, "mutually exclusive")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"inputResponses":[{"requestId":"x"},{"requestId":"x"}]}`, js), 400, CodeBadRequest, "twice")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"inputResponses":[{"optionId":"x"}]}`, js), 400, CodeBadRequest, "requestId")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"message":[{"type":"image"}]}`, js), 400, CodeBadRequest, "image")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"message":"hi","outputSchema":"x"}`, js), 400, CodeBadRequest, "outputSchema")
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1/cancel", `{"turnId":""}`, js), 400, CodeBadRequest, "turnId")
	wantErr(t, serve(s, "GET", "/eve/v1/session/ses_1/stream?startIndex=x", "", nil), 400, CodeBadRequest, "startIndex")
	wantErr(t, serve(s, "GET", "/nope", "", nil), 404, CodeNotFound, "/eve/v1/")
	if w := serve(s, "DELETE", "/eve/v1/session/ses_1", "", nil); w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound {
		t.Fatalf("DELETE: %d", w.Code)
	}
}

func TestParseMessageParts(t *testing.T) {
	in, err := parseTurnInput(map[string]json.RawMessage{"message": json.RawMessage(`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`)}, false)
	if err != nil || in.message != "a\n\nb" {
		t.Fatalf("parts = %q, %v", in.message, err)
	}
	in, err = parseTurnInput(map[string]json.RawMessage{"message": json.RawMessage(`"  "`)}, true)
	if err != nil || in.message != "" {
		t.Fatalf("blank message on create = %q, %v: want a bodyless create", in.message, err)
	}
}

func TestAuth(t *testing.T) {
	var seen *auth.Principal
	s := newTestServer(t, func(o *Options) {
		o.Keys = map[string]*auth.Principal{"sk_a": {ID: "alice", Type: "user"}}
	})
	s.mux.HandleFunc("GET /eve/v1/whoami", s.authed(func(w http.ResponseWriter, r *http.Request) { seen = Caller(r.Context()) }))
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer sk_b"}, {"Authorization": "Basic c2tfYQ=="}, {"Authorization": "Bearer"}} {
		w := serve(s, "GET", "/eve/v1/whoami", "", h)
		wantErr(t, w, 401, CodeUnauthorized, "")
		if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("www-authenticate = %q", w.Header().Get("WWW-Authenticate"))
		}
	}
	if w := serve(s, "GET", "/eve/v1/whoami", "", map[string]string{"Authorization": "bearer sk_a"}); w.Code != 200 || seen == nil || seen.ID != "alice" {
		t.Fatalf("valid key: %d %+v", w.Code, seen)
	}
	// Named mounts reach the same routes.
	seen = nil
	if w := serve(s, "GET", "/eve/my-agent/v1/whoami", "", map[string]string{"Authorization": "Bearer sk_a"}); w.Code != 200 || seen == nil {
		t.Fatalf("named mount: %d", w.Code)
	}
	// Open server: anonymous.
	open := newTestServer(t, nil)
	open.mux.HandleFunc("GET /eve/v1/whoami", open.authed(func(w http.ResponseWriter, r *http.Request) { seen = Caller(r.Context()) }))
	if w := serve(open, "GET", "/eve/v1/whoami", "", nil); w.Code != 200 || seen != Anonymous || !open.Open() {
		t.Fatalf("open server: %d %+v", w.Code, seen)
	}
}

func TestCORSPreflight(t *testing.T) {
	s := newTestServer(t, func(o *Options) { o.Keys = map[string]*auth.Principal{"k": {ID: "a"}} })
	w := serve(s, "OPTIONS", "/eve/v1/session/x/stream", "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "x-eve-stream-tail-index") {
		t.Fatalf("preflight: %d %v", w.Code, w.Header())
	}
	// A 401 to a cross-origin caller still exposes its headers.
	w = serve(s, "GET", "/eve/v1/info", "", map[string]string{"Origin": "https://app.example"})
	if w.Code != 401 || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("cross-origin 401: %d %v", w.Code, w.Header())
	}
}

func TestInfoShape(t *testing.T) {
	s := newTestServer(t, func(o *Options) {
		o.Info = Info{AgentName: "demo", ModelID: "scripted:demo", Tools: []ToolInfo{{Name: "t", Description: "d", HasExecute: true}}}
	})
	b, err := json.Marshal(s.infoBody())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["version"] != float64(5) || m["kind"] != "eve-agent-info" {
		t.Fatalf("info = %s", b)
	}
	tools := m["tools"].(map[string]any)["static"].([]any)
	tool := tools[0].(map[string]any)
	if tool["name"] != "t" || tool["sourceKind"] != "module" || tool["binding"] == nil {
		t.Fatalf("tool = %v", tool)
	}
}

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys([]byte("keys:\n  sk_1234567890:\n    principalId: a\n    attributes: {tenantId: t}\n"))
	if err != nil || keys["sk_1234567890"].Attr("tenantId") != "t" {
		t.Fatalf("keys = %v, %v", keys, err)
	}
	if _, err := ParseKeys([]byte(`{"keys":{"sk_1234567890":{}}}`)); err == nil || strings.Contains(err.Error(), "sk_1234567890") {
		t.Fatalf("a key without a principal: %v (and the key must not appear in the error)", err)
	}
}

func TestPollInterval(t *testing.T) {
	s := newTestServer(t, nil)
	now, long := time.Now(), time.Now().Add(-time.Minute)
	for _, c := range []struct {
		active   bool
		last     string
		activity time.Time
		want     time.Duration
	}{
		{false, "", now, DefaultPollInterval},
		{true, protocol.ActionsRequested, now, DefaultPollInterval},
		{true, protocol.ActionsRequested, long, 5 * DefaultPollInterval},
		{true, protocol.TurnWaiting, long, DefaultIdlePollInterval},
		{false, protocol.SessionWaiting, long, DefaultIdlePollInterval},
	} {
		if got := s.interval(c.active, c.last, c.activity); got != c.want {
			t.Errorf("interval(%v, %s, %v) = %v, want %v", c.active, c.last, c.activity, got, c.want)
		}
	}
}

// Errors of the sessions service map to statuses: an ended session is 410
// session_ended with how and why it closed and what to do; unknown is 404.
func TestSessionErrorStatuses(t *testing.T) {
	s := newTestServer(t, nil)
	ended := &sessions.EndedError{SessionID: "ses_1", Status: sessions.StatusTerminated, Reason: "Workflow history size exceeds limit."}
	for _, c := range []struct {
		err    error
		status int
		code   string
		parts  []string
	}{
		{fmt.Errorf("send: %w", ended), http.StatusGone, CodeSessionEnded, []string{"ses_1 has ended", "terminated (Workflow history size exceeds limit)", "start a new session"}},
		{&sessions.EndedError{SessionID: "ses_1", Status: sessions.StatusTimedOut}, http.StatusGone, CodeSessionEnded, []string{"timed out. It takes no more"}},
		{serviceerror.NewNotFound("workflow execution already completed"), http.StatusGone, CodeSessionEnded, []string{"ses_1 has ended"}},
		{fmt.Errorf("%w: ses_1", sessions.ErrNotFound), http.StatusNotFound, CodeSessionNotFound, []string{"ses_1 not found"}},
	} {
		var he *httpError
		if !errors.As(s.temporalError("send the message", "ses_1", c.err), &he) || he.status != c.status || he.code != c.code {
			t.Fatalf("%v: got %+v, want %d %s", c.err, he, c.status, c.code)
		}
		for _, p := range c.parts {
			if !strings.Contains(he.msg, p) {
				t.Fatalf("%v: message %q should contain %q", c.err, he.msg, p)
			}
		}
	}
}
