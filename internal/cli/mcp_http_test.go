package cli

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
)

// stalled sends headers promising a body, part of it, and reads the status
// line the server answers while the rest never comes.
func stalled(t *testing.T, addr string, headers string) (int, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n%s\r\n{\"jsonrpc\":", MCPPath, addr, headers)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var proto string
	var status int
	fmt.Sscanf(line, "%s %d", &proto, &status)
	return status, nil
}

// The MCP endpoint as serveMCPHTTP composes it: a request without the key
// is answered 401 before its body is read, even a body that never comes
// (it used to wait for the body forever); with the key, a stalled body is
// cut off at the read deadline and the handler sees the error.
func TestMCPHTTPStalledBodies(t *testing.T) {
	readErr := make(chan error, 1)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		http.Error(w, "read", http.StatusBadRequest)
	})
	srv := httptest.NewServer(bodyDeadline(requireBearer("the-key", next), 300*time.Millisecond))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := 0; i < 10; i++ {
		if st, err := stalled(t, addr, ""); err != nil || st != http.StatusUnauthorized {
			t.Fatalf("no key, stalled body: %d %v, want 401 at once", st, err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		stalled(t, addr, "Authorization: Bearer the-key\r\n")
	}()
	select {
	case err := <-readErr:
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("the handler read a stalled body with %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled body was waited on past its read deadline")
	}
	<-done
}
