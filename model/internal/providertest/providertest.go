// Package providertest is the fake model provider of the providers' tests:
// an httptest server that plays back recorded answers from the testing
// package's testdata folder and keeps every request it received.
package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is one recorded answer the server plays back.
type Reply struct {
	Status  int
	File    string // under testdata/; a .sse file is streamed event by event
	Headers map[string]string
	Delay   time.Duration // before answering, unless the request ends first
}

// Request is a request the server received.
type Request struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

// Server plays back its replies in order (the last one repeats).
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// New starts a Server, closed when the test ends. A request whose body is
// not JSON, or a reply whose file cannot be read, fails the test.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := s.record(t, r)
		if rep.Delay > 0 {
			select {
			case <-time.After(rep.Delay):
			case <-r.Context().Done():
				return
			}
		}
		data, err := os.ReadFile(filepath.Join("testdata", rep.File))
		if err != nil {
			t.Errorf("fixture: %v", err)
		}
		stream := strings.HasSuffix(rep.File, ".sse")
		if stream {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.Status)
		if !stream {
			_, _ = w.Write(data)
			return
		}
		// Stream event by event, as the APIs do.
		fl, _ := w.(http.Flusher)
		for _, ev := range strings.SplitAfter(string(data), "\n\n") {
			_, _ = io.WriteString(w, ev)
			if fl != nil {
				fl.Flush()
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// record keeps r and returns the reply it gets.
func (s *Server) record(t testing.TB, r *http.Request) Reply {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Errorf("request body is not JSON: %v: %s", err, b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	return s.replies[min(len(s.requests)-1, len(s.replies)-1)]
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// AsJSON normalizes v through encoding/json for comparisons.
func AsJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// JSONEqual fails the test when got and want differ as JSON.
func JSONEqual(t testing.TB, what string, got, want any) {
	t.Helper()
	g, w := AsJSON(t, got), AsJSON(t, want)
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", "  ")
		wb, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s:\ngot  %s\nwant %s", what, gb, wb)
	}
}
