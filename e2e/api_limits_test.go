package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// readStream reads one stream response in full (follow=false): status,
// tail header, events.
func (e *apiEnv) readStream(t *testing.T, id, query string) (int, int, []protocol.Event) {
	t.Helper()
	r := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?follow=false&"+query, nil, nil)
	if r.Status != http.StatusOK {
		return r.Status, 0, nil
	}
	tail, err := strconv.Atoi(r.Header.Get(api.HeaderTailIndex))
	if err != nil {
		t.Fatalf("tail header %q", r.Header.Get(api.HeaderTailIndex))
	}
	var evs []protocol.Event
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev protocol.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("line %.100s: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return r.Status, tail, evs
}

// A session whose workflow was terminated answers 410 session_ended, with
// the termination reason and what to do, on every route: message, answers,
// controls, and a stream followed from its end; what it recorded stays
// readable (the same events, then the response ends). A stream that
// follows it ends, and its client sees ErrSessionEnded. An unknown id
// stays 404.
func TestAPIEndedSessionIsGone(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(60 * time.Second)
	acc, err := e.C.CreateAndSend(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, 0, nil); err != nil {
		t.Fatal(err)
	}
	id := acc.SessionID

	// A stream that follows the session while it is terminated: it has
	// read the whole log, so it is open and following.
	evs, _, err := e.C.Events(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := e.C.Stream(ctx, id, 0, nil)
	defer st.Close()
	caughtUp := make(chan struct{})
	seen := make(chan error, 1)
	go func() {
		n := 0
		for st.Next() {
			if n++; n == len(evs) {
				close(caughtUp)
			}
		}
		seen <- st.Err()
	}()
	select {
	case <-caughtUp:
	case err := <-seen:
		t.Fatalf("the stream ended before it caught up: %v", err)
	case <-ctx.Done():
		t.Fatal("the stream did not catch up")
	}

	const reason = "operator: the history outgrew its budget"
	if err := e.Client.TerminateWorkflow(ctx, id, "", reason); err != nil {
		t.Fatal(err)
	}
	check := func(what string, r rawResponse) {
		t.Helper()
		wantError(t, r, http.StatusGone, api.CodeSessionEnded, "terminated")
		for _, part := range []string{id, reason, "start a new session"} {
			if !strings.Contains(string(r.Body), part) {
				t.Fatalf("%s: %s should mention %q", what, r.Body, part)
			}
		}
	}
	base := "/eve/v1/session/" + id
	check("message", e.do(t, "POST", base, map[string]any{"message": "are you there?"}, nil))
	check("answers", e.do(t, "POST", base, map[string]any{"inputResponses": []map[string]any{{"requestId": "req_1", "optionId": "approve"}}}, nil))
	for _, op := range []string{"cancel", "clear", "compact", "reset"} {
		check(op, e.do(t, "POST", base+"/"+op, map[string]any{}, nil))
	}
	check("stream from its end", e.do(t, "GET", base+"/stream?startIndex="+strconv.Itoa(len(evs)), nil, nil))
	status, tail, recorded := e.readStream(t, id, "")
	if status != http.StatusOK || tail != len(evs)-1 || evetest.Join(recorded) != evetest.Join(evs) || recorded[len(recorded)-1].Meta.ID != evs[len(evs)-1].Meta.ID {
		t.Fatalf("its recorded stream: %d, tail %d, %s; want 200, tail %d, %s", status, tail, evetest.Join(recorded), len(evs)-1, evetest.Join(evs))
	}
	// Followed from before its end: the rest of what it recorded, then the
	// response ends (a reconnect from there is the 410 above).
	if r := e.do(t, "GET", base+"/stream?startIndex=-1", nil, nil); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(evs[len(evs)-1].Meta.ID)) {
		t.Fatalf("stream tail: %d %s, want 200 with the last event", r.Status, r.Body)
	}

	if _, err := e.C.Send(ctx, id, "again"); !errors.Is(err, client.ErrSessionEnded) || !client.IsStatus(err, http.StatusGone) {
		t.Fatalf("client send: %v, want ErrSessionEnded", err)
	}
	select {
	case err := <-seen:
		if !errors.Is(err, client.ErrSessionEnded) {
			t.Fatalf("following stream ended with %v, want ErrSessionEnded", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the following stream did not end")
	}

	// Unknown ids stay 404.
	unknown := "/eve/v1/session/ses_01UNKNOWNUNKNOWNUNKNOWN00"
	wantError(t, e.do(t, "POST", unknown, map[string]any{"message": "hi"}, nil), http.StatusNotFound, api.CodeSessionNotFound, "")
	wantError(t, e.do(t, "POST", unknown, map[string]any{"inputResponses": []map[string]any{{"requestId": "req_1", "optionId": "approve"}}}, nil), http.StatusNotFound, api.CodeSessionNotFound, "")
	wantError(t, e.do(t, "POST", unknown+"/cancel", map[string]any{}, nil), http.StatusNotFound, api.CodeSessionNotFound, "")
	wantError(t, e.do(t, "GET", unknown+"/stream?follow=false", nil, nil), http.StatusNotFound, api.CodeSessionNotFound, "")
	if _, err := e.C.Send(ctx, "ses_01UNKNOWNUNKNOWNUNKNOWN00", "hi"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("client send to an unknown id: %v", err)
	}
}

// The reported failure: Temporal terminates a session whose history is over
// its limit. Every answer after that is 410 with Temporal's reason, never a
// 404, and never a 2xx.
func TestAPIHistoryLimitAnswersGone(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{ExtraArgs: []string{
		"--dynamic-config-value", "limit.historySize.error=400000",
		"--dynamic-config-value", "limit.historySize.warn=100000",
	}})
	env := evetest.NewOn(t, srv)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.ContinueAsNewAfterTurns = 1000 // stay in one run
	env.StartWorker(a)
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(60 * time.Second)
	acc, err := e.C.CreateAndSend(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 60_000)
	gone, accepted := 0, 0
	for i := 0; i < 40 && gone < 3; i++ {
		r := e.do(t, "POST", "/eve/v1/session/"+acc.SessionID, map[string]any{"message": fmt.Sprintf("%d %s", i, big)}, nil)
		switch {
		case r.Status == http.StatusAccepted && gone == 0:
			accepted++
		case r.Status == http.StatusGone:
			wantError(t, r, http.StatusGone, api.CodeSessionEnded, "terminated")
			gone++
		default:
			t.Fatalf("message %d: %d %s (after %d answers 410)", i, r.Status, r.Body, gone)
		}
	}
	t.Logf("%d messages accepted, then %d answered 410", accepted, gone)
	if gone == 0 {
		t.Skip("the dev server never terminated the session (its history stayed under the limit: the workflows keep runs small)")
	}
	// What it recorded stays readable (its last turn, cut short, too);
	// followed from its end, the stream is 410 with Temporal's reason.
	status, tail, evs := e.readStream(t, acc.SessionID, "")
	if status != http.StatusOK || len(evs) == 0 || tail != len(evs)-1 || evs[0].Type != protocol.SessionStarted {
		t.Fatalf("its recorded stream: %d, tail %d, %d events", status, tail, len(evs))
	}
	r := e.do(t, "GET", "/eve/v1/session/"+acc.SessionID+"/stream?startIndex="+strconv.Itoa(tail+1), nil, nil)
	wantError(t, r, http.StatusGone, api.CodeSessionEnded, "history size exceeds limit")
}

// A session with more than 1 MiB of events (8 messages of 200 KB) streams
// from 0 every event exactly once, in order, the same ids on a second read
// and through the Go client; a negative startIndex returns the tail; a
// running turn's events count in the tail.
func TestAPIStreamLargeSession(t *testing.T) {
	e := demoAPI(t, nil)
	ctx := e.Ctx(120 * time.Second)
	id, err := e.C.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		msg := fmt.Sprintf("message %d: %s", i, strings.Repeat(strconv.Itoa(i), 200_000))
		if turn, err := e.C.SendAndWait(ctx, id, msg, nil); err != nil || turn.Status != client.TurnCompleted {
			t.Fatalf("message %d: %+v %v", i, turn, err)
		}
	}

	// The service pages: one read holds less than the log.
	p, err := e.Sessions.Read(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.More() || len(p.Events) == 0 || p.Total <= len(p.Events) {
		t.Fatalf("first page: %d events of %d: want a partial page", len(p.Events), p.Total)
	}

	status, tail, first := e.readStream(t, id, "")
	if status != http.StatusOK {
		t.Fatalf("stream: %d", status)
	}
	if len(first) != tail+1 || tail+1 != p.Total {
		t.Fatalf("stream sent %d events, tail header %d, total %d", len(first), tail, p.Total)
	}
	size, received := 0, 0
	seen := map[string]bool{}
	for i, ev := range first {
		if seen[ev.Meta.ID] {
			t.Fatalf("event %d: id %s twice", i, ev.Meta.ID)
		}
		seen[ev.Meta.ID] = true
		size += len(ev.Data)
		if ev.Type == protocol.MessageReceived {
			var d protocol.MessageReceivedData
			if err := ev.Decode(&d); err != nil || !strings.HasPrefix(d.Message, fmt.Sprintf("message %d:", received)) {
				t.Fatalf("event %d: message.received %d out of order (%.20q)", i, received, d.Message)
			}
			received++
		}
	}
	if size <= signals.MaxEventsPageBytes || received != 8 {
		t.Fatalf("%d bytes of event data, %d messages: want more than one page and all 8", size, received)
	}
	_, _, second := e.readStream(t, id, "")
	if strings.Join(ids(second), " ") != strings.Join(ids(first), " ") {
		t.Fatal("a second read sent other ids")
	}
	viaClient, _, err := e.C.Events(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids(viaClient), " ") != strings.Join(ids(first), " ") {
		t.Fatal("the Go client read other ids")
	}
	direct, err := e.Sessions.Events(ctx, id, 0)
	if err != nil || strings.Join(ids(direct), " ") != strings.Join(ids(first), " ") {
		t.Fatalf("sessions.Events: %d events, err %v", len(direct), err)
	}
	// A following stream from 0 gets them all too.
	sctx, cancel := context.WithCancel(ctx)
	st := e.C.Stream(sctx, id, 0, nil)
	var followed []protocol.Event
	for len(followed) < len(first) && st.Next() {
		followed = append(followed, st.Event())
	}
	cancel()
	st.Close()
	if strings.Join(ids(followed), " ") != strings.Join(ids(first), " ") {
		t.Fatalf("following stream: %d events, err %v", len(followed), st.Err())
	}

	// Negative startIndex: the tail only.
	for _, back := range []int{1, 3, 10} {
		status, tailHdr, evs := e.readStream(t, id, "startIndex="+strconv.Itoa(-back))
		if status != http.StatusOK || tailHdr != tail || strings.Join(ids(evs), " ") != strings.Join(ids(first[len(first)-back:]), " ") {
			t.Fatalf("startIndex=-%d: status %d tail %d, %d events", back, status, tailHdr, len(evs))
		}
	}
	p, err = e.Sessions.Read(ctx, id, -2)
	if err != nil || p.From != len(first)-2 || len(p.Events) != 2 || p.Total != len(first) {
		t.Fatalf("Read(-2): from %d, %d events, total %d, err %v", p.From, len(p.Events), p.Total, err)
	}

	// A parked turn: its events count in Total, and the tail is its last.
	turn, err := e.C.SendAndWait(ctx, id, "refund ch_7 for 7", nil)
	if err != nil || turn.Status != client.TurnWaiting {
		t.Fatalf("park: %+v %v", turn, err)
	}
	all, err := e.Sessions.Events(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err = e.Sessions.Read(ctx, id, -1)
	if err != nil || !p.Active || p.Total != len(all) || len(p.Events) != 1 || p.Events[0].Meta.ID != all[len(all)-1].Meta.ID || p.Events[0].Type != protocol.TurnWaiting {
		t.Fatalf("Read(-1) of a parked turn: active %v total %d (want %d), %d events, err %v", p.Active, p.Total, len(all), len(p.Events), err)
	}
	if p, err := e.Sessions.Read(ctx, id, len(all)+3); err != nil || p.Total != len(all) || len(p.Events) != 0 {
		t.Fatalf("Read past the tail of a parked turn: total %d, %d events, err %v", p.Total, len(p.Events), err)
	}
}

// A session whose lifetime is over completes; what it recorded, its
// session.completed last, stays readable over HTTP (a stream that followed
// it live, a snapshot, the Go client's Events, a stream that follows it
// from its start and ends there), as eve keeps a session's events after it
// ends. A stream followed from its end answers 410, and so does a message.
func TestAPIEndedSessionStreamReadable(t *testing.T) {
	env := limitedEnv(t, func(a *agent.Agent) { a.SessionLifetime = 2 * time.Second })
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(60 * time.Second)
	acc, err := e.C.CreateAndSend(ctx, "what's the weather in Paris")
	if err != nil {
		t.Fatal(err)
	}
	id := acc.SessionID
	// An app that follows the session as its lifetime ends reads
	// session.completed, whether its stream read it before the workflow
	// closed or reconnected after.
	live := e.C.Stream(ctx, id, 0, nil)
	defer live.Close()
	var followed []protocol.Event
	for live.Next() {
		followed = append(followed, live.Event())
	}
	if err := live.Err(); err != nil || !strings.HasSuffix(evetest.Join(followed), "session.waiting session.completed") {
		t.Fatalf("a stream that followed it: %s, %v", evetest.Join(followed), err)
	}
	if err := env.Client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Fatalf("session workflow: %v", err)
	}
	status, tail, evs := e.readStream(t, id, "")
	if status != http.StatusOK || len(evs) == 0 || tail != len(evs)-1 || !strings.HasSuffix(evetest.Join(evs), "turn.completed session.waiting session.completed") {
		t.Fatalf("snapshot: %d, tail %d, %s", status, tail, evetest.Join(evs))
	}
	got, gotTail, err := e.C.Events(ctx, id, 0)
	if err != nil || gotTail != tail || evetest.Join(got) != evetest.Join(evs) {
		t.Fatalf("client Events: %s, tail %d, %v", evetest.Join(got), gotTail, err)
	}
	for i := range evs {
		if got[i].Meta.ID != evs[i].Meta.ID {
			t.Fatalf("event %d: id %s, then %s", i, evs[i].Meta.ID, got[i].Meta.ID)
		}
	}
	fromOne := e.do(t, "GET", "/eve/v1/session/"+id+"/stream?startIndex=1", nil, nil)
	if fromOne.Status != http.StatusOK || bytes.Count(fromOne.Body, []byte(`"type":"`)) != len(evs)-1 || !bytes.Contains(fromOne.Body, []byte(`"type":"session.completed"`)) {
		t.Fatalf("followed from 1: %d %s", fromOne.Status, fromOne.Body)
	}
	// It exports as a test (eve's stubs), as a session that still runs.
	if r := e.do(t, "GET", "/eve/v1/session/"+id+"/export-stubs", nil, nil); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte("get_weather")) {
		t.Fatalf("export-stubs: %d %s", r.Status, r.Body)
	}
	wantError(t, e.do(t, "GET", "/eve/v1/session/"+id+"/stream?startIndex="+strconv.Itoa(len(evs)), nil, nil), http.StatusGone, api.CodeSessionEnded, "completed")
	wantError(t, e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"message": "hello again"}, nil), http.StatusGone, api.CodeSessionEnded, "completed")
}

// A session terminated before any worker ran it recorded nothing: its
// stream reads no events (Temporal answers its query WorkflowNotReady, now
// and ever), and followed it is 410 with the reason.
func TestAPIEndedBeforeItRanRecordedNothing(t *testing.T) {
	env := evetest.New(t) // no worker
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(30 * time.Second)
	acc, err := e.C.CreateAndSend(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.TerminateWorkflow(ctx, acc.SessionID, "", "operator: it never ran"); err != nil {
		t.Fatal(err)
	}
	if status, tail, evs := e.readStream(t, acc.SessionID, ""); status != http.StatusOK || tail != -1 || len(evs) != 0 {
		t.Fatalf("its recorded stream: %d, tail %d, %d events; want 200, tail -1, none", status, tail, len(evs))
	}
	wantError(t, e.do(t, "GET", "/eve/v1/session/"+acc.SessionID+"/stream", nil, nil), http.StatusGone, api.CodeSessionEnded, "it never ran")
}
