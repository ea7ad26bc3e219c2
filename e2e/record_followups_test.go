package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// TestRecordFollowUps records only the histories of deadlines' follow-ups
// (0.4), which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.4.0- go test ./e2e -run TestRecordFollowUps
func TestRecordFollowUps(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordFollowUps(t, prefix)
}

// recordFollowUps: a call's own deadline with reminders, answered before
// them (parked with a deadline); the same left unanswered (reminded, then
// expired); an approval that escalated and the second group settled, with
// the inbox publishing the escalation.
func recordFollowUps(t *testing.T, prefix string) {
	t.Helper()
	followUpEnv := func(inbox bool, edit func(*agent.Agent, *tools.Tool)) *evetest.Env {
		env := evetest.New(t)
		if inbox {
			if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
				t.Fatal(err)
			}
		}
		a, err := demo.Agent()
		if err != nil {
			t.Fatal(err)
		}
		var n noticeLog
		a.OnReminder = n.hook
		refund, _ := a.Tools.Get("refund_charge")
		edit(a, refund)
		env.StartWorkerHost(a, agent.Host{SearchAttributes: inbox, InboxAttributes: inbox})
		return env
	}
	save := func(env *evetest.Env, name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		answer bool
	}{{"turn-request-deadline-answered", true}, {"turn-request-deadline-reminded", false}} {
		env := followUpEnv(false, func(a *agent.Agent, refund *tools.Tool) {
			refund.Approval = refund.Approval.WithDeadline(func(approval.PromptContext) time.Duration { return 3 * time.Second })
			refund.InputReminders = &tools.Reminders{Every: time.Second}
		})
		id, d := startParked(t, env, "refund ch_3 3")
		if c.answer {
			respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
		} else {
			waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.InputReminder)) >= 2 })
		}
		env.WaitIdle(id)
		save(env, c.name, id+"/turn_0")
	}
	env := followUpEnv(true, func(a *agent.Agent, refund *tools.Tool) {
		refund.Approval = refund.Approval.EscalateAfter(time.Second, "role", "manager")
	})
	id, d := startParked(t, env, "refund ch_4 4")
	waitFor(t, env, id, func(evs []protocol.Event) bool { return len(evetest.Of(evs, protocol.ApprovalEscalated)) == 1 })
	manager := &auth.Principal{ID: "manager", Type: "user", Attributes: map[string]string{"role": "manager"}}
	if _, err := env.Sessions.Respond(env.Ctx(30*time.Second), id, signals.RespondRequest{Responses: []protocol.InputResponse{{RequestID: d.Requests[0].RequestID, OptionID: "approve"}}, Responder: manager, Wait: true}); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle(id)
	save(env, "turn-escalated", id+"/turn_0")
}
