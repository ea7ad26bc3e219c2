package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

// The doors a web page and a slow client find (docs/http-api.md,
// "Security"), probed against a real server: every state-changing route of
// the session protocol, the tools API and completion URLs, with the shapes
// a cross-site page or a careless client sends. A new route joins the
// table, and so is covered by every shape.

// secEnv is one API server on a real dev server with the tools API and
// completion URLs mounted, open (no keys) unless keys are given.
type secEnv struct {
	*tapiEnv
	url     string
	srv     *api.Server
	srvKeys map[string]*auth.Principal
}

func newSecEnv(t *testing.T, keys map[string]*auth.Principal, mut func(*api.Options)) *secEnv {
	t.Helper()
	te := newTapiEnv(t, nil)
	_, actions, _ := te.Actions()
	a := newAPIEnv(t, te.Env, func(o *api.Options) {
		o.Keys, o.Tools, o.Actions = keys, te.svc.Handler(), actions
		if mut != nil {
			mut(o)
		}
	})
	return &secEnv{tapiEnv: te, url: a.URL, srv: a.Server, srvKeys: keys}
}

// raw sends one request with exactly these headers and body.
func (e *secEnv) raw(t *testing.T, method, path, body string, headers map[string]string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.Ctx(30*time.Second), method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// stateRoute is one state-changing route with a valid JSON body.
type stateRoute struct {
	name, path, body string
	// bodyRequired: the route refuses an empty body (some take none).
	bodyRequired bool
}

func stateRoutes(id string) []stateRoute {
	return []stateRoute{
		{"create", "/eve/v1/session", `{"message":"hello"}`, false},
		{"message", "/eve/v1/session/" + id, `{"message":"hello"}`, true},
		{"cancel", "/eve/v1/session/" + id + "/cancel", `{}`, false},
		{"clear", "/eve/v1/session/" + id + "/clear", `{}`, false},
		{"compact", "/eve/v1/session/" + id + "/compact", `{}`, false},
		{"reset", "/eve/v1/session/" + id + "/reset", `{}`, false},
		{"tools execute", "/v1/tools/ops.counter/execute", `{"input":{"label":"x"},"userId":"alice"}`, true},
		{"tools executeToolCalls", "/v1/tools/execute-tool-calls", `{"toolCalls":[{"id":"c1","name":"ops.counter","input":{"label":"x"}}],"userId":"alice"}`, true},
	}
}

// TestSecurityProbe: a page of another site, a body that is not JSON, no
// body where one is needed, and trailing data are all refused before
// anything runs, on every state-changing route; nothing changes.
func TestSecurityProbe(t *testing.T) {
	e := newSecEnv(t, nil, nil)
	ctx := e.Ctx(60 * time.Second)
	id, err := e.Sessions.Create(ctx, "", api.Anonymous)
	if err != nil {
		t.Fatal(err)
	}
	before := len(e.Events(ctx, id))
	json := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	for _, rt := range stateRoutes(id) {
		shapes := []struct {
			name    string
			body    string
			headers map[string]string
			status  int
		}{
			// A cross-site page's simple requests: no preflight needed.
			{"foreign origin, text/plain", rt.body, with("Origin", "http://evil.example", "Content-Type", "text/plain"), 403},
			{"foreign origin, JSON", rt.body, with("Origin", "http://evil.example", "Content-Type", "application/json"), 403},
			{"cross-site fetch without Origin", rt.body, with("Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"), 403},
			{"null origin", rt.body, with("Origin", "null", "Content-Type", "text/plain"), 403},
			// Not JSON.
			{"text/plain", rt.body, with("Content-Type", "text/plain"), 415},
			{"text/plain; x=json", rt.body, with("Content-Type", "text/plain; x=json"), 415},
			{"no content type", rt.body, with(), 415},
			{"form", "message=hello", with("Content-Type", "application/x-www-form-urlencoded"), 415},
			// One JSON value only.
			{"trailing data", rt.body + " junk", json, 400},
			{"two objects", rt.body + rt.body, json, 400},
		}
		if rt.bodyRequired {
			shapes = append(shapes, struct {
				name    string
				body    string
				headers map[string]string
				status  int
			}{"no body", "", json, 400})
		}
		for _, sh := range shapes {
			r := e.raw(t, "POST", rt.path, sh.body, sh.headers)
			if r.Status != sh.status {
				t.Errorf("%s, %s: %d %s, want %d", rt.name, sh.name, r.Status, r.Body, sh.status)
			}
		}
	}
	// A create with a blank message is refused as eve refuses it (a send's
	// is too); a create without one is an empty session.
	for _, blank := range []string{`{"message":""}`, `{"message":"   "}`} {
		wantError(t, e.raw(t, "POST", "/eve/v1/session", blank, json), 400, api.CodeBadRequest, "non-empty when provided")
	}
	// Nothing ran: the counter tool never executed and the session
	// recorded nothing (a legitimate clear, afterwards, is its first
	// change).
	if n := e.count.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	if r := e.raw(t, "POST", "/eve/v1/session/"+id+"/clear", "", nil); r.Status != 202 {
		t.Fatalf("eve's client's clear (no body, no content type): %d %s", r.Status, r.Body)
	}
	evs := waitFor(t, e.Env, id, func(evs []protocol.Event) bool { return len(evs) > before })
	if got := evs[before:]; len(got) != 1 || got[0].Type != protocol.ContextCleared {
		t.Fatalf("events after the probe: %v", got)
	}
	// The same route from the server's own origin, and a listed one, work.
	if r := e.raw(t, "POST", "/v1/tools/ops.counter/execute", `{"input":{"label":"own"},"userId":"alice"}`, with("Origin", e.url, "Content-Type", "application/json")); r.Status != 200 {
		t.Fatalf("own origin: %d %s", r.Status, r.Body)
	}
}

// A keyed server with an allow-list refuses other origins before the key
// is even looked at; listed origins and non-browser callers pass.
func TestSecurityKeyedOriginAllowList(t *testing.T) {
	keys := map[string]*auth.Principal{"key-alice": {ID: "alice", Type: auth.TypeUser}}
	e := newSecEnv(t, keys, func(o *api.Options) { o.CORSOrigins = []string{"https://app.example"} })
	h := map[string]string{"Authorization": "Bearer key-alice", "Content-Type": "application/json"}
	for origin, want := range map[string]int{"https://evil.example": 403, "https://app.example": 202, "": 202} {
		hh := map[string]string{"Origin": origin}
		for k, v := range h {
			hh[k] = v
		}
		if origin == "" {
			delete(hh, "Origin")
		}
		if r := e.raw(t, "POST", "/eve/v1/session", `{"message":"hi"}`, hh); r.Status != want {
			t.Errorf("origin %q: %d %s, want %d", origin, r.Status, r.Body, want)
		}
	}
}

// stalledRequest opens a connection, sends headers that promise a body
// and part of it, and returns how the server answers while the rest never
// comes (status 0: the connection closed without an answer).
func stalledRequest(t *testing.T, base, path string, headers map[string]string, wait time.Duration) (status int, err error) {
	status, _, err = stalledResponse(t, base, path, headers, wait, false)
	return status, err
}

// stalledResponse is stalledRequest with the answer's status line, or
// (whole) its whole text, up to the connection's close.
func stalledResponse(t *testing.T, base, path string, headers map[string]string, wait time.Duration, whole bool) (status int, text string, err error) {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 4096\r\n", path, u.Host)
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n{\"output\":")
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return 0, "", err
	}
	var proto string
	fmt.Sscanf(line, "%s %d", &proto, &status)
	if !whole {
		return status, line, nil
	}
	rest, _ := io.ReadAll(rd)
	return status, line + string(rest), nil
}

// A body that never finishes: without credentials the 401 comes at once,
// for a forged completion capability too, and an authorized request whose
// body stalls is cut off with 408 after the read timeout.
func TestSecurityStalledBodies(t *testing.T) {
	keys := map[string]*auth.Principal{"key-alice": {ID: "alice", Type: auth.TypeUser}}
	e := newSecEnv(t, keys, func(o *api.Options) {
		o.BodyReadTimeout = 500 * time.Millisecond
		o.CORSOrigins = []string{"https://app.example"}
	})
	json := map[string]string{"Content-Type": "application/json"}
	// Before the fix none of these was ever answered: the server waited
	// for the unread body first. 30 s is far beyond the read timeout.
	const patience = 30 * time.Second
	for i := 0; i < 30; i++ {
		path := "/eve/v1/session"
		if i%2 == 1 {
			path = signals.ActionsPath + "forged.token"
		}
		st, err := stalledRequest(t, e.url, path, json, patience)
		if err != nil || st != 401 {
			t.Fatalf("%s with a stalled body and no valid credentials: %d %v, want 401 at once", path, st, err)
		}
	}
	// An authorized stalled body is cut off at the server's read timeout,
	// on the routes of the handlers it mounts too (the tools API, completion
	// URLs): their own default does not override it.
	authed := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer key-alice"}
	for _, path := range []string{"/eve/v1/session", "/v1/tools/ops.counter/execute"} {
		st, text, err := stalledResponse(t, e.url, path, authed, patience, true)
		if err != nil || st != 408 || !strings.Contains(text, "within 500ms") {
			t.Fatalf("%s, authorized, with a stalled body: %d %v %q, want 408 after the server's 500ms", path, st, err, text)
		}
	}
	// A foreign origin is refused at once too.
	foreign := map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Authorization": "Bearer key-alice"}
	if st, err := stalledRequest(t, e.url, "/eve/v1/session", foreign, patience); err != nil || st != 403 {
		t.Fatalf("foreign origin with a stalled body: %d %v, want 403", st, err)
	}
}

// aliceAndBob is a keyed server on which alice has a session that has
// finished its first turn; it returns the headers each of them sends.
func aliceAndBob(t *testing.T) (e *secEnv, alice, bob map[string]string, id string) {
	t.Helper()
	keys := map[string]*auth.Principal{"key-alice": {ID: "alice", Type: auth.TypeUser}, "key-bob": {ID: "bob", Type: auth.TypeUser}}
	e = newSecEnv(t, keys, nil)
	alice = map[string]string{"Authorization": "Bearer key-alice", "Content-Type": "application/json"}
	bob = map[string]string{"Authorization": "Bearer key-bob", "Content-Type": "application/json"}
	r := e.raw(t, "POST", "/eve/v1/session", `{"message":"hello"}`, alice)
	if r.Status != 202 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id = r.json(t)["sessionId"].(string)
	waitFor(t, e.Env, id, idle(1))
	return e, alice, bob, id
}

// Ids in URLs are checked before any Temporal call: malformed ones are
// 400, well-formed ids of other kinds (another user's turn workflow, an
// execution) 404 like an unknown session, for every caller and state.
func TestSecuritySessionIDs(t *testing.T) {
	e, alice, bob, id := aliceAndBob(t)
	ctx := e.Ctx(60 * time.Second)
	turn := url.PathEscape(signals.TurnWorkflowID(id, "turn_0"))
	exec, err := e.c.Tools.Execute(ctx, "ops.counter", toolsExecOpts("e"))
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []map[string]string{alice, bob} {
		for _, bad := range []string{"ses_%C3%A9t%C3%A9", "ses_a%00b", "ses_a%0Ab", "%FF", "ses_" + strings.Repeat("x", 200)} {
			for _, p := range []string{"/eve/v1/session/" + bad, "/eve/v1/session/" + bad + "/cancel"} {
				wantError(t, e.raw(t, "POST", p, `{"message":"x"}`, who), 400, api.CodeInvalidID, "session id")
			}
			wantError(t, e.raw(t, "GET", "/eve/v1/session/"+bad+"/stream", "", who), 400, api.CodeInvalidID, "")
		}
		// Execution routes of the tools API, the same way.
		for _, bad := range []string{"exec_%C3%A9", "exec_a%00b", "%FF"} {
			wantError(t, e.raw(t, "GET", "/v1/executions/"+bad, "", who), 400, "invalid_id", "execution id")
			wantError(t, e.raw(t, "POST", "/v1/executions/"+bad+"/cancel", "", who), 400, "invalid_id", "")
		}
		for _, other := range []string{id, turn} {
			if r := e.raw(t, "GET", "/v1/executions/"+other, "", who); r.Status != 404 {
				t.Fatalf("execution route with id %s: %d %s, want 404", other, r.Status, r.Body)
			}
		}
		for _, other := range []string{turn, exec.ID, "exe_unknown"} {
			wantError(t, e.raw(t, "POST", "/eve/v1/session/"+other, `{"message":"x"}`, who), 404, api.CodeSessionNotFound, "")
			wantError(t, e.raw(t, "GET", "/eve/v1/session/"+other+"/stream", "", who), 404, api.CodeSessionNotFound, "")
			wantError(t, e.raw(t, "POST", "/eve/v1/session/"+other+"/cancel", `{}`, who), 404, api.CodeSessionNotFound, "")
		}
	}
}

// A closed session's close reason (an operator's, which may carry customer
// data) and its recorded stream reach only those who may act on the
// session; another principal is refused as for any session of someone
// else, even on a server that has never seen the session (no owner
// remembered).
func TestSecurityClosedSessionReason(t *testing.T) {
	e, alice, bob, id := aliceAndBob(t)
	ctx := e.Ctx(60 * time.Second)
	const reason = "operator: refund dispute of customer 4711"
	if err := e.Client.TerminateWorkflow(ctx, id, "", reason); err != nil {
		t.Fatal(err)
	}
	// A second server, which has not cached the owner.
	fresh := newSecEnvOn(t, e, e.srvKeys)
	for _, p := range []string{"/eve/v1/session/" + id, "/eve/v1/session/" + id + "/stream"} {
		method := "POST"
		if strings.HasSuffix(p, "/stream") {
			method = "GET"
		}
		rb := fresh.raw(t, method, p, `{"message":"x"}`, bob)
		if rb.Status != 403 || strings.Contains(string(rb.Body), "4711") {
			t.Fatalf("bob on %s: %d %s, want 403 without the reason", p, rb.Status, rb.Body)
		}
		if method == "GET" {
			// What it recorded stays hers to read; followed from its end,
			// it answers 410 with the reason.
			ra := fresh.raw(t, method, p, "", alice)
			tail, err := strconv.Atoi(ra.Header.Get(api.HeaderTailIndex))
			if ra.Status != 200 || err != nil || tail < 0 || !strings.Contains(string(ra.Body), `"type":"session.started"`) {
				t.Fatalf("alice on %s: %d %s, want 200 with the recorded events", p, ra.Status, ra.Body)
			}
			p += "?startIndex=" + strconv.Itoa(tail+1)
		}
		ra := fresh.raw(t, method, p, `{"message":"x"}`, alice)
		if ra.Status != 410 || !strings.Contains(string(ra.Body), "4711") {
			t.Fatalf("alice on %s: %d %s, want 410 with the reason", p, ra.Status, ra.Body)
		}
	}
}

// newSecEnvOn is another API server on e's sessions and tools.
func newSecEnvOn(t *testing.T, e *secEnv, keys map[string]*auth.Principal) *secEnv {
	t.Helper()
	a := newAPIEnv(t, e.Env, func(o *api.Options) { o.Keys, o.Tools = keys, e.svc.Handler() })
	return &secEnv{tapiEnv: e.tapiEnv, url: a.URL, srv: a.Server, srvKeys: keys}
}

func toolsExecOpts(label string) toolsclient.ExecuteToolOptions {
	return toolsclient.ExecuteToolOptions{Input: map[string]string{"label": label}}
}

// A completion URL takes exactly one JSON value as application/json:
// trailing data, a second object or another content type complete
// nothing, and the action stays pending for the real completion.
func TestSecurityCompletionBody(t *testing.T) {
	e := newSecEnv(t, nil, nil)
	ctx := e.Ctx(60 * time.Second)
	if _, err := e.c.Tools.Execute(ctx, "ops.report", toolsclient.ExecuteToolOptions{Input: map[string]string{"spec": "q4"}, Mode: catalog.ModeAsync}); err != nil {
		t.Fatal(err)
	}
	var a tools.Action
	select {
	case a = <-e.jobs:
	case <-ctx.Done():
		t.Fatal("no job")
	}
	good := `{"output":{"status":"succeeded","detail":"ok"}}`
	for _, tc := range []struct {
		body, ct string
		status   int
	}{
		{good + " junk", "application/json", 400},
		{good + `{"output":{"status":"failed","detail":"second"}}`, "application/json", 400},
		{good, "text/plain", 415},
	} {
		req, _ := http.NewRequestWithContext(ctx, "POST", a.Completion.URL, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%q (%s): %d, want %d", tc.body, tc.ct, resp.StatusCode, tc.status)
		}
	}
	if st, body := post(t, a.Completion.URL, good); st != 200 {
		t.Fatalf("the real completion after the refused ones: %d %s", st, body)
	}
}
