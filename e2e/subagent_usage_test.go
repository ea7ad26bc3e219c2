package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Usage roll-up (docs/subagents.md, "Usage"): a child's token usage counts
// as its parent's. The demo's "ask researcher tidal power": the root
// session's session.waiting says what its own model steps and the
// researcher's spent together, the child's only its own; a later call by
// taskId adds the child's second turn. Recording
// (EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0-) saves the root turn
// and the child session (v0.5.0-turn-subagent-usage.json,
// v0.5.0-session-subagent-usage-child.json).
func TestSubagentUsage(t *testing.T) {
	env := demoEnv(t)
	ctx := env.Ctx(2 * time.Minute)
	id, err := env.Sessions.Create(ctx, "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "ask researcher tidal power", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	ts, child := firstChild(t, id, evs)
	cevs := waitFor(t, env, child, idle(1))

	own, sub := stepUsage(t, evs), stepUsage(t, cevs)
	if sub.InputTokens == 0 || sub.OutputTokens == 0 {
		t.Fatalf("the child reports no usage (%+v): %s", sub, evetest.Join(cevs))
	}
	t.Logf("turn 0: the root's own steps %+v, the researcher's %+v", own, sub)
	if diff := cmp.Diff(sum(own, sub), waitingUsage(t, evs)); diff != "" {
		t.Errorf("the root's session.waiting usage (-want own+child +got):\n%s", diff)
	}
	if diff := cmp.Diff(sub, waitingUsage(t, cevs)); diff != "" {
		t.Errorf("the child's session.waiting usage (-want +got):\n%s", diff)
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-subagent-usage")

	// The child's second turn, through a later call by taskId.
	send(t, env, id, signals.SendRequest{Message: "tell " + ts.TaskID + " dig deeper", Caller: alice})
	evs = waitFor(t, env, id, idle(2))
	cevs = waitFor(t, env, child, idle(2))
	own, sub = stepUsage(t, evs), stepUsage(t, cevs)
	if diff := cmp.Diff(sum(own, sub), waitingUsage(t, evs)); diff != "" {
		t.Errorf("after the continuation, the root's session.waiting usage (-want own+child +got):\n%s", diff)
	}
	saveTaskHistory(t, env, child, "session-subagent-usage-child")
}

// TestSubagentUsageLimit: the child's usage counts against the root's
// session limit. The limit sits above what the root's own model steps
// spend before its last one, below that plus the researcher's: the root
// turn asks to continue (session-limit) before the step that reads the
// researcher's result, which it would not do without the roll-up.
func TestSubagentUsageLimit(t *testing.T) {
	// The scripted models' usage is deterministic: measure it once.
	env := demoEnv(t)
	id, err := env.Sessions.Create(env.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, env, id, signals.SendRequest{Message: "ask researcher tidal power", Caller: alice})
	evs := waitFor(t, env, id, idle(1))
	var ts protocol.TaskStartedData
	_ = evetest.Of(evs, protocol.TaskStarted)[0].Decode(&ts)
	cevs := waitFor(t, env, signals.SubagentSessionID(id, ts.TaskID), idle(1))
	steps := evetest.Of(evs, protocol.StepCompleted)
	before := stepUsage(t, evs[:indexOf(evs, steps[len(steps)-1])]) // all but the last step
	sub := stepUsage(t, cevs)
	limit := before.OutputTokens + sub.OutputTokens // reached only with the child's
	if before.OutputTokens >= limit {
		t.Fatalf("no room for the test: the root's steps before its last spend %d output tokens, the child %d", before.OutputTokens, sub.OutputTokens)
	}

	lenv := evetest.New(t)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.MaxOutputTokensPerSession = limit
	lenv.StartWorker(a)
	id, err = lenv.Sessions.Create(lenv.Ctx(30*time.Second), "", alice)
	if err != nil {
		t.Fatal(err)
	}
	send(t, lenv, id, signals.SendRequest{Message: "ask researcher tidal power", Caller: alice})
	evs = waitFor(t, lenv, id, func(evs []protocol.Event) bool {
		return evs[len(evs)-1].Type == protocol.TurnWaiting || evs[len(evs)-1].Type == protocol.SessionWaiting
	})
	var got []string
	for _, e := range evetest.Of(evs, protocol.InputRequested) {
		var d protocol.InputRequestedData
		_ = e.Decode(&d)
		for _, r := range d.Requests {
			got = append(got, r.Kind+" "+string(r.Action.Input))
		}
	}
	want := []string{protocol.KindSessionLimit + ` {"kind":"output","limit":` + strconv.Itoa(limit) + `,"usedTokens":` + strconv.Itoa(limit) + `}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the root's requests (-want +got):\n%s\n%s", diff, evetest.Join(evs))
	}
}

// stepUsage sums the usage of evs' step.completed events.
func stepUsage(t *testing.T, evs []protocol.Event) protocol.TokenUsage {
	t.Helper()
	var u protocol.TokenUsage
	for _, e := range evetest.Of(evs, protocol.StepCompleted) {
		var d protocol.StepCompletedData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Usage != nil {
			u = u.Add(*d.Usage)
		}
	}
	return u
}

// waitingUsage is the usage of evs' last session.waiting.
func waitingUsage(t *testing.T, evs []protocol.Event) protocol.TokenUsage {
	t.Helper()
	ws := evetest.Of(evs, protocol.SessionWaiting)
	var d protocol.SessionWaitingData
	if err := ws[len(ws)-1].Decode(&d); err != nil || d.Usage == nil {
		t.Fatalf("session.waiting without usage (%v): %s", err, ws[len(ws)-1].Data)
	}
	return *d.Usage
}

func sum(a, b protocol.TokenUsage) protocol.TokenUsage {
	return a.Add(protocol.StepUsage{InputTokens: b.InputTokens, OutputTokens: b.OutputTokens, CacheReadTokens: b.CacheReadTokens, CacheWriteTokens: b.CacheWriteTokens})
}

func indexOf(evs []protocol.Event, e protocol.Event) int {
	for i := range evs {
		if evs[i].Meta.ID == e.Meta.ID {
			return i
		}
	}
	return len(evs)
}
