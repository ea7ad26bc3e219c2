package mcpserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/httpbody"
)

// The Host check compares localhost without case (host names are
// case-insensitive), for requests the Tasks layer answers (tasks/list)
// and for those the SDK serves (tools/list), whose own Host check would
// refuse LOCALHOST; other hosts are still refused.
func TestHTTPHostCaseInsensitive(t *testing.T) {
	s := serverWith(t, nil)
	hs := httptest.NewServer(s.HTTPHandler(nil)) // a loopback listener
	defer hs.Close()
	c := &rawHTTP{t: t, url: hs.URL}
	c.initialize()
	tests := []struct {
		host   string
		status int
	}{
		{"LOCALHOST:4121", 200},
		{"LocalHost", 200},
		{"localhost:4121", 200},
		{"127.0.0.1:4121", 200},
		{"LOCALHOST.attacker.example", 403},
		{"attacker.example", 403},
	}
	for _, tc := range tests {
		for _, method := range []string{"tools/list", "tasks/list"} {
			t.Run(tc.host+" "+method, func(t *testing.T) {
				st, body := c.post(method, map[string]any{}, func(r *http.Request) { r.Host = tc.host })
				if st != tc.status {
					t.Fatalf("status %d, want %d: %s", st, tc.status, body)
				}
			})
		}
	}
}

// A POST body that does not arrive within the server's body deadline
// (httpbody.Deadline, as eve mcp --http sets it) is 408 and says so; one
// over the limit is still 413.
func TestHTTPSlowBodyIs408(t *testing.T) {
	s := serverWith(t, nil)
	h := s.HTTPHandler(nil)
	const deadline = 300 * time.Millisecond
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, httpbody.Deadline(w, r, deadline))
	}))
	defer hs.Close()
	tests := []struct {
		name          string
		contentLength int
		send          string // the body sent; the connection then stays open
		status        int
		says          string
	}{
		{name: "stalled body", contentLength: 100, send: `{"jsonrpc":"2.0",`, status: 408, says: "did not arrive within 300ms"},
		{name: "too large", contentLength: maxBody + 1, send: "", status: 413, says: "the limit is 4194304 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
				"Content-Length: %d\r\n\r\n%s", tc.contentLength, tc.send)
			// The client never sends the rest: the answer comes from the
			// server's deadline or limit. 30 s is far beyond either.
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
				t.Fatalf("answer %d %q, want %d saying %q", resp.StatusCode, body, tc.status, tc.says)
			}
		})
	}
}
