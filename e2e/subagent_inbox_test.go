package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// depth2Agent is boss → mid → the demo's researcher: `delegate fetch
// <topic>` makes the researcher (a grandchild session) ask to run
// fetch_paper.
func depth2Agent(t *testing.T) *agent.Agent {
	t.Helper()
	researcher, err := demo.Researcher()
	if err != nil {
		t.Fatal(err)
	}
	mid, err := scripted.Parse([]byte(`
name: mid
rules:
  - match: '(?m)^Caller message:\s*(?P<m>\S.*?)$'
    steps:
      - calls: [{tool: researcher, input: {message: "{{m}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "mid: {{task.researcher}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	boss, err := scripted.Parse([]byte(`
name: boss
rules:
  - match: '^delegate (?P<m>.+)$'
    steps:
      - calls: [{tool: mid, input: {message: "{{m}}"}}]
      - calls: [{tool: eve__task_wait, input: {}}]
      - reply: "boss: {{task.mid}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Name: "boss", Model: boss, Tools: tools.NewRegistry(), LocalModel: true,
		Subagents: []*agent.Agent{{Name: "mid", Description: "Passes work to the researcher.", Model: mid, Tools: tools.NewRegistry(), LocalModel: true,
			Subagents: []*agent.Agent{researcher}}}}
}

// agentStarted is the one agent.started of a session's stream, read through
// the API as c (what the console's tree of children reads).
func agentStarted(t *testing.T, ctx context.Context, c *client.Client, id string) protocol.AgentStartedData {
	t.Helper()
	evs, _, err := c.Events(ctx, id, 0)
	if err != nil {
		t.Fatalf("the stream of %s: %v", id, err)
	}
	started := evetest.Of(evs, protocol.AgentStarted)
	if len(started) != 1 {
		t.Fatalf("%d agent.started on %s, want 1: %s", len(started), id, evetest.Join(evs))
	}
	var d protocol.AgentStartedData
	if err := started[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// One inbox for every depth (docs/subagents.md, "People in the loop from
// any depth"): a grandchild's approval (boss → mid → researcher) is listed
// in the inbox under its root session with its path, and settled there,
// once, by the person its policy allows (the root's caller); bob, who may
// not answer it, lists nothing, not even with ?root=, and is refused. The
// decision record of the grandchild names its root and depth, and the
// tree of children the console shows is on each session's stream.
// Recording (EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0-) saves the
// turns of each depth (v0.5.0-turn-subagent-origin-*.json).
func TestSubagentInboxDepth2(t *testing.T) {
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(depth2Agent(t), agent.Host{SearchAttributes: true, InboxAttributes: true})
	e := newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys })
	ctx := e.Ctx(3 * time.Minute)
	alice, bob := e.as("key-alice"), e.as("key-bob")
	start := time.Now().Add(-time.Second)

	turn := parkOver(t, ctx, alice, "", "delegate fetch tidal power")
	root, req := turn.SessionID, turn.Open[0]

	// The tree the console draws: root → mid → researcher, from each
	// session's agent.started; bob may read none of the children.
	mid := agentStarted(t, ctx, alice, root)
	researcher := agentStarted(t, ctx, alice, mid.SessionID)
	if mid.Name != "mid" || researcher.Name != "researcher" {
		t.Fatalf("children %+v, %+v", mid, researcher)
	}
	for _, id := range []string{mid.SessionID, researcher.SessionID} {
		if _, _, err := bob.Events(ctx, id, 0); !client.IsStatus(err, http.StatusForbidden) {
			t.Errorf("bob reading %s: %v, want 403", id, err)
		}
	}

	// Other tests of the package park alice's and bob's requests on the
	// same dev server: this test reads its own root's (?root=), and looks
	// for its request among the rest.
	inboxID := protocol.InboxID(researcher.SessionID, req.RequestID)
	items := waitInbox(t, e, alice, client.InboxFilter{Root: root}, inboxID)
	if !slices.Contains(inboxIDs(inboxAll(t, e, alice, client.InboxFilter{})), inboxID) {
		t.Errorf("alice's whole inbox lacks %s", inboxID)
	}
	want := []protocol.SubagentHop{{Agent: "mid", SessionID: mid.SessionID}, {Agent: "researcher", SessionID: researcher.SessionID}}
	it := items[0]
	if it.SessionID != researcher.SessionID || it.RootSessionID != root || it.Depth != 2 || it.ToolName != "fetch_paper" || it.RequesterPrincipalID != "alice" {
		t.Errorf("item %+v", it)
	}
	if diff := cmp.Diff(want, it.Path); diff != "" {
		t.Errorf("path (-want +got):\n%s", diff)
	}
	// The wire shape, as docs/http-api.md shows it.
	r := e.do(t, "GET", "/eve/v1/inbox?root="+root, nil, bearer("key-alice"))
	if !strings.Contains(string(r.Body), `"rootSessionId":"`+root+`","path":[{"agent":"mid","sessionId":"`+mid.SessionID+`"},{"agent":"researcher","sessionId":"`+researcher.SessionID+`"}],"depth":2`) {
		t.Errorf("GET /eve/v1/inbox: %s", r.Body)
	}
	if out := inboxCLI(t, e, "key-alice", "list", "--root", root); !strings.Contains(out, inboxID+"  tool-approval fetch_paper by alice") ||
		!strings.Contains(out, "in subagent mid → researcher (depth 2) of "+root) {
		t.Errorf("eve inbox list --root:\n%s", out)
	}
	waitInbox(t, e, alice, client.InboxFilter{Root: mid.SessionID}) // mid is not a root
	waitInbox(t, e, alice, client.InboxFilter{SessionID: researcher.SessionID}, inboxID)
	// bob sees nothing of it (no item, so no count), with or without the
	// root.
	for _, f := range []client.InboxFilter{{}, {Root: root}, {SessionID: researcher.SessionID}} {
		for _, it := range inboxAll(t, e, bob, f) {
			if it.RootSessionID == root || it.SessionID == root || it.SessionID == mid.SessionID || it.SessionID == researcher.SessionID {
				t.Errorf("bob's inbox %+v: %+v", f, it)
			}
		}
	}
	if _, err := bob.AnswerInbox(ctx, inboxID, protocol.InboxAnswer{OptionID: "approve"}); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob answering: %v, want 403", err)
	}

	// alice settles it from the inbox: the grandchild decides, the root's
	// turn ends with the reply; a second answer is refused.
	acc, err := alice.AnswerInbox(ctx, inboxID, protocol.InboxAnswer{OptionID: "approve"})
	if err != nil || len(acc.Resolutions) != 1 || acc.Resolutions[0].Outcome != protocol.OutcomeApproved {
		t.Fatalf("alice approves from the inbox: %+v, %v", acc, err)
	}
	evs := e.WaitIdle(root)
	if got, want := lastReply(t, evs), "boss: mid: Fetched: the paper on tidal power (12 pages)"; got != want {
		t.Errorf("reply %q, want %q: %s", got, want, evetest.Join(evs))
	}
	if got := typesOf(evs, protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved); !cmp.Equal(got, []string{protocol.InputRequested, protocol.ApprovalSettled, protocol.InputResolved}) {
		t.Errorf("root %v: %s", got, evetest.Join(evs))
	}
	if _, err := alice.AnswerInbox(ctx, inboxID, protocol.InboxAnswer{OptionID: "approve"}); !client.IsStatus(err, http.StatusConflict) {
		t.Errorf("answering again: %v, want 409", err)
	}
	waitInbox(t, e, alice, client.InboxFilter{Root: root})
	runs := 0
	for _, ev := range evetest.Of(e.WaitIdle(researcher.SessionID), protocol.ActionResult) {
		if strings.Contains(string(ev.Data), "12 pages") {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("fetch_paper ran %d times, want 1", runs)
	}

	// The decision record names the depth: the grandchild's record, and
	// the export across sessions (the subagents' queues included); bob's
	// export holds none of it.
	for _, tc := range []struct {
		name string
		as   *client.Client
		f    client.DecisionFilter
		n    int
	}{
		{"session", alice, client.DecisionFilter{SessionID: researcher.SessionID}, 1},
		{"across sessions", alice, client.DecisionFilter{Since: start}, 1},
		{"bob across sessions", bob, client.DecisionFilter{Since: start}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []protocol.Decision
			if err := tc.as.Decisions(ctx, tc.f, func(d protocol.Decision) error {
				got = append(got, d)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("decisions %+v, want %d", got, tc.n)
			}
			for _, d := range got {
				if d.SessionID != researcher.SessionID || d.RequestID != req.RequestID || d.Outcome != protocol.OutcomeApproved || d.Decider == nil || d.Decider.ID != "alice" ||
					d.RootSessionID != root || d.Depth != 2 || !cmp.Equal(d.Path, want) {
					raw, _ := json.Marshal(d)
					t.Errorf("decision %s", raw)
				}
			}
		})
	}
	saveTaskHistory(t, env, root+"/turn_0", "turn-subagent-origin-root")
	saveTaskHistory(t, env, mid.SessionID+"/turn_0", "turn-subagent-origin-mid")
	saveTaskHistory(t, env, researcher.SessionID+"/turn_0", "turn-subagent-origin-grandchild")
}
