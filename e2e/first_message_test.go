package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A session created with its first message in its start request
// (sessions.Service.StartWithMessage, changeFirstMessage): the create is
// answered without a worker (the message is in the start event), the
// message runs as turn 0 once a worker polls, a retry of the create joins
// it (one turn), and a create naming an existing session delivers its
// message to it, as the Update-with-Start always did.
func TestCreateWithMessageInStart(t *testing.T) {
	env := evetest.New(t)
	env.Sessions.StartWithMessage = true
	ctx := env.Ctx(60 * time.Second)
	first := signals.SendRequest{Message: "what's the weather in Rome", DeliveryID: "dlv_first"}

	// No worker yet: the start alone makes the message durable.
	res, err := env.Sessions.CreateAndSendOnce(ctx, "", alice, "upd_first", first)
	if err != nil {
		t.Fatal(err)
	}
	id := res.SessionID
	want := signals.SendResult{SessionID: id, DeliveryID: "dlv_first", TurnID: "turn_0"}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}

	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	evs := env.WaitIdle(id)
	if got := len(evetest.Of(evs, protocol.TurnCompleted)); got != 1 {
		t.Fatalf("turns completed: %d, want 1; events: %s", got, evetest.Join(evs))
	}

	// A retry of the same create (same session, Update and delivery ids)
	// joins the first: the same answer, no second turn.
	again, err := env.Sessions.CreateAndSendOnce(ctx, id, alice, "upd_first", first)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("retried create (-want +got):\n%s", diff)
	}

	// A create naming the existing session with a new message sends it.
	next, err := env.Sessions.CreateAndSendOnce(ctx, id, alice, "upd_next", signals.SendRequest{Message: "and in Oslo?", DeliveryID: "dlv_next"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(signals.SendResult{SessionID: id, DeliveryID: "dlv_next", TurnID: "turn_1", Sequence: 1}, next); diff != "" {
		t.Errorf("create of an existing session (-want +got):\n%s", diff)
	}
	evs = env.WaitIdle(id)
	if got := len(evetest.Of(evs, protocol.TurnCompleted)); got != 2 {
		t.Fatalf("turns completed: %d, want 2; events: %s", got, evetest.Join(evs))
	}
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Turns != 2 || sum.Queued != 0 {
		t.Errorf("summary: %d turns, %d queued; want 2, 0", sum.Turns, sum.Queued)
	}
	// The message the session started with is the first turn's.
	var got []string
	for _, e := range evetest.Of(evs, protocol.MessageReceived) {
		var d struct {
			Message string `json:"message"`
		}
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Message)
	}
	if diff := cmp.Diff([]string{"what's the weather in Rome", "and in Oslo?"}, got); diff != "" {
		t.Errorf("messages received (-want +got):\n%s", diff)
	}

	// Without a delivery id, the Update ID names the delivery as the send
	// Update would, so a retry (by Update: the session exists) joins it.
	sid := sessions.NewID("ses")
	r1, err := env.Sessions.CreateAndSendOnce(ctx, sid, alice, "upd_nodlv", signals.SendRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := env.Sessions.CreateAndSendOnce(ctx, sid, alice, "upd_nodlv", signals.SendRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	wantNoDlv := signals.SendResult{SessionID: sid, DeliveryID: "dlv_upd_nodlv", TurnID: "turn_0"}
	if diff := cmp.Diff([]signals.SendResult{wantNoDlv, wantNoDlv}, []signals.SendResult{r1, r2}); diff != "" {
		t.Errorf("create without a delivery id, retried (-want +got):\n%s", diff)
	}
	if got := len(evetest.Of(env.WaitIdle(sid), protocol.TurnCompleted)); got != 1 {
		t.Errorf("turns completed after a retried create: %d, want 1", got)
	}

	// A message the send validator would refuse takes the Update path,
	// which answers the refusal.
	if _, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "  "}); err == nil {
		t.Error("an empty first message was accepted")
	}
}

// TestRecordFirstMessage records only the history of changeFirstMessage,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordFirstMessage
func TestRecordFirstMessage(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordFirstMessage(t, prefix)
}

// recordFirstMessage: a session started with its first message runs it,
// then a second one sent by Update.
func recordFirstMessage(t *testing.T, prefix string) {
	t.Helper()
	env := evetest.New(t)
	env.Sessions.StartWithMessage = true
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "ses_history_first_message", alice, signals.SendRequest{Message: "what's the weather in Rome"})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitIdle(res.SessionID)
	env.SendAndWait(ctx, res.SessionID, "and in Oslo?")
	if err := writeHistory(ctx, env.Client, res.SessionID, "", filepath.Join(historyDir, prefix+"session-first-message.json")); err != nil {
		t.Fatal(err)
	}
}
