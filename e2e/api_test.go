package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// apiEnv is an eve API server in front of a test's sessions service.
type apiEnv struct {
	*evetest.Env
	URL    string
	Server *api.Server
	HTTP   *httptest.Server
	C      *client.Client
}

// newAPIEnv serves env's sessions over HTTP until the test ends. mut
// adjusts the server's options (nil: defaults, open server).
func newAPIEnv(t testing.TB, env *evetest.Env, mut func(*api.Options)) *apiEnv {
	t.Helper()
	opts := api.Options{Sessions: env.Sessions, ServerOptions: api.ServerOptions{PollInterval: 5 * time.Millisecond}, Bus: env.Bus}
	if mut != nil {
		mut(&opts)
	}
	srv, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	})
	return &apiEnv{Env: env, URL: hs.URL, Server: srv, HTTP: hs, C: client.New(hs.URL)}
}

// demoAPI is the demo agent's worker behind an open API server.
func demoAPI(t *testing.T, mut func(*api.Options)) *apiEnv {
	t.Helper()
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	return newAPIEnv(t, env, mut)
}

// rawResponse is an HTTP answer read in full.
type rawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r rawResponse) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return m
}

// do sends one request. body is JSON-encoded unless it is a string or
// []byte (sent as is); contentType "" sends no content type.
func (e *apiEnv) do(t *testing.T, method, path string, body any, headers map[string]string) rawResponse {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(e.Ctx(30*time.Second), method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		switch {
		case strings.EqualFold(k, "Host"):
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// wantError checks an error answer: status, {ok:false, error, code}.
func wantError(t *testing.T, r rawResponse, status int, code, msgPart string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	var b protocol.ErrorBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.OK || b.Error == "" {
		t.Fatalf("error body %s: want {ok:false,error,code}", r.Body)
	}
	if code != "" && b.Code != code {
		t.Fatalf("code %q, want %q; body %s", b.Code, code, r.Body)
	}
	if msgPart != "" && !strings.Contains(b.Error, msgPart) {
		t.Fatalf("error %q should mention %q", b.Error, msgPart)
	}
}

// snapshot reads a session's whole stream (follow=false) over HTTP.
func (e *apiEnv) snapshot(t *testing.T, id string) []protocol.Event {
	t.Helper()
	evs, _, err := e.C.Events(e.Ctx(30*time.Second), id, 0)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

func ids(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Meta.ID
	}
	return out
}

// A plain text turn: 202 with a delivery id; every event of the turn
// carries it, the session's own events carry none.
func TestAPIPlainTextTurn(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(30 * time.Second)

	r := e.do(t, "POST", "/eve/v1/session", map[string]any{"message": "hello"}, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var acc client.Accepted
	json.Unmarshal(r.Body, &acc)
	if !acc.OK || acc.Status != "accepted" || !strings.HasPrefix(acc.SessionID, "ses_") || !strings.HasPrefix(acc.DeliveryID, "dlv_") ||
		r.Header.Get("x-eve-session-id") != acc.SessionID || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create answer %s headers %v", r.Body, r.Header)
	}
	turn, err := e.C.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != client.TurnCompleted || !strings.Contains(turn.Reply, "eve demo agent") {
		t.Fatalf("turn = %+v", turn)
	}
	evs := e.snapshot(t, acc.SessionID)
	want := "session.started turn.started message.received step.started message.appended message.completed step.completed turn.completed session.waiting"
	if evetest.Join(evs) != want {
		t.Fatalf("events %s\nwant %s", evetest.Join(evs), want)
	}
	for i, ev := range evs {
		turnEvent := ev.Type != protocol.SessionStarted && ev.Type != protocol.SessionWaiting
		if turnEvent != slices.Contains(ev.Meta.DeliveryIDs, acc.DeliveryID) {
			t.Fatalf("event %d %s deliveryIds %v (delivery %s)", i, ev.Type, ev.Meta.DeliveryIDs, acc.DeliveryID)
		}
	}

	// A second message to the same session through POST /session/:id.
	tail, _ := e.C.Tail(ctx, acc.SessionID)
	if tail != len(evs)-1 {
		t.Fatalf("tail %d, want %d", tail, len(evs)-1)
	}
	r = e.do(t, "POST", "/eve/v1/session/"+acc.SessionID, map[string]any{"message": "hello again"}, nil)
	var acc2 client.Accepted
	json.Unmarshal(r.Body, &acc2)
	if r.Status != http.StatusAccepted || acc2.SessionID != acc.SessionID || acc2.DeliveryID == "" || acc2.DeliveryID == acc.DeliveryID {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	turn2, err := e.C.WaitTurn(ctx, acc.SessionID, acc2.DeliveryID, tail+1, nil)
	if err != nil || turn2.Status != client.TurnCompleted || turn2.Events[0].Type != protocol.TurnStarted {
		t.Fatalf("turn 2 = %+v, %v", turn2, err)
	}
	for _, ev := range turn2.Events[:len(turn2.Events)-1] {
		if !slices.Equal(ev.Meta.DeliveryIDs, []string{acc2.DeliveryID}) {
			t.Fatalf("%s deliveryIds %v, want [%s]", ev.Type, ev.Meta.DeliveryIDs, acc2.DeliveryID)
		}
	}

	// A session created without a message, then sent to.
	r = e.do(t, "POST", "/eve/v1/session", nil, nil)
	var acc3 client.Accepted
	json.Unmarshal(r.Body, &acc3)
	if r.Status != http.StatusAccepted || acc3.SessionID == "" || acc3.DeliveryID != "" {
		t.Fatalf("bodyless create: %d %s", r.Status, r.Body)
	}
	t3, err := e.C.SendAndWait(ctx, acc3.SessionID, "hi", nil)
	if err != nil || t3.Status != client.TurnCompleted {
		t.Fatalf("turn after bodyless create: %+v %v", t3, err)
	}
	// Health and info.
	if h, err := e.C.Health(ctx); err != nil || !h.OK || h.Status != "ready" || h.WorkflowID == "" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	if info, err := e.C.Info(ctx); err != nil || !bytes.Contains(info, []byte(`"version":5`)) {
		t.Fatalf("info = %s, %v", info, err)
	}
}

// A tool call with its result, through the Go client.
func TestAPIToolCallWithResult(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(30 * time.Second)
	var seen []string
	turn, err := e.C.SendAndWait(ctx, "", "what's the weather in Paris", func(_ int, ev protocol.Event) { seen = append(seen, ev.Type) })
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != client.TurnCompleted || !strings.Contains(turn.Reply, "in Paris") {
		t.Fatalf("turn = %+v", turn)
	}
	want := "turn.started message.received step.started actions.requested action.result step.completed step.started message.appended message.completed step.completed turn.completed session.waiting"
	if got := strings.Join(seen, " "); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	var req protocol.ActionsRequestedData
	var res protocol.ActionResultData
	evetest.Of(turn.Events, protocol.ActionsRequested)[0].Decode(&req)
	evetest.Of(turn.Events, protocol.ActionResult)[0].Decode(&res)
	if len(req.Actions) != 1 || req.Actions[0].ToolName != "get_weather" || string(req.Actions[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("actions.requested = %+v", req)
	}
	if res.Status != protocol.StatusCompleted || res.Result.CallID != req.Actions[0].CallID || !strings.Contains(string(res.Result.Output), `"city":"Paris"`) {
		t.Fatalf("action.result = %+v %s", res, res.Result.Output)
	}
	// The named mount serves the same routes (useEveAgent({agent})).
	named := client.New(e.URL + "/eve/demo")
	evs, tail, err := named.Events(ctx, turn.SessionID, 0)
	if err != nil || len(evs) != tail+1 || evs[0].Type != protocol.SessionStarted {
		t.Fatalf("named mount: %d events, tail %d, %v", len(evs), tail, err)
	}
}

// Reading the stream again yields the same events with the same ids, from
// any start index; the tail index header matches.
func TestAPIStreamReplayIdenticalIDs(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(30 * time.Second)
	first, err := e.C.SendAndWait(ctx, "", "what's the weather in Oslo", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := first.SessionID
	if _, err := e.C.SendAndWait(ctx, id, "compare Paris and Rome", nil); err != nil {
		t.Fatal(err)
	}
	a := e.snapshot(t, id)
	b := e.snapshot(t, id)
	direct := e.Events(ctx, id)
	if !slices.Equal(ids(a), ids(b)) || !slices.Equal(ids(a), ids(direct)) || len(a) < 20 {
		t.Fatalf("replay changed ids:\n%v\n%v\n%v", ids(a), ids(b), ids(direct))
	}
	seen := map[string]bool{}
	for _, ev := range a {
		if seen[ev.Meta.ID] {
			t.Fatalf("duplicate id %s", ev.Meta.ID)
		}
		seen[ev.Meta.ID] = true
	}
	// startIndex in the middle, negative from the tail, past the tail.
	for _, c := range []struct {
		start int
		want  []protocol.Event
	}{{5, a[5:]}, {-3, a[len(a)-3:]}, {len(a), nil}, {len(a) + 7, nil}, {-1000, a}} {
		r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false&includeTailIndex=1&startIndex="+itoa(c.start), nil, nil)
		if r.Status != 200 || r.Header.Get("x-eve-stream-version") != "26" || r.Header.Get("x-eve-stream-tail-index") != itoa(len(a)-1) ||
			!strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-ndjson") || r.Header.Get("x-eve-session-id") != id {
			t.Fatalf("startIndex %d: %d headers %v", c.start, r.Status, r.Header)
		}
		got := parseNDJSON(t, r.Body)
		if !slices.Equal(ids(got), ids(c.want)) {
			t.Fatalf("startIndex %d: %d events, want %d", c.start, len(got), len(c.want))
		}
		if !bytes.HasPrefix(r.Body, []byte("\n")) {
			t.Fatalf("startIndex %d: the body should start with a newline", c.start)
		}
	}
	// Raw bytes are identical too (the client de-duplicates by meta.id,
	// and a replay must not change anything else either).
	r1 := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false", nil, nil)
	r2 := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false", nil, nil)
	if !bytes.Equal(r1.Body, r2.Body) {
		t.Fatal("two replays differ byte for byte")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func parseNDJSON(t *testing.T, body []byte) []protocol.Event {
	t.Helper()
	var out []protocol.Event
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev protocol.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if ev.Type == "" {
			continue // a control line
		}
		out = append(out, ev)
	}
	return out
}

// blockingAgent's tool blocks (heartbeating) until cancelled, so a turn
// stays running; started receives a value when it starts.
func blockingAgent(t *testing.T, started chan<- struct{}) *agent.Agent {
	block := &tools.Tool{
		Name: "block", Description: "Blocks until cancelled.",
		InputSchema:      json.RawMessage(`{"type":"object"}`),
		HeartbeatTimeout: 2 * time.Second,
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			for {
				ctx.Heartbeat()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	return evetest.Agent(t, `
rules:
  - match: block
    steps:
      - calls: [{tool: block}]
      - reply: "unblocked"
`, block)
}

// Cancel of a running turn: 202 accepted, the stream shows turn.cancelled
// then session.waiting; a second cancel finds no active turn.
func TestAPICancelRunningTurn(t *testing.T) {
	env := evetest.New(t)
	started := make(chan struct{}, 1)
	env.StartWorker(blockingAgent(t, started))
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(60 * time.Second)
	acc, err := e.C.CreateAndSend(ctx, "block")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the tool never started")
	}
	r := e.do(t, "POST", "/eve/v1/session/"+acc.SessionID+"/cancel", map[string]any{"turnId": "turn_7"}, nil)
	if r.Status != 200 || string(bytes.TrimSpace(r.Body)) != `{"ok":true,"status":"no_active_turn"}` {
		t.Fatalf("cancel of another turn: %d %s", r.Status, r.Body)
	}
	r = e.do(t, "POST", "/eve/v1/session/"+acc.SessionID+"/cancel", map[string]any{}, nil)
	if r.Status != http.StatusAccepted || string(bytes.TrimSpace(r.Body)) != `{"ok":true,"sessionId":"`+acc.SessionID+`","status":"accepted"}` {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	turn, err := e.C.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != client.TurnCancelled || evetest.Of(turn.Events, protocol.TurnCancelled) == nil {
		t.Fatalf("turn = %s %s", turn.Status, evetest.Join(turn.Events))
	}
	res, err := e.C.Cancel(ctx, acc.SessionID, "")
	if err != nil || res.Status != "no_active_turn" {
		t.Fatalf("second cancel: %+v %v", res, err)
	}
	// The session takes the next message.
	if _, err := e.C.Send(ctx, acc.SessionID, "hello"); err != nil {
		t.Fatal(err)
	}
}

// Clear, compact and reset answer eve's shapes.
func TestAPIClearCompactReset(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(30 * time.Second)
	turn, err := e.C.SendAndWait(ctx, "", "what's the weather in Paris", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := turn.SessionID
	for _, op := range []string{"clear", "compact"} {
		r := e.do(t, "POST", "/eve/v1/session/"+id+"/"+op, nil, map[string]string{"Content-Type": "application/json"})
		if r.Status != http.StatusAccepted || string(bytes.TrimSpace(r.Body)) != `{"ok":true,"sessionId":"`+id+`","status":"accepted"}` {
			t.Fatalf("%s: %d %s", op, r.Status, r.Body)
		}
	}
	r := e.do(t, "POST", "/eve/v1/session/"+id+"/reset", map[string]any{"reason": "start over"}, nil)
	if r.Status != 200 || string(bytes.TrimSpace(r.Body)) != `{"ok":true,"previousSessionId":"`+id+`","status":"reset"}` {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	types := evetest.Types(e.snapshot(t, id))
	for _, want := range []string{protocol.ContextCleared, protocol.CompactionRequested, protocol.CompactionCompleted} {
		if !slices.Contains(types, want) {
			t.Fatalf("events %v lack %s", types, want)
		}
	}
	wantError(t, e.do(t, "POST", "/eve/v1/session/"+id+"/reset", map[string]any{"reason": 5}, nil), 400, api.CodeBadRequest, "reason")
	wantError(t, e.do(t, "POST", "/eve/v1/session/ses_nope/clear", nil, nil), 404, api.CodeSessionNotFound, "ses_nope")
}

// Bad input gets the protocol's error body and records nothing.
func TestAPIBadInputs(t *testing.T) {
	e := demoAPI(t, func(o *api.Options) { o.MaxBodyBytes = 64 << 10 })
	ctx := e.Ctx(60 * time.Second)
	turn, err := e.C.SendAndWait(ctx, "", "what's the weather in Paris", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := turn.SessionID
	before := ids(e.snapshot(t, id))
	path := "/eve/v1/session/" + id
	ctJSON := map[string]string{"Content-Type": "application/json"}

	wantError(t, e.do(t, "POST", path, `{"message": "hi"`, ctJSON), 400, api.CodeInvalidJSON, "invalid JSON")
	wantError(t, e.do(t, "POST", path, `["hi"]`, ctJSON), 400, api.CodeInvalidJSON, "JSON object")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": "hi", "inputResponses": []any{map[string]any{"requestId": "x", "optionId": "approve"}}}, nil), 400, api.CodeBadRequest, "mutually exclusive")
	wantError(t, e.do(t, "POST", path, map[string]any{}, nil), 400, api.CodeBadRequest, "non-empty 'message'")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": ""}, nil), 400, api.CodeBadRequest, "non-empty 'message'")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": 42}, nil), 400, api.CodeBadRequest, "'message'")
	wantError(t, e.do(t, "POST", path, "", ctJSON), 400, api.CodeBadRequest, "empty")
	wantError(t, e.do(t, "POST", path, map[string]any{"inputResponses": []any{}}, nil), 400, api.CodeBadRequest, "non-empty array")
	wantError(t, e.do(t, "POST", path, map[string]any{"inputResponses": []any{map[string]any{"requestId": "x", "extra": 1}}}, nil), 400, api.CodeBadRequest, "inputResponses[0]")
	wantError(t, e.do(t, "POST", path, map[string]any{"inputResponses": []any{map[string]any{"requestId": "apr_nope", "optionId": "approve"}}}, nil), 400, api.CodeUnknownRequest, "apr_nope")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": "hi", "continuationToken": "x"}, nil), 400, api.CodeBadRequest, "continuationToken")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": "hi", "stubs": []any{}}, nil), 400, api.CodeBadRequest, "fixed when a session is created")
	wantError(t, e.do(t, "POST", path, map[string]any{"message": []any{map[string]any{"type": "file", "mediaType": "image/png", "data": "AAAA"}}}, nil), 415, api.CodeUnsupportedMedia, "image/png")
	// Content type.
	wantError(t, e.do(t, "POST", path, `{"message":"hi"}`, map[string]string{"Content-Type": "text/plain"}), 415, api.CodeUnsupportedMedia, "text/plain")
	wantError(t, e.do(t, "POST", path, `{"message":"hi"}`, map[string]string{"Content-Type": ""}), 415, api.CodeUnsupportedMedia, "application/json")
	wantError(t, e.do(t, "POST", "/eve/v1/session", `{"message":"hi"}`, map[string]string{"Content-Type": "text/plain"}), 415, api.CodeUnsupportedMedia, "")
	// Size: the body limit, and the message limit of the workflow.
	big := strings.Repeat("x", 70<<10)
	wantError(t, e.do(t, "POST", path, map[string]any{"message": big}, nil), 413, api.CodeTooLarge, "65536 bytes")
	e2 := newAPIEnv(t, e.Env, func(o *api.Options) { o.MaxBodyBytes = 4 << 20 })
	huge := strings.Repeat("y", 300<<10)
	wantError(t, e2.do(t, "POST", path, map[string]any{"message": huge}, nil), 413, api.CodeTooLarge, "262144 bytes")
	// Unknown session, on every route.
	wantError(t, e.do(t, "POST", "/eve/v1/session/ses_unknown", map[string]any{"message": "hi"}, nil), 404, api.CodeSessionNotFound, "ses_unknown")
	wantError(t, e.do(t, "POST", "/eve/v1/session/ses_unknown", map[string]any{"inputResponses": []any{map[string]any{"requestId": "x"}}}, nil), 404, api.CodeSessionNotFound, "")
	wantError(t, e.do(t, "GET", "/eve/v1/session/ses_unknown/stream", nil, nil), 404, api.CodeSessionNotFound, "")
	wantError(t, e.do(t, "POST", "/eve/v1/session/ses_unknown/cancel", nil, nil), 404, api.CodeSessionNotFound, "")
	// Stream parameters, routes, methods.
	wantError(t, e.do(t, "GET", path+"/stream?startIndex=abc", nil, nil), 400, api.CodeBadRequest, "startIndex")
	wantError(t, e.do(t, "GET", path+"/stream?startIndex=1.5", nil, nil), 400, api.CodeBadRequest, "startIndex")
	wantError(t, e.do(t, "POST", path+"/cancel", map[string]any{"turnId": 3}, nil), 400, api.CodeBadRequest, "turnId")
	wantError(t, e.do(t, "GET", "/eve/v1/nope", nil, nil), 404, api.CodeNotFound, "")

	// Every answer above came back, so whatever the server sent the
	// workflows is in their histories; the reads below are queries, which
	// Temporal answers only after the workflow has processed all of it.
	if after := ids(e.snapshot(t, id)); !slices.Equal(before, after) {
		t.Fatalf("bad input recorded events: %d became %d", len(before), len(after))
	}
	if sum, err := e.Sessions.Summary(ctx, id); err != nil || sum.Turns != 1 || sum.Queued != 0 {
		t.Fatalf("summary = %+v, %v", sum, err)
	}
}

// The stream: a newline at once, heartbeats, the lease-ended line, and a
// client that reconnects from its cursor across leases without losing or
// repeating an event.
func TestAPIStreamLeaseAndReconnect(t *testing.T) {
	// Heartbeats every 100 ms: the 1 s lease holds one unless the stream
	// stalls for most of it (a loaded machine's pause).
	e := demoAPI(t, func(o *api.Options) {
		o.LeaseDuration = time.Second
		o.HeartbeatInterval = 100 * time.Millisecond
	})
	ctx := e.Ctx(60 * time.Second)
	first, err := e.C.SendAndWait(ctx, "", "what's the weather in Paris", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := first.SessionID

	// Raw: one lease of ~1 s with heartbeats, ending with the control line.
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/eve/v1/session/"+id+"/stream?streamControlVersion=1&startIndex=-1", nil)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	lines := strings.Split(string(body), "\n")
	// The response ends by itself at the lease (not early; no upper timing
	// bound: a loaded machine delays it, and the ctx bounds a hang).
	if took < 900*time.Millisecond {
		t.Fatalf("lease lasted %v, want at least 1s", took)
	}
	if lines[0] != "" || !strings.Contains(lines[1], `"session.waiting"`) || lines[len(lines)-2] != strings.TrimSpace(api.LeaseEndedLine) {
		t.Fatalf("body %q", body)
	}
	blanks := 0
	for _, l := range lines[1 : len(lines)-1] {
		if l == "" {
			blanks++
		}
	}
	if blanks < 1 {
		t.Fatalf("want heartbeats (every 100ms) before the lease ended, body %q", body)
	}
	// Without stream control the response does not end at the lease.
	rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	req, _ = http.NewRequestWithContext(rctx, "GET", e.URL+"/eve/v1/session/"+id+"/stream?startIndex=-1", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if strings.Contains(string(body), "lease-ended") || rctx.Err() == nil {
		t.Fatalf("a stream without control ended early: %q", body)
	}

	// The Go client follows across leases, reading all the while. Its
	// transport counts the stream responses it opens.
	var opened atomic.Int32
	follower := client.New(e.URL, client.WithHTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/stream") {
			opened.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st := follower.Stream(sctx, id, 0, nil)
	events := make(chan protocol.Event, 100)
	go func() {
		defer close(events)
		for st.Next() {
			events <- st.Event()
		}
	}()
	var got []protocol.Event
	waits := 0
	readUntil := func(n int) {
		for waits < n {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("stream ended after %d events: %v", len(got), st.Err())
				}
				got = append(got, ev)
				if ev.Type == protocol.SessionWaiting {
					waits++
				}
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	readUntil(1)
	// Two leases end while idle: the client has opened its third response.
	for deadline := time.Now().Add(20 * time.Second); opened.Load() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream opened %d responses in 20 s; want a reconnect after each 1 s lease", opened.Load())
		}
	}
	second, err := e.C.Send(ctx, id, "compare Oslo and Rome")
	if err != nil {
		t.Fatal(err)
	}
	readUntil(2)
	all := e.snapshot(t, id)
	if !slices.Equal(ids(got), ids(all)) {
		t.Fatalf("followed %d events, the session has %d:\n%s\n%s", len(got), len(all), evetest.Join(got), evetest.Join(all))
	}
	stop()
	for range events {
	}
	if st.Leases < 2 || st.Opened < 3 {
		t.Fatalf("leases %d, responses %d: want the client to have reconnected after each lease", st.Leases, st.Opened)
	}
	if !slices.Contains(all[len(all)-2].Meta.DeliveryIDs, second.DeliveryID) {
		t.Fatalf("last turn's events lack delivery %s", second.DeliveryID)
	}
}

// CORS lets browser apps on another origin read the x-eve-* headers.
func TestAPICORS(t *testing.T) {
	e := keyedAPI(t, nil)
	r := e.do(t, "OPTIONS", "/eve/v1/session", nil, map[string]string{
		"Origin": "http://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type",
	})
	if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "authorization") || !strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", r.Status, r.Header)
	}
	turn, err := e.C.SendAndWait(e.Ctx(30*time.Second), "", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(t, "GET", "/eve/v1/session/"+turn.SessionID+"/stream?follow=false", nil, map[string]string{"Origin": "http://app.example", "Authorization": "Bearer key-alice"})
	exp := r.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"x-eve-stream-version", "x-eve-stream-tail-index", "x-eve-session-id"} {
		if !strings.Contains(exp, h) {
			t.Fatalf("expose headers %q lack %s", exp, h)
		}
	}
	// Restricted origins.
	e2 := newAPIEnv(t, e.Env, func(o *api.Options) { o.Keys = apiTestKeys; o.CORSOrigins = []string{"http://good.example"} })
	if r := e2.do(t, "GET", "/eve/v1/health", nil, map[string]string{"Origin": "http://evil.example"}); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("evil origin allowed: %v", r.Header)
	}
	if r := e2.do(t, "GET", "/eve/v1/health", nil, map[string]string{"Origin": "http://good.example"}); r.Header.Get("Access-Control-Allow-Origin") != "http://good.example" {
		t.Fatalf("good origin refused: %v", r.Header)
	}
	// An open server never sends a wildcard: pages of this machine only
	// (more in TestAPIOpenModeLoopbackOnly).
	e3 := newAPIEnv(t, e.Env, nil)
	if r := e3.do(t, "OPTIONS", "/eve/v1/session", nil, map[string]string{"Origin": "http://app.example", "Access-Control-Request-Method": "POST"}); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("open server, foreign origin: %d %v", r.Status, r.Header)
	}
	if r := e3.do(t, "OPTIONS", "/eve/v1/session", nil, map[string]string{"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"}); r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("open server, loopback origin: %d %v", r.Status, r.Header)
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
