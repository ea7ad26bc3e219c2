package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// `eve action --url` never prints the completion URL's capability, whatever fails.
func TestActionErrorsHideCapability(t *testing.T) {
	const tok = "eyJhY3QiOiJhY3RfcmVkYWN0In0.c2VjcmV0LW1hYy1kby1ub3QtbG9n"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
		w.Write([]byte(`{"ok":false,"error":"action act_redact ended first (cancelled)","code":"action_ended"}`))
	}))
	defer gone.Close()
	run := func(env string, args ...string) (string, error) {
		t.Setenv("EVE_ACTION_URL", env)
		root := newRootCommand()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetIn(strings.NewReader(""))
		root.SetArgs(args)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := root.ExecuteContext(ctx)
		s := out.String() + errOut.String()
		if err != nil {
			s += err.Error()
		}
		return s, err
	}
	for _, c := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"unreachable complete", "", []string{"action", "complete", "--timeout", "1s", "--url", closedURL + "/eve/v1/actions/" + tok, "--output", "{}"}, "/eve/v1/actions/"},
		{"unreachable fail", "", []string{"action", "fail", "--timeout", "1s", "--url", closedURL + "/eve/v1/actions/" + tok, "--message", "m"}, "within 1s"},
		{"unreachable heartbeat", "", []string{"action", "heartbeat", "--timeout", "1s", "--url", closedURL + "/eve/v1/actions/" + tok}, "within 1s"},
		{"gone", "", []string{"action", "complete", "--url", gone.URL + "/eve/v1/actions/" + tok, "--output", "{}"}, "410 action_ended"},
		{"from the environment", gone.URL + "/eve/v1/actions/" + tok, []string{"action", "heartbeat"}, "410 action_ended"},
		{"not http", "", []string{"action", "complete", "--url", "ftp://x/eve/v1/actions/" + tok, "--output", "{}"}, "not an http(s) URL"},
		{"not a completion URL", "", []string{"action", "complete", "--url", "http://x/eve/v1/other/" + tok + "?k=" + tok, "--output", "{}"}, "not a completion URL"},
		{"heartbeat URL", "", []string{"action", "complete", "--url", "http://x/eve/v1/actions/" + tok + "/heartbeat", "--output", "{}"}, "without /heartbeat"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(c.env, c.args...)
			if err == nil {
				t.Fatalf("no error: %s", out)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("output does not say %q: %s", c.want, out)
			}
			if strings.Contains(out, tok) || strings.Contains(out, "c2VjcmV0LW1hYy1kby1ub3QtbG9n") {
				t.Fatalf("the capability leaked: %s", out)
			}
		})
	}
}
