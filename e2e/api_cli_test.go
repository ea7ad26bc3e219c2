package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// eveBinary builds cmd/eve into the test's temp dir (the build cache
// makes this quick after the first time).
func eveBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eve")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/eve-temporal/eve/cmd/eve").CombinedOutput(); err != nil {
		t.Fatalf("build cmd/eve: %v\n%s", err, out)
	}
	return bin
}

// eveCLI runs `eve session ...` against the env's API server.
func (e *apiEnv) eveCLI(t *testing.T, bin, key string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(e.Ctx(60*time.Second), bin, append([]string{"session"}, args...)...)
	cmd.Env = append(os.Environ(), "EVE_URL="+e.URL, "EVE_API_KEY="+key)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// The `eve session` commands work against the API server by URL and key.
func TestAPICLISession(t *testing.T) {
	e := keyedAPI(t, nil)
	bin := eveBinary(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := e.eveCLI(t, bin, "key-alice", args...)
		if err != nil {
			t.Fatalf("eve session %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := run("send", "what's the weather in Paris")
	m := regexp.MustCompile(`^session (ses_\w+)  turn_0\n`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, `→ get_weather {"city":"Paris"}`) || !strings.Contains(out, "← get_weather") || !strings.Contains(out, "in Paris.") {
		t.Fatalf("send:\n%s", out)
	}
	id := m[1]

	// A turn that parks on an approval, listed by pending, approved by approve.
	out = run("send", "--session", id, "refund ch_4 for 4")
	if !strings.Contains(out, "[tool-approval] Refund $4.00 for charge ch_4?") || !strings.Contains(out, "(waiting on input)") || !strings.Contains(out, "eve session approve "+id) {
		t.Fatalf("parked send:\n%s", out)
	}
	out = run("pending", id)
	if !strings.Contains(out, "turn_1  refund_charge") || !strings.Contains(out, "approve: Approve") {
		t.Fatalf("pending:\n%s", out)
	}
	if out, err := e.eveCLI(t, bin, "key-bob", "approve", id); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("bob's approve should be refused:\n%s", out)
	}
	out = run("approve", id)
	if !strings.Contains(out, "approved") || !strings.Contains(out, "Refund of ch_4: 4") {
		t.Fatalf("approve:\n%s", out)
	}
	if out := run("pending", id); !strings.Contains(out, "no open input requests") {
		t.Fatalf("pending after approve:\n%s", out)
	}

	// Deny with a reason, and respond to a question with typed text.
	run("send", "--session", id, "refund ch_5 for 5")
	out = run("deny", id, "--reason", "not this one")
	if !strings.Contains(out, "denied") {
		t.Fatalf("deny:\n%s", out)
	}
	run("send", "--session", id, "choose a plan")
	pending := run("pending", id, "--json")
	var req struct {
		RequestID string `json:"requestId"`
	}
	json.Unmarshal([]byte(pending), &req)
	out = run("respond", id, req.RequestID, "--text", "Pro")
	if !strings.Contains(out, "You picked pro.") {
		t.Fatalf("respond --text Pro (a label):\n%s", out)
	}

	// events prints JSON lines, the same the stream replays.
	out = run("events", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := e.snapshot(t, id)
	if len(lines) != len(want) {
		t.Fatalf("events printed %d lines, the session has %d events", len(lines), len(want))
	}
	for i, l := range lines {
		var ev protocol.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Meta.ID != want[i].Meta.ID {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
	}
	if out := run("events", id, "--from", "-2"); strings.Count(out, "\n") != 2 {
		t.Fatalf("events --from -2:\n%s", out)
	}
	if out := run("cancel", id); strings.TrimSpace(out) != "no_active_turn" {
		t.Fatalf("cancel:\n%s", out)
	}
	if out, err := e.eveCLI(t, bin, "", "events", id); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("events without a key:\n%s", out)
	}
}
