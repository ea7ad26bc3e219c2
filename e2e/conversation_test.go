package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	evecl "github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

const echoRules = `
rules:
  - match: "^short"
    reply: "short answer"
  - match: "^(\\w+)"
    reply: "got {{1}}"
`

// bigMessage is n bytes of text starting with a word that names it.
func bigMessage(name string, n int) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(" ")
	for b.Len() < n {
		b.WriteString("lorem ipsum dolor sit amet, consectetur adipiscing elit. ")
	}
	return b.String()[:n]
}

// Twelve messages of 200 KB through the HTTP API, sent back to back with
// turnPolicy queue, then a short one: every message is accepted, gets its
// turn, and its event carries the whole text.
func TestAPILargeMessagesAllAnswered(t *testing.T) {
	env := evetest.New(t)
	env.StartWorker(evetest.Agent(t, echoRules))
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(3 * time.Minute)

	id, err := e.C.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range 12 {
		msg := bigMessage(fmt.Sprintf("m%02d", i), 200<<10)
		// queue: each message gets its own turn (the default, steer, would
		// hand them to the running turn).
		r := e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"message": msg, "turnPolicy": "queue"}, nil)
		if r.Status != http.StatusAccepted {
			t.Fatalf("message %d: %d %s", i, r.Status, r.Body)
		}
		sent = append(sent, msg)
	}
	r := e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"message": "short one", "turnPolicy": "queue"}, nil)
	var acc evecl.Accepted
	if err := json.Unmarshal(r.Body, &acc); err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("short message: %d %s", r.Status, r.Body)
	}
	turn, err := e.C.WaitTurn(ctx, id, acc.DeliveryID, 0, nil)
	if err != nil || turn.Status != evecl.TurnCompleted || turn.Reply != "short answer" {
		t.Fatalf("short message after the large ones: %+v, %v", turn, err)
	}
	sent = append(sent, "short one")

	evs := e.snapshot(t, id)
	received := evetest.Of(evs, protocol.MessageReceived)
	if len(received) != len(sent) {
		t.Fatalf("%d message.received for %d messages sent", len(received), len(sent))
	}
	for i, ev := range received {
		var d protocol.MessageReceivedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Message != sent[i] {
			t.Fatalf("message %d: received %d bytes, sent %d", i, len(d.Message), len(sent[i]))
		}
	}
	replies := evetest.Of(evs, protocol.MessageCompleted)
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != len(sent) || len(replies) != len(sent) {
		t.Fatalf("%d turns completed, %d replies, for %d messages: %s", n, len(replies), len(sent), evetest.Join(evs))
	}
	for i := range 12 {
		var d protocol.MessageCompletedData
		json.Unmarshal(replies[i].Data, &d)
		if want := fmt.Sprintf("got m%02d", i); d.Message != want {
			t.Fatalf("reply %d = %q, want %q", i, d.Message, want)
		}
	}
}

// A conversation that reaches its share of the context window is
// compacted before the next model step, and the stream says so; /compact
// compacts on demand.
func TestAutomaticCompaction(t *testing.T) {
	env := evetest.New(t)
	a := evetest.Agent(t, echoRules)
	a.ContextWindow = 20_000 // tokens: about 80 KB of conversation
	env.StartWorker(a)
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	var compactedIn []int
	for i := range 6 {
		r := env.SendAndWait(ctx, id, bigMessage(fmt.Sprintf("n%d", i), 30<<10))
		if r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != fmt.Sprintf("got n%d", i) {
			t.Fatalf("turn %d: %+v", i, r.Outcome)
		}
		evs, err := env.Sessions.Events(ctx, id, r.Outcome.FirstEvent)
		if err != nil {
			t.Fatal(err)
		}
		if req := evetest.Of(evs, protocol.CompactionRequested); len(req) > 0 {
			compactedIn = append(compactedIn, i)
			want := "turn.started message.received compaction.requested compaction.completed step.started"
			if got := evetest.Join(evs[:5]); got != want {
				t.Fatalf("turn %d: %s, want %s", i, got, want)
			}
			var before, after protocol.CompactionData
			json.Unmarshal(req[0].Data, &before)
			json.Unmarshal(evetest.Of(evs, protocol.CompactionCompleted)[0].Data, &after)
			// The turn's own 30 KB message stays; the rest becomes a summary.
			if *before.UsageInputTokens < 18_000 || *after.UsageInputTokens >= 9_000 || before.TurnID != r.TurnID {
				t.Fatalf("turn %d: compaction from %d to %d tokens (%+v)", i, *before.UsageInputTokens, *after.UsageInputTokens, before)
			}
		}
	}
	// 30 KB a message: the third turn reaches 90% of 80 KB, and so on.
	if len(compactedIn) < 2 || compactedIn[0] != 2 {
		t.Fatalf("compacted in turns %v, want from turn 2 on", compactedIn)
	}
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil || sum.Conversation == nil || sum.Conversation.Tokens() >= 20_000 {
		t.Fatalf("summary %+v, %v", sum.Conversation, err)
	}

	// /compact: the conversation becomes one summary message.
	if _, err := env.Sessions.Control(ctx, id, signals.ControlRequest{Op: signals.ControlCompact}); err != nil {
		t.Fatal(err)
	}
	sum, err = env.Sessions.Summary(ctx, id)
	if err != nil || sum.Conversation == nil || sum.Conversation.Messages != 1 {
		t.Fatalf("after /compact: %+v, %v", sum.Conversation, err)
	}
	msgs, err := conversation.New(env.Server.PayloadStore()).Load(ctx, *sum.Conversation)
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0].Text, "were compacted") {
		t.Fatalf("compacted conversation %+v, %v", msgs, err)
	}
	evs := env.Events(ctx, id)
	if last := evetest.Types(evs[len(evs)-2:]); last[0] != protocol.CompactionRequested || last[1] != protocol.CompactionCompleted {
		t.Fatalf("stream ends %v", last)
	}
	r := env.SendAndWait(ctx, id, "short after compact")
	if r.Outcome.Reply != "short answer" {
		t.Fatalf("after /compact: %+v", r.Outcome)
	}
}

// A session of many turns, each adding 200 KB, keeps answering, and no
// workflow's history (session runs and turns) reaches 5 MB.
// EVE_LONG_SESSION_TURNS sets the number of turns (default 1,000).
func TestLongSessionOfLargeMessages(t *testing.T) {
	turns := 1000
	if v, err := strconv.Atoi(os.Getenv("EVE_LONG_SESSION_TURNS")); err == nil && v > 0 {
		turns = v
	}
	env := evetest.New(t)
	a := evetest.Agent(t, echoRules)
	// Hundreds of 200 KB turns pass the default 40M-token input budget,
	// which would park the session on its Continue prompt (limits_test.go).
	a.MaxInputTokensPerSession = -1
	a.ContextWindow = 200_000 // the default, which the conversation stays within
	env.StartWorker(a)
	ctx := env.Ctx(30 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	compactions := 0
	for i := range turns {
		r := env.SendAndWait(ctx, id, bigMessage(fmt.Sprintf("t%d", i), 200<<10))
		if r.Outcome == nil || r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != fmt.Sprintf("got t%d", i) {
			t.Fatalf("turn %d: %+v", i, r.Outcome)
		}
		evs, err := env.Sessions.Events(ctx, id, r.Outcome.FirstEvent)
		if err != nil {
			t.Fatalf("events of turn %d: %v", i, err)
		}
		compactions += len(evetest.Of(evs, protocol.CompactionCompleted))
	}
	t.Logf("%d turns of 200 KB in %s", turns, time.Since(start).Round(time.Second))
	r := env.SendAndWait(ctx, id, "short at the end")
	if r.Outcome.Reply != "short answer" {
		t.Fatalf("last turn: %+v", r.Outcome)
	}
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil || sum.Turns != turns+1 || sum.Conversation == nil || sum.Conversation.Tokens() > a.ContextWindow {
		t.Fatalf("summary: %d turns, conversation %+v, %v", sum.Turns, sum.Conversation, err)
	}
	// 200 KB a turn, 800 KB of context window: compacted every few turns.
	if turns >= 10 && compactions < turns/5 {
		t.Fatalf("%d compactions in %d turns of 200 KB", compactions, turns)
	}
	t.Logf("%d compactions", compactions)

	// Every run of the session and every turn stays small.
	const limit = 5 << 20
	runs := sessionRuns(t, ctx, env.Client, id)
	if turns >= 100 && len(runs) < 2 {
		t.Fatalf("the session never continued as new in %d turns", turns)
	}
	var biggest int64
	for _, run := range runs {
		d, err := env.Client.DescribeWorkflowExecution(ctx, id, run)
		if err != nil {
			t.Fatal(err)
		}
		size := d.WorkflowExecutionInfo.HistorySizeBytes
		if size >= limit {
			t.Fatalf("session run %s: history %d bytes (%d events)", run, size, d.WorkflowExecutionInfo.HistoryLength)
		}
		biggest = max(biggest, size)
	}
	t.Logf("%d session runs, the largest history %d bytes", len(runs), biggest)
	biggest = 0
	for i := 0; i <= turns; i++ {
		d, err := env.Client.DescribeWorkflowExecution(ctx, fmt.Sprintf("%s/turn_%d", id, i), "")
		if err != nil {
			t.Fatal(err)
		}
		if size := d.WorkflowExecutionInfo.HistorySizeBytes; size >= limit {
			t.Fatalf("turn %d: history %d bytes", i, size)
		} else {
			biggest = max(biggest, size)
		}
	}
	t.Logf("the largest turn history: %d bytes", biggest)
}

// A session with signals.MaxQueuedMessages messages waiting refuses the
// next with 429 and Retry-After (nothing recorded); every message it
// accepted gets its turn.
func TestAPIQueueFullIsTooManyRequests(t *testing.T) {
	env := evetest.New(t)
	started := make(chan struct{}, 1)
	env.StartWorker(blockingAgent(t, started))
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(3 * time.Minute)
	acc, err := e.C.CreateAndSend(ctx, "block")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the first turn's tool never started")
	}
	for i := range signals.MaxQueuedMessages {
		r := e.do(t, "POST", "/eve/v1/session/"+acc.SessionID, map[string]any{"message": fmt.Sprintf("short %d", i), "turnPolicy": "queue"}, nil)
		if r.Status != http.StatusAccepted {
			t.Fatalf("message %d: %d %s", i, r.Status, r.Body)
		}
	}
	r := e.do(t, "POST", "/eve/v1/session/"+acc.SessionID, map[string]any{"message": "one too many", "turnPolicy": "queue"}, nil)
	wantError(t, r, http.StatusTooManyRequests, "session_busy", "MaxQueuedMessages")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if _, err := e.C.Cancel(ctx, acc.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	// All the accepted messages run; the refused one never does.
	var evs []protocol.Event
	deadline := time.Now().Add(2 * time.Minute)
	for {
		evs = e.snapshot(t, acc.SessionID)
		if len(evetest.Of(evs, protocol.TurnCompleted)) == signals.MaxQueuedMessages || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := len(evetest.Of(evs, protocol.TurnCompleted)); n != signals.MaxQueuedMessages {
		t.Fatalf("%d of %d queued messages completed", n, signals.MaxQueuedMessages)
	}
	for _, ev := range evetest.Of(evs, protocol.MessageReceived) {
		if strings.Contains(string(ev.Data), "one too many") {
			t.Fatal("the refused message ran")
		}
	}
}

// sessionRuns lists a workflow's runs, the latest first: each run's start
// event names the run it continued.
func sessionRuns(t *testing.T, ctx context.Context, c client.Client, id string) []string {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for run := desc.WorkflowExecutionInfo.Execution.RunId; run != ""; {
		runs = append(runs, run)
		start, err := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).Next()
		if err != nil {
			t.Fatalf("history of run %s: %v", run, err)
		}
		run = start.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	return runs
}
