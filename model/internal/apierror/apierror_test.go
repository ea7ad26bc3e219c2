package apierror

import (
	"strings"
	"testing"
	"time"
)

func TestFailureMessage(t *testing.T) {
	for _, tc := range []struct {
		f    Failure
		want string
	}{
		{Failure{Message: "the request timed out"}, "the request timed out"},
		{Failure{StatusCode: 429, Code: "rate_limit_error", Message: "slow down", Delay: 20 * time.Second, RequestID: "req_1"},
			"429 rate_limit_error: slow down (retry after 20s) (request-id req_1)"},
		{Failure{StatusCode: 401, Message: "bad key", Hint: "set the key"}, "401 bad key — set the key"},
	} {
		if got := tc.f.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestClipKeepsValidUTF8(t *testing.T) {
	body := []byte("<html>\n  <body>" + strings.Repeat("é", 200) + "</body>")
	got := Clip(body)
	if !strings.HasPrefix(got, "<html> <body>é") || !strings.HasSuffix(got, "…") {
		t.Errorf("Clip = %q", got)
	}
	if n := len(strings.TrimSuffix(got, "…")); n > 300 {
		t.Errorf("clipped to %d bytes, want at most 300", n)
	}
	if !strings.HasSuffix(strings.TrimSuffix(got, "…"), "é") {
		t.Errorf("Clip cut inside a character: %q", got)
	}
}
