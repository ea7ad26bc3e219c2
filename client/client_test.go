package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

func TestRouteURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://h:1":                  "http://h:1/eve/v1/session/a%2Fb/stream?x=1",
		"http://h:1/":                 "http://h:1/eve/v1/session/a%2Fb/stream?x=1",
		"http://h:1/eve/demo":         "http://h:1/eve/demo/v1/session/a%2Fb/stream?x=1",
		"http://h:1/eve/demo/v1":      "http://h:1/eve/demo/v1/session/a%2Fb/stream?x=1",
		"http://h:1/prefix?tenant=t1": "http://h:1/prefix/eve/v1/session/a%2Fb/stream?tenant=t1&x=1",
	} {
		got := New(base).routeURL(sessionRoute("a/b", "/stream"), map[string][]string{"x": {"1"}})
		if got != want {
			t.Errorf("base %s: %s, want %s", base, got, want)
		}
	}
}

// fakeStream serves n events; each response carries at most perLease
// events and then ends with the lease-ended line (or just ends, when
// abrupt is set).
type fakeStream struct {
	mu       sync.Mutex
	events   []protocol.Event
	perLease int
	abrupt   bool
	starts   []string
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.starts = append(f.starts, r.URL.Query().Get("startIndex"))
	evs := f.events
	f.mu.Unlock()
	start, _ := strconv.Atoi(r.URL.Query().Get("startIndex"))
	if start < 0 {
		start = max(0, len(evs)+start)
	}
	w.Header().Set("x-eve-stream-version", "26")
	w.Header().Set("x-eve-stream-tail-index", strconv.Itoa(len(evs)-1))
	w.Write([]byte("\n"))
	n := 0
	for i := start; i < len(evs) && n < f.perLease; i++ {
		b, _ := json.Marshal(evs[i])
		w.Write(append(b, '\n'))
		w.Write([]byte("\n")) // a heartbeat in between
		n++
	}
	if r.URL.Query().Get("follow") == "false" {
		return
	}
	if !f.abrupt {
		w.Write([]byte(`{"$eve":"stream.lease-ended","version":1}` + "\n"))
	}
}

func events(n int) []protocol.Event {
	out := make([]protocol.Event, n)
	for i := range out {
		out[i] = protocol.Event{Type: "message.appended", Data: json.RawMessage(`{}`), Meta: protocol.Meta{ID: fmt.Sprintf("evt_%02d", i)}}
	}
	return out
}

func TestStreamReconnectsFromCursor(t *testing.T) {
	for _, abrupt := range []bool{false, true} {
		f := &fakeStream{events: events(7), perLease: 3, abrupt: abrupt}
		srv := httptest.NewServer(f)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st := New(srv.URL).Stream(ctx, "ses_1", 0, nil)
		for i := 0; i < 7; i++ {
			if !st.Next() {
				t.Fatalf("abrupt=%v: ended at %d: %v", abrupt, i, st.Err())
			}
			if st.Index() != i || st.Event().Meta.ID != fmt.Sprintf("evt_%02d", i) {
				t.Fatalf("event %d = %d %s", i, st.Index(), st.Event().Meta.ID)
			}
		}
		st.Close()
		cancel()
		srv.Close()
		f.mu.Lock()
		if f.starts[0] != "" || f.starts[1] != "3" || f.starts[2] != "6" {
			t.Fatalf("abrupt=%v: starts %q", abrupt, f.starts)
		}
		f.mu.Unlock()
		if !abrupt && st.Leases != 2 {
			t.Fatalf("leases %d", st.Leases)
		}
	}
}

func TestEventsAndTailRelativeStart(t *testing.T) {
	f := &fakeStream{events: events(5), perLease: 100}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := New(srv.URL)
	ctx := context.Background()
	evs, tail, err := c.Events(ctx, "ses_1", 1)
	if err != nil || tail != 4 || len(evs) != 4 || evs[0].Meta.ID != "evt_01" {
		t.Fatalf("events = %d, tail %d, %v", len(evs), tail, err)
	}
	st := c.Stream(ctx, "ses_1", -2, &StreamOptions{NoFollow: true})
	var got []int
	for st.Next() {
		got = append(got, st.Index())
	}
	if fmt.Sprint(got) != "[3 4]" || st.Err() != nil {
		t.Fatalf("from -2: %v %v", got, st.Err())
	}
}

func TestErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		w.Write([]byte(`{"ok":false,"error":"session ses_x not found","code":"session_not_found"}`))
	}))
	defer srv.Close()
	_, err := New(srv.URL).Send(context.Background(), "ses_x", "hi")
	var e *Error
	if !IsStatus(err, 404) || !errorsAs(err, &e) || e.Code != "session_not_found" || e.Message != "session ses_x not found" {
		t.Fatalf("err = %#v", err)
	}
}

func errorsAs(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

func TestInputsFold(t *testing.T) {
	ev := func(typ string, data any) protocol.Event {
		b, _ := json.Marshal(data)
		return protocol.Event{Type: typ, Data: b}
	}
	var in Inputs
	in.Add(0, ev(protocol.InputRequested, protocol.InputRequestedData{Requests: []protocol.InputRequest{{RequestID: "a"}, {RequestID: "b"}}, StepRef: protocol.StepRef{TurnID: "turn_0"}}))
	in.Add(1, ev(protocol.InputResolved, protocol.InputResolvedData{Resolutions: []protocol.InputResolution{{RequestID: "a", Outcome: protocol.OutcomeApproved}, {RequestID: "b", Outcome: protocol.OutcomeInvalid}}}))
	if open := in.Open(); len(open) != 1 || open[0].RequestID != "b" || open[0].TurnID != "turn_0" {
		t.Fatalf("open = %+v", open)
	}
	in.Add(2, ev(protocol.TurnCancelled, protocol.TurnRef{TurnID: "turn_0"}))
	if open := in.Open(); len(open) != 0 {
		t.Fatalf("open after the turn ended = %+v", open)
	}
	if r, ok := in.Asked("b"); !ok || r.Index != 0 {
		t.Fatalf("asked b = %+v %v", r, ok)
	}
}

func TestErrorIsSessionEnded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(410)
		w.Write([]byte(`{"ok":false,"error":"session ses_x has ended: its workflow was terminated (too big). Start a new session.","code":"session_ended"}`))
	}))
	defer srv.Close()
	_, err := New(srv.URL).Send(context.Background(), "ses_x", "hi")
	if !errors.Is(err, ErrSessionEnded) || errors.Is(err, ErrSessionNotFound) || !IsStatus(err, 410) {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(&Error{Status: 404, Code: "session_not_found"}, ErrSessionNotFound) {
		t.Fatal("404 session_not_found is not ErrSessionNotFound")
	}
}

func TestTailRetriesOverload(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
			w.Write([]byte(`{"ok":false,"error":"session stream unavailable","code":"unavailable"}`))
			return
		}
		w.Header().Set("x-eve-stream-tail-index", "7")
		w.WriteHeader(200)
	}))
	defer srv.Close()
	tail, err := New(srv.URL).Tail(context.Background(), "ses_x")
	if err != nil || tail != 7 || calls != 2 {
		t.Fatalf("tail %d, err %v after %d calls; want 7 after a retried 503", tail, err, calls)
	}
}

func TestTailDoesNotRetryRefusals(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(403)
		w.Write([]byte(`{"ok":false,"error":"no","code":"forbidden"}`))
	}))
	defer srv.Close()
	if _, err := New(srv.URL).Tail(context.Background(), "ses_x"); !IsStatus(err, 403) || calls != 1 {
		t.Fatalf("err %v after %d calls; want 403 at once", err, calls)
	}
}
