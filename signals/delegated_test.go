package signals

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// Ids are part of every stored history and of jobs' idempotency keys:
// they never change.
func TestActionIDs(t *testing.T) {
	const want = "act_h2x7so66p2eqfsrzqt4aepzx"
	if got := ActionID("ses_1/turn_0", "toolu_1"); got != want {
		t.Fatalf("ActionID = %s, want %s", got, want)
	}
	if got := ToolActivityID("toolu_1"); got != "tool/toolu_1" {
		t.Fatalf("ToolActivityID = %s", got)
	}
	if id, ok := ActionIDOfActivity("ses_1/turn_0", ToolActivityID("toolu_1")); !ok || id != want {
		t.Fatalf("ActionIDOfActivity = %s, %v", id, ok)
	}
	for _, c := range [][2]string{{"ses_1/turn_0", "model/1"}, {"", "tool/toolu_1"}} {
		if id, ok := ActionIDOfActivity(c[0], c[1]); ok {
			t.Fatalf("ActionIDOfActivity(%q, %q) = %s", c[0], c[1], id)
		}
	}
}

func TestCompletionPaths(t *testing.T) {
	if got := CompletionURL("https://eve.example.com/", "c.m"); got != "https://eve.example.com/eve/v1/actions/c.m" {
		t.Fatalf("CompletionURL = %s", got)
	}
	for path, want := range map[string]string{
		"/eve/v1/actions/c.m":           "c.m",
		"/eve/v1/actions/c.m/heartbeat": "c.m",
		"/x/eve/v1/actions/c.m":         "c.m",
		"/eve/v1/actions/act_123":       "", // an action id, not a capability
		"/eve/v1/actions/":              "",
		"/eve/v1/session/c.m":           "",
	} {
		prefix, tok, ok := SplitCompletionPath(path)
		if tok != want || ok != (want != "") || ok && !strings.HasSuffix(prefix, "/actions/") {
			t.Errorf("SplitCompletionPath(%q) = %q, %q, %v", path, prefix, tok, ok)
		}
	}
}

func settleType(err error) string {
	var se *SettleError
	if errors.As(err, &se) {
		return se.Type
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

func TestSettleRules(t *testing.T) {
	out := SettleAction{ActionID: "act_1", Output: json.RawMessage(`{"a":1,"b":2}`)}
	sameOut := SettleAction{ActionID: "act_1", Output: json.RawMessage(`{ "b":2, "a":1 }`)}
	otherOut := SettleAction{ActionID: "act_1", Output: json.RawMessage(`{"a":2}`)}
	fail := SettleAction{ActionID: "act_1", Error: &protocol.ActionError{Code: "X", Message: "boom"}}
	tooBig := func(raw json.RawMessage) error {
		if len(raw) > 16 {
			return errors.New("output is too large")
		}
		return nil
	}

	a := ActionState{ActionID: "act_1", Tool: "report", State: ActionPending}
	for _, c := range []struct {
		req  SettleAction
		want string
	}{
		{SettleAction{ActionID: "act_1"}, ErrActionInvalid},
		{SettleAction{ActionID: "act_1", Output: out.Output, Error: fail.Error}, ErrActionInvalid},
		{SettleAction{ActionID: "act_1", Error: &protocol.ActionError{Code: "X"}}, ErrActionInvalid},
		{SettleAction{ActionID: "act_1", Output: json.RawMessage(`{"big":"aaaaaaaaaaaaaaaa"}`)}, ErrActionInvalid},
		{out, ""},
		{fail, ""},
	} {
		if got := settleType(a.CheckSettle(c.req, tooBig)); got != c.want {
			t.Errorf("pending, %+v: %q, want %q", c.req, got, c.want)
		}
	}

	// The first accepted completion settles it; a repeat is a duplicate, a
	// different outcome a conflict.
	if d := a.Settle(out); d.Decision != DecisionComplete || a.State != ActionSettling {
		t.Fatalf("settle: %+v, state %s", d, a.State)
	}
	if d := a.Settle(sameOut); d.Decision != DecisionComplete {
		t.Fatalf("repeat before the activity completed: %+v", d)
	}
	if err := a.CheckSettle(sameOut, tooBig); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if got := settleType(a.CheckSettle(otherOut, tooBig)); got != ErrActionConflict {
		t.Fatalf("other outcome: %q", got)
	}
	// The accepted completion wins over the deadline.
	if a.DeadlineEnds() {
		t.Fatal("the deadline ended a settling action")
	}
	if r := a.Observe(json.RawMessage(`{"eve":"eve.action-result/v1","status":"completed","output":{"a":1,"b":2}}`), tooBig); r.Status != protocol.StatusCompleted || a.State != ActionCompleted {
		t.Fatalf("observe: %+v, state %s", r, a.State)
	}
	if d := a.Settle(sameOut); d.Decision != DecisionDuplicate {
		t.Fatalf("repeat after completion: %+v", d)
	}
	if err := a.LateSettle(sameOut); err != nil {
		t.Fatalf("late repeat: %v", err)
	}
	if got := settleType(a.LateSettle(otherOut)); got != ErrActionConflict {
		t.Fatalf("late other outcome: %q", got)
	}

	// An ended action refuses every completion: 410, never revived.
	b := ActionState{ActionID: "act_2", Tool: "report", State: ActionPending, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if !b.DeadlineEnds() {
		t.Fatal("the deadline did not end a pending action")
	}
	r := b.End(ActionExpired)
	if r.Status != protocol.StatusFailed || r.Error.Code != protocol.CodeDeadlineExceeded || !strings.Contains(r.Error.Message, "2026-01-02T03:04:05Z") {
		t.Fatalf("end: %+v", r.Error)
	}
	if got := settleType(b.CheckSettle(out, nil)); got != ErrActionGone {
		t.Fatalf("after the deadline: %q", got)
	}
	if got := settleType(b.LateSettle(out)); got != ErrActionGone {
		t.Fatalf("late, after the deadline: %q", got)
	}
	if r := (&ActionState{Tool: "report"}).End(ActionCancelled); r.Error.Code != protocol.CodeToolCancelled {
		t.Fatalf("cancelled: %+v", r.Error)
	}

	for typ, status := range map[string]int{ErrActionUnknown: 404, ErrActionConflict: 409, ErrActionGone: 410, ErrActionInvalid: 422} {
		if got, code, ok := SettleHTTP(typ); got != status || code == "" || !ok {
			t.Errorf("SettleHTTP(%s) = %d %q %v", typ, got, code, ok)
		}
	}
	if UnknownAction("act_9").Type != ErrActionUnknown {
		t.Fatal("UnknownAction")
	}
}

// What the activity completed with becomes the call's result.
func TestObserve(t *testing.T) {
	limit := func(raw json.RawMessage) error {
		if strings.Contains(string(raw), "bad") {
			return errors.New("output breaks the schema")
		}
		return nil
	}
	for _, c := range []struct {
		raw        string
		status     string
		code, hash string
	}{
		{`{"rows":1}`, protocol.StatusCompleted, "", "set"}, // a raw task-token completion: the output itself
		{`{"eve":"eve.action-result/v1","status":"failed","error":{"message":"warehouse down"}}`, protocol.StatusFailed, protocol.CodeToolExecution, "set"},
		{`{"eve":"eve.action-result/v1","status":"failed"}`, protocol.StatusFailed, protocol.CodeToolExecution, "set"},
		{`{"bad":true}`, protocol.StatusFailed, protocol.CodeToolOutputInvalid, ""},
	} {
		a := ActionState{ActionID: "act_1", State: ActionPending}
		r := a.Observe(json.RawMessage(c.raw), limit)
		code := ""
		if r.Error != nil {
			code = r.Error.Code
		}
		if r.Status != c.status || code != c.code || (a.Hash != "") != (c.hash != "") || a.State != map[string]string{protocol.StatusCompleted: ActionCompleted, protocol.StatusFailed: ActionFailed}[c.status] {
			t.Errorf("%s: %+v, state %s hash %q", c.raw, r, a.State, a.Hash)
		}
	}
}
