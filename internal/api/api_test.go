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
	opts := Options{Sessions: &sessions.Service{}, ServerOptions: ServerOptions{MaxBodyBytes: 1024}}
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
	req.Host = "127.0.0.1:4111" // an open server answers loopback hosts only
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
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
	var b protocol.ErrorBody
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
	wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", `{"message":"hi","outputSchema":{"type":"object","properties":{"n":{"type":"nope"}}}}`, js), 400, CodeBadRequest, "usable JSON Schema")
	wantErr(t, serve(s, "POST", "/eve/v1/session", `{"outputSchema":{"type":"object"}}`, js), 400, CodeBadRequest, "with a 'message'")
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
	// A blank message on create is refused, as eve does; no message field
	// creates an empty session.
	for _, blank := range []string{`""`, `"  "`} {
		if _, err := parseTurnInput(map[string]json.RawMessage{"message": json.RawMessage(blank)}, true); err == nil || !strings.Contains(err.Error(), "non-empty when provided") {
			t.Fatalf("blank message %s on create: %v, want a 400", blank, err)
		}
	}
	if in, err = parseTurnInput(map[string]json.RawMessage{}, true); err != nil || in.message != "" {
		t.Fatalf("create without a message = %q, %v: want an empty session", in.message, err)
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
		if got := s.hub.interval(c.active, c.last, c.activity); got != c.want {
			t.Errorf("interval(%v, %s, %v) = %v, want %v", c.active, c.last, c.activity, got, c.want)
		}
	}
}

// Errors of the sessions service map to statuses: an ended session is 410
// session_ended with how and why it closed and what to do; unknown is 404;
// a namespace Temporal says it does not find is 503.
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
		// Temporal's answer to a namespace lookup that failed under load,
		// too: temporary, never a 500.
		{fmt.Errorf("start session ses_1: %w", serviceerror.NewNamespaceNotFound("default")), http.StatusServiceUnavailable, CodeUnavailable, []string{`namespace "default" is not found`, "retry after Retry-After", "--namespace"}},
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

// An open server answers only loopback Host headers (DNS rebinding), and
// never sends a wildcard CORS origin.
func TestOpenServerLoopbackOnly(t *testing.T) {
	open := newTestServer(t, nil)
	for _, h := range []string{"127.0.0.1:4111", "localhost:4111", "LOCALHOST", "[::1]:4111", "127.0.0.2", "localhost."} {
		if w := serve(open, "GET", "/nope", "", map[string]string{"Host": h}); w.Code != 404 {
			t.Fatalf("Host %q: %d %s", h, w.Code, w.Body)
		}
	}
	for _, h := range []string{"attacker.example", "attacker.example:4111", "10.0.0.5:4111", "0.0.0.0:4111", "localhost.attacker.example", ""} {
		w := serve(open, "GET", "/eve/v1/health", "", map[string]string{"Host": h})
		wantErr(t, w, 403, CodeForbiddenHost, "EVE_API_KEY")
	}
	// CORS: pages of this machine are reflected, other origins get nothing, never "*".
	w := serve(open, "OPTIONS", "/eve/v1/session", "", map[string]string{"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"})
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("loopback preflight: %d %v", w.Code, w.Header())
	}
	for _, o := range []string{"https://app.example", "null"} {
		w := serve(open, "GET", "/nope", "", map[string]string{"Origin": o})
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Fatalf("open server, origin %s: Access-Control-Allow-Origin %q", o, got)
		}
	}
	// An explicit list still applies; "*" on an open server means loopback pages.
	listed := newTestServer(t, func(o *Options) { o.CORSOrigins = []string{"https://app.example", "*"} })
	if got := serve(listed, "GET", "/nope", "", map[string]string{"Origin": "https://app.example"}).Header().Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Fatalf("listed origin: %q", got)
	}
	if got := serve(listed, "GET", "/nope", "", map[string]string{"Origin": "https://other.example"}).Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Fatalf("unlisted origin on an open server: %q", got)
	}
	// --insecure-open lifts the Host check, not the origin check (and
	// still no wildcard): a page of another origin is refused, the
	// server's own origin passes.
	insecure := newTestServer(t, func(o *Options) { o.InsecureOpen = true; o.Addr = "0.0.0.0:4111" })
	w = serve(insecure, "GET", "/nope", "", map[string]string{"Host": "eve.internal:4111", "Origin": "https://app.example"})
	if w.Code != 403 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("insecure open, other origin: %d %v", w.Code, w.Header())
	}
	w = serve(insecure, "GET", "/nope", "", map[string]string{"Host": "eve.internal:4111", "Origin": "http://eve.internal:4111"})
	if w.Code != 404 {
		t.Fatalf("insecure open, own origin: %d %v", w.Code, w.Header())
	}
	// With keys any Host is fine.
	keyed := newTestServer(t, func(o *Options) { o.Keys = map[string]*auth.Principal{"k": {ID: "a"}} })
	if w := serve(keyed, "GET", "/nope", "", map[string]string{"Host": "eve.example.com"}); w.Code != 404 {
		t.Fatalf("keyed server, public host: %d", w.Code)
	}
}

// New refuses an open server on a non-loopback address without InsecureOpen.
func TestNewRefusesOpenBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:4111", ":4111", "[::]:4111", "10.1.2.3:4111", "eve.example.com:4111"} {
		_, err := New(Options{Sessions: &sessions.Service{}, ServerOptions: ServerOptions{Addr: addr}})
		if !errors.Is(err, ErrInsecureOpen) || !strings.Contains(err.Error(), "EVE_API_KEY") || !strings.Contains(err.Error(), "--insecure-open") {
			t.Fatalf("open on %s: %v", addr, err)
		}
		if _, err := New(Options{Sessions: &sessions.Service{}, ServerOptions: ServerOptions{Addr: addr, InsecureOpen: true}}); err != nil {
			t.Fatalf("open on %s with InsecureOpen: %v", addr, err)
		}
		if _, err := New(Options{Sessions: &sessions.Service{}, ServerOptions: ServerOptions{Addr: addr}, Keys: map[string]*auth.Principal{"k": {ID: "a"}}}); err != nil {
			t.Fatalf("keyed on %s: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:4111", "localhost:0", "[::1]:4111", ""} {
		if _, err := New(Options{Sessions: &sessions.Service{}, ServerOptions: ServerOptions{Addr: addr}}); err != nil {
			t.Fatalf("open on %q: %v", addr, err)
		}
	}
}

// The keys file: principalType is user or service; canActFor only on services.
func TestParseKeysTypesAndGrants(t *testing.T) {
	keys, err := ParseKeys([]byte("keys:\n  sk_svc_0123456789:\n    principalId: billing\n    principalType: service\n    canActFor: [alice, bob]\n  sk_ops_0123456789:\n    principalId: ops\n    principalType: service\n    canActFor: ['*']\n"))
	if err != nil {
		t.Fatal(err)
	}
	billing, ops := keys["sk_svc_0123456789"], keys["sk_ops_0123456789"]
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser}
	carol := &auth.Principal{ID: "carol", Type: auth.TypeUser}
	if !billing.ActsFor(alice) || billing.ActsFor(carol) || !ops.ActsFor(carol) || ops.ActsFor(&auth.Principal{ID: "billing", Type: auth.TypeService}) {
		t.Fatalf("grants: billing %+v ops %+v", billing, ops)
	}
	for _, bad := range []string{
		"keys: {sk_x_0123456789: {principalId: a, principalType: admin}}",
		"keys: {sk_x_0123456789: {principalId: a, principalType: anonymous}}",
		"keys: {sk_x_0123456789: {principalId: a, canActFor: [b]}}",
		"keys: {sk_x_0123456789: {principalId: a, principalType: service, canActFor: ['']}}",
	} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Fatalf("%s: want an error", bad)
		} else if strings.Contains(err.Error(), "sk_x_0123456789") {
			t.Fatalf("the key must not appear in the error: %v", err)
		}
	}
}

func TestStreamCounter(t *testing.T) {
	c := &streamCounter{open: map[string]int{}}
	alice, bob := &auth.Principal{ID: "alice", Type: "user"}, &auth.Principal{ID: "bob", Type: "user"}
	r1, ok1 := c.acquire(alice, 2)
	_, ok2 := c.acquire(alice, 2)
	_, ok3 := c.acquire(alice, 2)
	_, okBob := c.acquire(bob, 2)
	if !ok1 || !ok2 || ok3 || !okBob {
		t.Fatalf("acquire: %v %v %v %v", ok1, ok2, ok3, okBob)
	}
	r1()
	if _, ok := c.acquire(alice, 2); !ok {
		t.Fatal("a released slot should be free again")
	}
	if _, ok := c.acquire(alice, -1); !ok {
		t.Fatal("a negative bound is no bound")
	}
}

func TestDerivedIDs(t *testing.T) {
	alice, bob := &auth.Principal{ID: "alice", Type: "user"}, &auth.Principal{ID: "bob", Type: "user"}
	a, a2 := deriveIDs(alice, "ses_1", "k1"), deriveIDs(alice, "ses_1", "k1")
	if a != a2 || a == deriveIDs(bob, "ses_1", "k1") || a == deriveIDs(alice, "ses_2", "k1") || a == deriveIDs(alice, "ses_1", "k2") {
		t.Fatal("derived ids must depend on exactly the caller, the session and the key")
	}
	if !strings.HasPrefix(a.deliveryID, "dlv_") || len(a.deliveryID) != 30 || !strings.HasPrefix(a.sessionID, "ses_") || len(a.sessionID) != 30 {
		t.Fatalf("ids = %+v", a)
	}
}
