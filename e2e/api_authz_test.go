package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/toolsclient"
)

// sessionRoute is one request to a session route.
type sessionRoute struct {
	name, method, path string
	body               any
}

// everySessionRoute lists every route of session id; reqID is an open
// input request to answer.
func everySessionRoute(id, reqID string) []sessionRoute {
	p := "/eve/v1/session/" + id
	return []sessionRoute{
		{"send", "POST", p, map[string]any{"message": "hello"}},
		{"send that would answer the prompt", "POST", p, map[string]any{"message": "approve"}},
		{"respond", "POST", p, map[string]any{"inputResponses": []map[string]any{{"requestId": reqID, "optionId": "approve"}}}},
		{"stream", "GET", p + "/stream?follow=false", nil},
		{"stream from the tail", "GET", p + "/stream?startIndex=-1&follow=false&includeTailIndex=1", nil},
		{"stream (following)", "GET", p + "/stream?streamControlVersion=1", nil},
		{"export stubs", "GET", p + "/export-stubs", nil},
		{"tasks", "GET", p + "/tasks", nil},
		{"cancel a task", "POST", p + "/tasks/deploy-zzzzzz/cancel", map[string]any{}},
		{"cancel", "POST", p + "/cancel", map[string]any{}},
		{"clear", "POST", p + "/clear", nil},
		{"compact", "POST", p + "/compact", nil},
		{"reset", "POST", p + "/reset", map[string]any{"reason": "mine now"}},
		{"named mount", "POST", "/eve/support/v1/session/" + id, map[string]any{"message": "hello"}},
	}
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// log reads the session's event ids straight from Temporal (not the API).
func (e *apiEnv) log(t *testing.T, id string) []string {
	t.Helper()
	evs, err := e.Sessions.Events(e.Ctx(30*time.Second), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ids(evs)
}

// Two principals, every session route: the owner is allowed; another user
// is refused with 403 forbidden before anything reaches the workflow, so
// the event log does not change and the parked request stays open. The
// check holds whether the server remembers the owner or reads it.
func TestAPIAuthzEverySessionRoute(t *testing.T) {
	e := keyedAPI(t, nil)
	ctx := e.Ctx(90 * time.Second)
	alice := e.as("key-alice")
	turn := parkOver(t, ctx, alice, "", "refund ch_42 for 25")
	id, reqID := turn.SessionID, turn.Open[0].RequestID
	before := e.log(t, id)

	fresh := newAPIEnv(t, e.Env, func(o *api.Options) { o.Keys = apiTestKeys }) // nothing remembered
	for _, srv := range []*apiEnv{fresh, e} {
		for _, rt := range everySessionRoute(id, reqID) {
			r := srv.do(t, rt.method, rt.path, rt.body, bearer("key-bob"))
			if r.Status != http.StatusForbidden {
				t.Fatalf("bob %s: %d %s, want 403", rt.name, r.Status, r.Body)
			}
			wantError(t, r, 403, api.CodeForbidden, `principal "bob" may not`)
		}
	}
	if after := e.log(t, id); !slices.Equal(before, after) {
		t.Fatalf("refused requests changed the log: %d events before, %d after", len(before), len(after))
	}
	if p, err := alice.Pending(ctx, id); err != nil || len(p) != 1 || p[0].RequestID != reqID {
		t.Fatalf("pending after bob's attempts = %+v, %v", p, err)
	}
	// An unknown session stays 404 for anyone.
	wantError(t, e.do(t, "POST", "/eve/v1/session/ses_nope", map[string]any{"message": "x"}, bearer("key-bob")), 404, api.CodeSessionNotFound, "")

	// The owner may use every route.
	if _, rest, err := alice.RespondAndWait(ctx, id, []protocol.InputResponse{{RequestID: reqID, OptionID: "approve"}}, nil); err != nil || rest.Status != client.TurnCompleted {
		t.Fatalf("alice's approval: %+v %v", rest, err)
	}
	for _, rt := range everySessionRoute(id, reqID) {
		switch rt.name {
		case "respond", "send that would answer the prompt", "stream (following)":
			continue // answered above; a following stream never ends by itself
		}
		r := fresh.do(t, rt.method, rt.path, rt.body, bearer("key-alice"))
		if rt.name == "cancel a task" {
			wantError(t, r, 404, api.CodeTaskNotFound, "") // allowed: the session has no such task
			continue
		}
		if r.Status != 200 && r.Status != 202 {
			t.Fatalf("alice %s: %d %s", rt.name, r.Status, r.Body)
		}
	}
}

// The app's hook lets a second principal in: it sees the action, the owner
// and the caller (and a send's message); it is asked only for callers who
// are not the owner.
func TestAPIAuthzHook(t *testing.T) {
	var mu sync.Mutex
	var seen []api.SessionAccess
	e := keyedAPI(t, func(o *api.Options) {
		o.AuthorizeSession = func(_ context.Context, a api.SessionAccess) bool {
			mu.Lock()
			seen = append(seen, a)
			mu.Unlock()
			return a.Caller.Attr("role") == "manager" && a.Action != api.ActionReset
		}
	})
	ctx := e.Ctx(60 * time.Second)
	first, err := e.as("key-alice").SendAndWait(ctx, "", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := first.SessionID
	manager := e.as("key-manager")
	turn, err := manager.SendAndWait(ctx, id, "what's the weather in Paris", nil)
	if err != nil || turn.Status != client.TurnCompleted {
		t.Fatalf("manager's turn: %+v %v", turn, err)
	}
	if _, err := manager.Clear(ctx, id); err != nil {
		t.Fatalf("manager's clear: %v", err)
	}
	if _, err := manager.Reset(ctx, id, ""); !client.IsStatus(err, 403) {
		t.Fatalf("manager's reset (the hook refuses it): %v", err)
	}
	if _, err := e.as("key-bob").Send(ctx, id, "hi"); !client.IsStatus(err, 403) {
		t.Fatalf("bob: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	actions := map[string]bool{}
	for _, a := range seen {
		if a.Owner == nil || a.Owner.ID != "alice" || a.SessionID != id || a.Caller.ID == "alice" {
			t.Fatalf("hook saw %+v", a)
		}
		if a.Action == api.ActionSend && a.Caller.ID == "manager" && a.Message != "what's the weather in Paris" {
			t.Fatalf("send access without its message: %+v", a)
		}
		actions[a.Caller.ID+":"+a.Action] = true
	}
	for _, want := range []string{"manager:send", "manager:stream", "manager:clear", "manager:reset", "bob:send"} {
		if !actions[want] {
			t.Fatalf("the hook was not asked for %s: %v", want, actions)
		}
	}
}

// A service principal acts for a user only when its key grants it
// (canActFor); an ungranted service is refused like any other caller.
func TestAPIAuthzServicePrincipal(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/keys.yaml", `
keys:
  sk_alice_0123456789: {principalId: alice}
  sk_billing_0123456789: {principalId: billing, principalType: service, canActFor: [alice]}
  sk_ops_0123456789: {principalId: ops, principalType: service}
  sk_root_0123456789: {principalId: root, principalType: service, canActFor: ["*"]}
`)
	keys, err := api.LoadKeys("sk_env_0123456789", dir+"/keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := demoAPI(t, func(o *api.Options) { o.Keys = keys })
	ctx := e.Ctx(60 * time.Second)
	turn, err := e.as("sk_alice_0123456789").SendAndWait(ctx, "", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := turn.SessionID
	for _, key := range []string{"sk_billing_0123456789", "sk_root_0123456789"} {
		if tr, err := e.as(key).SendAndWait(ctx, id, "hi", nil); err != nil || tr.Status != client.TurnCompleted {
			t.Fatalf("%s (granted): %+v %v", key, tr, err)
		}
	}
	before := e.log(t, id)
	for _, key := range []string{"sk_ops_0123456789", "sk_env_0123456789"} {
		if _, err := e.as(key).Send(ctx, id, "hi"); !client.IsStatus(err, 403) {
			t.Fatalf("%s (no grant): %v, want 403", key, err)
		}
		if _, _, err := e.as(key).Events(ctx, id, 0); !client.IsStatus(err, 403) {
			t.Fatalf("%s (no grant) stream: %v, want 403", key, err)
		}
	}
	if after := e.log(t, id); !slices.Equal(before, after) {
		t.Fatal("refused sends changed the log")
	}
	// A service's own session is its own; a user cannot act for a service.
	sv, err := e.as("sk_ops_0123456789").Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"sk_alice_0123456789", "sk_billing_0123456789"} {
		if _, err := e.as(key).Clear(ctx, sv); !client.IsStatus(err, 403) {
			t.Fatalf("%s on ops's session: %v, want 403", key, err)
		}
	}
	if _, err := e.as("sk_ops_0123456789").Clear(ctx, sv); err != nil {
		t.Fatal(err)
	}
}

// An unknown principalType, or a grant on a user, is a load error.
func TestAPIKeysFileTypes(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{
		"keys: {sk_x_0123456789: {principalId: a, principalType: admin}}",
		"keys: {sk_x_0123456789: {principalId: a, principalType: Service}}",
		"keys: {sk_x_0123456789: {principalId: a, canActFor: [b]}}",
	} {
		writeFile(t, dir+"/k.yaml", bad)
		if _, err := api.LoadKeys("", dir+"/k.yaml"); err == nil {
			t.Fatalf("%s: want a load error", bad)
		} else if strings.Contains(err.Error(), "sk_x_0123456789") {
			t.Fatalf("the key leaked into the error: %v", err)
		}
	}
}

// Tools API executions stay scoped to their user behind the API server:
// another user's execution is 404, a service reaches it only with a grant.
func TestAPIAuthzToolsExecutionsScoped(t *testing.T) {
	te := newTapiEnv(t, func(o *toolsapi.Options) { o.Caller = api.Caller })
	keys := map[string]*auth.Principal{
		"key-alice":   {ID: "alice", Type: auth.TypeUser},
		"key-bob":     {ID: "bob", Type: auth.TypeUser},
		"key-billing": {ID: "billing", Type: auth.TypeService, CanActFor: []string{"alice"}},
		"key-ops":     {ID: "ops", Type: auth.TypeService},
	}
	srv, err := api.New(api.Options{Sessions: te.Sessions, Keys: keys, Tools: te.svc.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := te.Ctx(60 * time.Second)
	exec, err := toolsclient.New(hs.URL, "key-alice").Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{Input: map[string]string{"label": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := toolsclient.New(hs.URL, "key-alice").Executions.Get(ctx, exec.ID); err != nil {
		t.Fatalf("alice's own execution: %v", err)
	}
	for _, key := range []string{"key-bob", "key-ops"} {
		_, err := toolsclient.New(hs.URL, key).Executions.Get(ctx, exec.ID)
		var ae *toolsclient.APIError
		if !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("%s fetching alice's execution: %v, want 404", key, err)
		}
	}
	if _, err := toolsclient.New(hs.URL, "key-billing", toolsclient.WithUserID("alice")).Executions.Get(ctx, exec.ID); err != nil {
		t.Fatalf("billing (granted alice): %v", err)
	}
	// Executing in another user's name needs the grant too.
	_, err = toolsclient.New(hs.URL, "key-ops").Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{UserID: "alice", Input: map[string]string{"label": "b"}})
	var ae *toolsclient.APIError
	if !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("ops executing as alice: %v, want 403", err)
	}
	if _, err := toolsclient.New(hs.URL, "key-billing").Tools.Execute(ctx, "ops.counter", toolsclient.ExecuteToolOptions{UserID: "alice", Input: map[string]string{"label": "c"}}); err != nil {
		t.Fatalf("billing executing as alice: %v", err)
	}
}

// Tools API executions are scoped by the whole principal, id and type, as
// the session routes are: a service named bob neither reads, cancels nor
// joins (by idempotency key, or by tool call id) the executions of the
// user bob, and the other way round.
func TestAPIAuthzToolsPrincipalTypes(t *testing.T) {
	te := newTapiEnv(t, func(o *toolsapi.Options) { o.Caller = api.Caller })
	srv, err := api.New(api.Options{Sessions: te.Sessions, Tools: te.svc.Handler(), Keys: map[string]*auth.Principal{
		"key-user-bob":    {ID: "bob", Type: auth.TypeUser},
		"key-service-bob": {ID: "bob", Type: auth.TypeService},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := te.Ctx(60 * time.Second)
	userBob, serviceBob := toolsclient.New(hs.URL, "key-user-bob"), toolsclient.New(hs.URL, "key-service-bob")
	output := func(ex catalog.ExecutionResult) map[string]any {
		t.Helper()
		var out map[string]any
		if err := json.Unmarshal(ex.Output, &out); err != nil {
			t.Fatalf("output %s: %v", ex.Output, err)
		}
		return out
	}
	opts := toolsclient.ExecuteToolOptions{Input: map[string]string{"label": "same"}, IdempotencyKey: "shared-key"}
	mine, err := userBob.Tools.Execute(ctx, "ops.counter", opts)
	if err != nil {
		t.Fatal(err)
	}
	if out := output(mine); out["user"] != "bob" || out["type"] != auth.TypeUser {
		t.Fatalf("user bob's execution ran as %v", out)
	}
	var ae *toolsclient.APIError
	if _, err := serviceBob.Executions.Get(ctx, mine.ID); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("service bob reading user bob's execution: %v, want 404", err)
	}
	if _, err := serviceBob.Executions.Cancel(ctx, mine.ID); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("service bob cancelling user bob's execution: %v, want 404", err)
	}
	// The same tool, key and input from the service is its own execution:
	// the tool runs again, as the service.
	n := te.count.Load()
	theirs, err := serviceBob.Tools.Execute(ctx, "ops.counter", opts)
	if err != nil {
		t.Fatal(err)
	}
	if theirs.ID == mine.ID || te.count.Load() != n+1 {
		t.Fatalf("service bob joined user bob's execution %s (got %s, %d new side effects)", mine.ID, theirs.ID, te.count.Load()-n)
	}
	if out := output(theirs); out["user"] != "bob" || out["type"] != auth.TypeService {
		t.Fatalf("service bob's execution ran as %v", out)
	}
	if _, err := userBob.Executions.Get(ctx, theirs.ID); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("user bob reading service bob's execution: %v, want 404", err)
	}
	if _, err := userBob.Executions.Get(ctx, mine.ID); err != nil {
		t.Fatalf("user bob reading its own execution: %v", err)
	}
	if _, err := serviceBob.Executions.Get(ctx, theirs.ID); err != nil {
		t.Fatalf("service bob reading its own execution: %v", err)
	}
	// executeToolCalls keys each call by its id: the same call from the
	// other principal runs again too.
	bundle, err := userBob.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	calls := []catalog.AnthropicToolCall{{Type: "tool_use", ID: "toolu_shared", Name: bundle.NameMap.CanonicalToWire["ops.counter"], Input: json.RawMessage(`{"label":"call"}`)}}
	for _, who := range []struct {
		c    *toolsclient.Client
		typ  string
		runs int64
	}{{userBob, auth.TypeUser, 1}, {serviceBob, auth.TypeService, 1}, {userBob, auth.TypeUser, 0}} {
		n := te.count.Load()
		blocks, err := toolsclient.ExecuteAnthropicToolCalls(ctx, who.c, calls, toolsclient.ExecuteToolCallsOptions{NameMap: bundle.NameMap})
		if err != nil || len(blocks) != 1 || blocks[0].IsError {
			t.Fatalf("%s bob's tool call: %+v %v", who.typ, blocks, err)
		}
		if !strings.Contains(blocks[0].Content, `"type":"`+who.typ+`"`) || te.count.Load() != n+who.runs {
			t.Fatalf("%s bob's tool call: %s, %d new side effects, want %d", who.typ, blocks[0].Content, te.count.Load()-n, who.runs)
		}
	}
}

// Open mode: only loopback Host headers (no DNS rebinding), no wildcard CORS.
func TestAPIOpenModeLoopbackOnly(t *testing.T) {
	e := demoAPI(t, nil)
	for _, host := range []string{"attacker.example", "attacker.example:4111", "192.168.1.10:4111"} {
		for _, path := range []string{"/eve/v1/health", "/eve/v1/session"} {
			r := e.do(t, "POST", path, map[string]any{"message": "hi"}, map[string]string{"Host": host})
			if path == "/eve/v1/health" {
				r = e.do(t, "GET", path, nil, map[string]string{"Host": host})
			}
			wantError(t, r, 403, api.CodeForbiddenHost, "EVE_API_KEY")
		}
	}
	for _, host := range []string{"localhost:4111", "127.0.0.1", "[::1]:80"} {
		if r := e.do(t, "GET", "/eve/v1/health", nil, map[string]string{"Host": host}); r.Status != 200 {
			t.Fatalf("Host %s: %d %s", host, r.Status, r.Body)
		}
	}
	// A page of another site is refused before anything runs (CSRF), and
	// gets no CORS grant.
	r := e.do(t, "GET", "/eve/v1/health", nil, map[string]string{"Origin": "https://attacker.example"})
	if r.Status != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("open server, foreign origin: %d ACAO %q", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
	wantError(t, r, 403, api.CodeForbiddenOrigin, "EVE_CORS_ORIGINS")
	// New refuses an open server on 0.0.0.0 unless told to accept it.
	if _, err := api.New(api.Options{Sessions: e.Sessions, ServerOptions: api.ServerOptions{Addr: "0.0.0.0:4111"}}); err == nil || !strings.Contains(err.Error(), "--insecure-open") {
		t.Fatalf("open on 0.0.0.0: %v", err)
	}
	if _, err := api.New(api.Options{Sessions: e.Sessions, ServerOptions: api.ServerOptions{Addr: "0.0.0.0:4111", InsecureOpen: true}}); err != nil {
		t.Fatal(err)
	}
}

// The same Idempotency-Key twice is one turn: the retry answers the first
// acknowledgement (same delivery and turn) and records nothing. A create
// with a key is one session.
func TestAPIIdempotentSend(t *testing.T) {
	e := keyedAPI(t, nil)
	ctx := e.Ctx(60 * time.Second)
	alice := e.as("key-alice")
	a1, err := alice.CreateAndSendOnce(ctx, "hi", "create-1")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := alice.CreateAndSendOnce(ctx, "hi", "create-1")
	if err != nil || a2.SessionID != a1.SessionID || a2.DeliveryID != a1.DeliveryID || a2.TurnID != a1.TurnID {
		t.Fatalf("create retried: %+v vs %+v (%v)", a2, a1, err)
	}
	id := a1.SessionID
	if _, err := alice.WaitTurn(ctx, id, a1.DeliveryID, 0, nil); err != nil {
		t.Fatal(err)
	}
	s1, err := alice.SendOnce(ctx, id, "what's the weather in Paris", "msg-1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := alice.SendOnce(ctx, id, "what's the weather in Paris", "msg-1")
	if err != nil || s2.DeliveryID != s1.DeliveryID || s2.TurnID != s1.TurnID {
		t.Fatalf("send retried: %+v vs %+v (%v)", s2, s1, err)
	}
	if _, err := alice.WaitTurn(ctx, id, s1.DeliveryID, 0, nil); err != nil {
		t.Fatal(err)
	}
	// After the turn ended, a late retry still changes nothing.
	if s3, err := alice.SendOnce(ctx, id, "what's the weather in Paris", "msg-1"); err != nil || s3.TurnID != s1.TurnID {
		t.Fatalf("late retry: %+v %v", s3, err)
	}
	// Another key is another turn; bob's key names bob's send (refused here).
	s4, err := alice.SendOnce(ctx, id, "what's the weather in Paris", "msg-2")
	if err != nil || s4.TurnID == s1.TurnID {
		t.Fatalf("another key: %+v %v", s4, err)
	}
	if _, err := alice.WaitTurn(ctx, id, s4.DeliveryID, 0, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := e.Sessions.Events(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evetest.Of(evs, protocol.MessageReceived)); n != 3 {
		t.Fatalf("message.received %d times, want 3 (create, msg-1, msg-2): %s", n, evetest.Join(evs))
	}
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != 3 {
		t.Fatalf("turns completed %d, want 3", n)
	}
	// A key too long is a 400 and records nothing.
	wantError(t, e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"message": "x"}, map[string]string{"Authorization": "Bearer key-alice", "Idempotency-Key": strings.Repeat("k", 300)}), 400, api.CodeBadRequest, "Idempotency-Key")
}

// Streams: a cap per principal (429 with Retry-After, named in the error),
// freed when a stream ends; a negative startIndex reads at most the last
// MaxTailEvents events.
func TestAPIStreamCapAndTailBound(t *testing.T) {
	e := keyedAPI(t, func(o *api.Options) { o.MaxStreamsPerPrincipal = 2; o.MaxTailEvents = 3 })
	ctx := e.Ctx(60 * time.Second)
	turn, err := e.C.SendAndWait(ctx, "", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := turn.SessionID
	open := func(key string) (*http.Response, func()) {
		sctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(sctx, "GET", e.URL+"/eve/v1/session/"+id+"/stream", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, func() { cancel(); resp.Body.Close() }
	}
	r1, close1 := open("key-alice")
	r2, close2 := open("key-alice")
	defer close2()
	if r1.StatusCode != 200 || r2.StatusCode != 200 {
		t.Fatalf("first streams: %d %d", r1.StatusCode, r2.StatusCode)
	}
	r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false", nil, bearer("key-alice"))
	wantError(t, r, 429, api.CodeTooManyStreams, "2 streams open")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra <= 0 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(r.Body), "EVE_MAX_STREAMS_PER_PRINCIPAL") {
		t.Fatalf("the error should name the setting: %s", r.Body)
	}
	// Another principal has its own streams (and is refused by ownership, not the cap).
	if r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false", nil, bearer("key-bob")); r.Status != 403 {
		t.Fatalf("bob: %d", r.Status)
	}
	close1()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false", nil, bearer("key-alice"))
		if r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed stream's slot was not freed: %d %s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Negative startIndex: at most the last 3 events.
	all, _, err := e.C.Events(ctx, id, 0)
	if err != nil || len(all) < 6 {
		t.Fatalf("events: %d %v", len(all), err)
	}
	close2()
	for _, start := range []string{"-2", "-3", "-100"} {
		var st, tail int
		var evs []protocol.Event
		// close2's slot frees asynchronously: wait for it, within a bound.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st, tail, evs = e.readStreamAs(t, id, "startIndex="+start, "key-alice")
			if st != 429 || time.Now().After(deadline) {
				break
			}
		}
		want, _ := strconv.Atoi(start)
		want = min(-want, 3)
		if st != 200 || tail != len(all)-1 || len(evs) != want || evs[len(evs)-1].Meta.ID != all[len(all)-1].Meta.ID {
			t.Fatalf("startIndex=%s: %d tail %d, %d events (want %d)", start, st, tail, len(evs), want)
		}
	}
}

// readStreamAs is readStream with a bearer key.
func (e *apiEnv) readStreamAs(t *testing.T, id, query, key string) (int, int, []protocol.Event) {
	t.Helper()
	r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false&"+query, nil, bearer(key))
	if r.Status != http.StatusOK {
		return r.Status, 0, nil
	}
	tail, err := strconv.Atoi(r.Header.Get(api.HeaderTailIndex))
	if err != nil {
		t.Fatalf("tail header %q", r.Header.Get(api.HeaderTailIndex))
	}
	return r.Status, tail, parseNDJSON(t, r.Body)
}
