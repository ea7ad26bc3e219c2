package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// TestRecordAskOnce records only the histories of a policy that stands for
// another tool's Once (approval.AskOnce, 0.4), which TestRecordHistories
// records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.4.0- go test ./e2e -run TestRecordAskOnce
func TestRecordAskOnce(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordAskOnce(t, prefix)
}

// recordAskOnce: refund_charge's policy asks as Once for "refund", as a
// connection set's call tool does for the tool it calls: the first turn
// asks and is approved; the second runs without asking.
func recordAskOnce(t *testing.T, prefix string) {
	t.Helper()
	env := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	refund, _ := a.Tools.Get("refund_charge")
	refund.Approval = approval.Custom(func(c approval.Context) approval.Status {
		if c.IsApproved("refund") {
			return approval.Skip()
		}
		return approval.AskOnce("refund")
	})
	env.StartWorker(a)
	id, d := startParked(t, env, "refund ch_5 5")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	res := env.SendAndWait(env.Ctx(30*time.Second), id, "refund ch_6 6")
	if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("approved once, the second refund must run without asking: %+v", res.Outcome)
	}
	for i, turn := range []string{"turn_0", "turn_1"} {
		name := []string{"turn-ask-once-approved", "turn-ask-once-kept"}[i]
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, id+"/"+turn, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
}
