package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/signals"
)

// written lists the keys k has put that are not in before.
func (k *keyLog) written(before map[string]bool) map[string]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]bool{}
	for key := range k.put {
		if !before[key] {
			out[key] = true
		}
	}
	return out
}

// A fleet mid-rollout: a worker that writes eve 0.4's layout
// (EVE_CONVERSATION_FORMAT=objects) runs a session's first turn, then a
// worker with the default runs its second. Each writes its own layout,
// and the second reads the first's conversation whole.
func TestConversationFormatsAcrossWorkers(t *testing.T) {
	env := evetest.New(t)
	store := &keyLog{Store: env.Server.PayloadStore(), put: map[string]bool{}, foreign: map[string]bool{}}
	stop := env.StartWorkerHost(evetest.Agent(t, echoRules), agent.Host{Store: store, ConversationFormat: conversation.FormatObjects})
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	if r := env.SendAndWait(ctx, id, "first"); r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != "got first" {
		t.Fatalf("turn 0: %+v", r.Outcome)
	}
	first := store.written(nil)
	stop()
	defer env.StartWorkerHost(evetest.Agent(t, echoRules), agent.Host{Store: store})()
	if r := env.SendAndWait(ctx, id, "second"); r.Outcome.Status != signals.TurnStatusCompleted || r.Outcome.Reply != "got second" {
		t.Fatalf("turn 1: %+v", r.Outcome)
	}
	second := store.written(first)
	count := func(keys map[string]bool, part string) int {
		c := 0
		for k := range keys {
			if strings.Contains(k, part) {
				c++
			}
		}
		return c
	}
	// 0.4's layout: the message and the answer, then their manifest.
	if got := [2]int{count(first, "/messages/"), count(first, "/conversations/")}; got != [2]int{2, 1} {
		t.Fatalf("objects worker wrote %v (messages, manifests): %v", got, first)
	}
	// The inline layout: one object for the step, its messages inside.
	if got := [3]int{count(second, "/messages/"), count(second, "/conversations/"), count(second, "/conversation-")}; got != [3]int{0, 0, 1} {
		t.Fatalf("inline worker wrote %v (messages, old manifests, new manifests): %v", got, second)
	}
	sum, err := env.Sessions.Summary(ctx, id)
	if err != nil || sum.Conversation == nil {
		t.Fatalf("summary: %+v, %v", sum, err)
	}
	msgs, err := conversation.New(env.Server.PayloadStore()).Load(ctx, *sum.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text)
	}
	if got, want := strings.Join(texts, "|"), "first|got first|second|got second"; got != want {
		t.Fatalf("conversation %q, want %q", got, want)
	}
}
