package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/tools"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Whatever goes wrong with a job, the runner's log never shows its
// completion URL's capability.
func TestRunnerLogsNoCapability(t *testing.T) {
	const tok = "eyJhY3QiOiJhY3RfcmVkYWN0In0.c2VjcmV0LW1hYy1kby1ub3QtbG9n"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	answer := func(hb, complete int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasSuffix(r.URL.Path, "/heartbeat") {
				w.WriteHeader(hb)
				w.Write([]byte(`{"ok":` + map[bool]string{true: "true", false: "false"}[hb == 200] + `,"cancelRequested":false,"error":"e","code":"c"}`))
				return
			}
			w.WriteHeader(complete)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for name, base := range map[string]string{
		"unreachable":    closedURL,
		"heartbeat 410":  answer(410, 200, `{"ok":true}`),
		"completion 422": answer(200, 422, `{"ok":false,"error":"bad output","code":"invalid_output"}`),
		"completion 409": answer(200, 409, `{"ok":false,"error":"conflict","code":"action_conflict"}`),
		"completion 503": answer(200, 503, `{"ok":false,"error":"down","code":"temporal_unavailable"}`),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			job := demo.ReportJob{
				Action: demo.JobAction{ID: "act_redact", Deadline: time.Now().Add(time.Hour),
					Completion: tools.Completion{ID: "act_redact", URL: base + "/eve/v1/actions/" + tok}},
				Input: json.RawMessage(`{"name":"sales"}`),
			}
			raw, _ := json.Marshal(job)
			if err := os.WriteFile(filepath.Join(dir, "act_redact"+demo.JobExt), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			r := &runner{dir: dir, workTime: 30 * time.Millisecond, heartbeatEvery: 10 * time.Millisecond, claimTTL: time.Minute,
				client: &actions.Client{InitialBackoff: time.Millisecond, MaxAttempts: 2},
				log:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := r.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if !strings.Contains(out, "act_redact") {
				t.Fatalf("the log names no action:\n%s", out)
			}
			if strings.Contains(out, tok) || strings.Contains(out, "c2VjcmV0LW1hYy1kby1ub3QtbG9n") {
				t.Fatalf("the log shows the capability:\n%s", out)
			}
			if name != "completion 409" && name != "heartbeat 410" && !strings.Contains(out, "level=WARN") && !strings.Contains(out, "level=ERROR") {
				t.Fatalf("nothing went wrong?\n%s", out)
			}
		})
	}
}
