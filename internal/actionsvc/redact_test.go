package actionsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/signals"
)

// downClient is a Temporal client that cannot reach Temporal; its errors
// quote everything they were given.
type downClient struct{ client.Client }

func (downClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	b, _ := json.Marshal(o.Args)
	return nil, errors.New("unavailable: update " + o.WorkflowID + " " + string(b))
}

func (downClient) RecordActivityHeartbeatByID(_ context.Context, ns, wid, rid, aid string, details ...any) error {
	return errors.New("unavailable: heartbeat " + wid + " " + aid)
}

func newTestService(t *testing.T, logs *bytes.Buffer) (*Service, string) {
	signer, err := capability.NewSigner([]byte("test secret, 16+ bytes long"))
	if err != nil {
		t.Fatal(err)
	}
	tok := signer.Sign(capability.Claims{Namespace: "default", SessionID: "ses_1", WorkflowID: "ses_1/turn_0", ActivityID: signals.ToolActivityID("call_1"), ActionID: "act_one", Tool: "run_report", Expires: time.Now().Add(time.Hour).Unix()})
	return &Service{Client: downClient{}, Signer: signer, Timeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, tok
}

func serve(s *Service, path, auth, body string) (int, Reply) {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var r Reply
	json.Unmarshal(rec.Body.Bytes(), &r)
	return rec.Code, r
}

// The completion and heartbeat endpoints log failures by action id, never
// with the capability, in both forms.
func TestLogsAndAnswersHideCapability(t *testing.T) {
	var logs bytes.Buffer
	s, tok := newTestService(t, &logs)
	p := signals.ActionsPath
	for _, c := range []struct{ path, auth string }{
		{p + tok, ""},
		{p + tok + "/heartbeat", ""},
		{p + "act_one", "Bearer " + tok},
		{p + "act_one/heartbeat", "Bearer " + tok},
		{p, "bearer " + tok},
	} {
		logs.Reset()
		st, r := serve(s, c.path, c.auth, `{"output":{"status":"succeeded"}}`)
		if st != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d %+v", RedactPath(c.path), st, r)
		}
		out := logs.String()
		if !strings.Contains(out, "act_one") {
			t.Fatalf("%s: the log names no action: %s", RedactPath(c.path), out)
		}
		if strings.Contains(out, tok) || strings.Contains(r.Error, tok) {
			t.Fatalf("%s: the capability leaked: %s %s", RedactPath(c.path), out, r.Error)
		}
	}
}

func TestBearerHeaderForm(t *testing.T) {
	var logs bytes.Buffer
	s, tok := newTestService(t, &logs)
	p := signals.ActionsPath
	// The URL names another action than the header's capability.
	if st, r := serve(s, p+"act_other", "Bearer "+tok, `{"output":{}}`); st != http.StatusUnauthorized || r.Code != "invalid_capability" {
		t.Fatalf("mismatch: %d %+v", st, r)
	}
	if st, r := serve(s, p+"act_other/heartbeat", "Bearer "+tok, ``); st != http.StatusUnauthorized || r.Code != "invalid_capability" {
		t.Fatalf("heartbeat mismatch: %d %+v", st, r)
	}
	// A forged header, an empty one, a header without a path token.
	for _, auth := range []string{"Bearer " + tok + "x", "Bearer ", "Bearer"} {
		if st, r := serve(s, p+"act_one", auth, `{"output":{}}`); st != http.StatusUnauthorized {
			t.Fatalf("%q: %d %+v", auth, st, r)
		}
	}
	// No header, no token in the path.
	if st, _ := serve(s, p+"act_one", "", `{"output":{}}`); st != http.StatusUnauthorized {
		t.Fatalf("no capability: %d", st)
	}
	// The header with the legacy URL (the same token twice) is fine.
	if st, _ := serve(s, p+tok, "Bearer "+tok, `{"output":{}}`); st != http.StatusServiceUnavailable {
		t.Fatalf("both: %d", st)
	}
	// Another scheme is not a capability: the path's token is used.
	if st, _ := serve(s, p+tok, "Basic dXNlcjpwYXNz", `{"output":{}}`); st != http.StatusServiceUnavailable {
		t.Fatalf("basic: %d", st)
	}
}

func TestRedactPath(t *testing.T) {
	for in, want := range map[string]string{
		"/eve/v1/actions/abc.def":           "/eve/v1/actions/…",
		"/eve/v1/actions/abc.def/heartbeat": "/eve/v1/actions/…/heartbeat",
		"/eve/v1/actions/act_one/heartbeat": "/eve/v1/actions/act_one/heartbeat",
		"/eve/v1/sessions/ses_1/stream":     "/eve/v1/sessions/ses_1/stream",
	} {
		if got := RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}
