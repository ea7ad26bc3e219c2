package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// searchEnv is the demo agent with eve's search attributes (the inbox's
// too); marked: its API's sessions start with their status set.
func searchEnv(t *testing.T, marked bool) *evetest.Env {
	t.Helper()
	return searchEnvHost(t, marked, agent.Host{SearchAttributes: true, InboxAttributes: true})
}

// searchEnvHost is searchEnv with the worker's host as given (its
// SearchAttributes and InboxAttributes): the namespace has the attributes.
func searchEnvHost(t *testing.T, marked bool, host agent.Host) *evetest.Env {
	t.Helper()
	env := evetest.New(t)
	if err := visibility.Register(env.Ctx(60*time.Second), env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(a, host)
	env.Sessions.SearchAttributes = marked
	return env
}

// upserts lists the search-attribute writes in a workflow's history (the
// SDK's TemporalChangeVersion aside), each as its sorted keys and, for
// EveStatus, its value.
func upserts(t *testing.T, ctx context.Context, c client.Client, wid string) []string {
	t.Helper()
	return upsertsOfRun(t, ctx, c, wid, "")
}

// upsertsOfRun is upserts of one run ("": the latest).
func upsertsOfRun(t *testing.T, ctx context.Context, c client.Client, wid, run string) []string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(ctx, wid, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		f := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
		if len(f) == 0 || (len(f) == 1 && f["TemporalChangeVersion"] != nil) {
			continue
		}
		var keys []string
		for k := range f {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w := fmt.Sprint(keys)
		if p := f["EveStatus"]; p != nil {
			var s string
			_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
			w += " " + s
		}
		out = append(out, w)
	}
	return out
}

// waitQueried waits until a Visibility query lists exactly wids (sorted),
// bounded.
func waitQueried(t *testing.T, env *evetest.Env, query string, wids ...string) {
	t.Helper()
	ctx := env.Ctx(30 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range resp.Executions {
			got = append(got, e.Execution.WorkflowId)
		}
		slices.Sort(got)
		if slices.Equal(got, wids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s lists %v, want %v", query, got, wids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitSessionListed waits until each listing (by {status, tool}) shows session id
// as want says ("status [tools]", or "" for not listed), bounded.
func waitSessionListed(t *testing.T, env *evetest.Env, id string, want map[[2]string]string) {
	t.Helper()
	ctx := env.Ctx(30 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[[2]string]string{}
		for q := range want {
			listed, _, err := env.Sessions.List(ctx, sessions.ListQuery{Status: q[0], Tool: q[1], PageSize: 1000})
			if err != nil {
				t.Fatal(err)
			}
			got[q] = ""
			for _, l := range listed {
				if l.SessionID == id {
					got[q] = fmt.Sprintf("%s %v", l.Status, l.Tools)
				}
			}
		}
		diff := cmp.Diff(want, got)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listings of %s (-want +got):\n%s", id, diff)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Search attributes follow the workflows' state with one write per change
// (changeSearchWrites), an answered park aside (changeParkWrites), and a
// session's status is its running turn's (changeStatusFromTurns): the
// session writes none, marked by its creator (EveSessionId) or not; its
// turn starts marked running and writes its status with the inbox's
// attributes once, when it parks. On a worker without search attributes
// whose sessions are marked (the namespace has them), the turn still writes
// its status, without the inbox's. The listing reads the turns: parked,
// the session lists as waiting-input on its tool; once its turn ends, as
// idle, and the turn leaves the inbox.
func TestSearchAttributesWrittenOncePerChange(t *testing.T) {
	for _, c := range []struct {
		name           string
		marked, worker bool
		session, turn  []string
	}{
		{"marked at start", true, true, nil,
			[]string{"[EveInbox EveParkedAt EveRequestKinds EveRequester EveStatus EveTools] waiting-input"}},
		{"unmarked", false, true, nil,
			[]string{"[EveInbox EveParkedAt EveRequestKinds EveRequester EveStatus EveTools] waiting-input"}},
		{"worker without attributes", true, false, nil,
			[]string{"[EveStatus EveTools] waiting-input"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := searchEnvHost(t, c.marked, agent.Host{SearchAttributes: c.worker, InboxAttributes: c.worker})
			id, d := startParked(t, env, "refund ch_5 5")
			turn := id + "/turn_0"
			waitQueried(t, env, fmt.Sprintf(`EveStatus = "waiting-input" AND EveSessionId = %q AND EveTools = "refund_charge"`, id), turn)
			if c.worker {
				waitQueried(t, env, fmt.Sprintf(`EveInbox = "open" AND EveSessionId = %q`, id), turn)
			}
			waitSessionListed(t, env, id, map[[2]string]string{
				{"waiting-input", "refund_charge"}: "waiting-input [refund_charge]",
				{"", ""}:                           "waiting-input [refund_charge]",
				{"running", ""}:                    "",
				{"idle", ""}:                       "",
			})
			respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
			env.WaitIdle(id)
			waitQueried(t, env, fmt.Sprintf(`WorkflowType = %q AND EveSessionId = %q AND ExecutionStatus = "Running"`, signals.TurnWorkflow, id))
			waitSessionListed(t, env, id, map[[2]string]string{
				{"idle", ""}: "idle []", {"", ""}: "idle []",
				{"running", ""}: "", {"waiting-input", ""}: "", {"", "refund_charge"}: "",
			})
			ctx := env.Ctx(30 * time.Second)
			if diff := cmp.Diff(c.session, upserts(t, ctx, env.Client, id)); diff != "" {
				t.Errorf("session's upserts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.turn, upserts(t, ctx, env.Client, turn)); diff != "" {
				t.Errorf("turn's upserts (-want +got):\n%s", diff)
			}
			// What says that the answered park ran on: the inbox's memo with
			// no open item, or without the inbox the turn's status memo.
			desc, err := env.Client.DescribeWorkflowExecution(ctx, turn, "")
			if err != nil {
				t.Fatal(err)
			}
			memo := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()
			var status signals.StatusMemo
			if f := memo[signals.MemoStatus]; f != nil {
				if err := converter.GetDefaultDataConverter().FromPayload(f, &status); err != nil {
					t.Fatal(err)
				}
			}
			var inbox signals.InboxMemo
			if f := memo[signals.MemoInbox]; f != nil {
				if err := converter.GetDefaultDataConverter().FromPayload(f, &inbox); err != nil {
					t.Fatal(err)
				}
			}
			want := signals.StatusMemo{}
			if !c.worker {
				want.Status = "running"
			}
			if diff := cmp.Diff(want, status); diff != "" {
				t.Errorf("turn's status memo (-want +got):\n%s", diff)
			}
			if got := memo[signals.MemoInbox] != nil; got != c.worker || len(inbox.Items) > 0 {
				t.Errorf("turn's inbox memo present %v with %d open items, want present %v with none", got, len(inbox.Items), c.worker)
			}
		})
	}
}

// TestRecordSearchWrites records only the histories of changeSearchWrites,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordSearchWrites
func TestRecordSearchWrites(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordSearchWrites(t, prefix)
}

// recordSearchWrites: a session marked at its start parks, is approved,
// then runs a second turn; one unmarked parks and is approved.
func recordSearchWrites(t *testing.T, prefix string) {
	t.Helper()
	for _, marked := range []bool{true, false} {
		env := searchEnv(t, marked)
		save := func(name, wid string) {
			if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
				t.Fatal(err)
			}
		}
		id, d := startParked(t, env, "refund ch_7 7")
		respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
		env.WaitIdle(id)
		if marked {
			env.SendAndWait(env.Ctx(30*time.Second), id, "what's the weather in Rome")
			save("session-search-writes", id)
			save("turn-search-writes-approved", id+"/turn_0")
			save("turn-search-writes-regular", id+"/turn_1")
		} else {
			save("session-search-writes-unmarked", id)
		}
	}
}

// A session that continues as new keeps its attributes (EveSessionId,
// from its creator): the new run starts with the last run's, writes none
// (its status is its turns', changeStatusFromTurns), and lists as idle.
func TestSearchAttributesAcrossContinueAsNew(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(60 * time.Second)
	if err := visibility.Register(ctx, env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.ContinueAsNewAfterTurns = 1
	env.StartWorkerHost(a, agent.Host{SearchAttributes: true, InboxAttributes: true})
	env.Sessions.SearchAttributes = true
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "what's the weather in Rome", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.SessionID
	env.SendAndWait(ctx, id, "what's the weather in Oslo")
	env.WaitIdle(id)
	waitQueried(t, env, fmt.Sprintf(`EveSessionId = %q AND ExecutionStatus = "Running" AND WorkflowType = %q`, id, signals.SessionWorkflow), id)
	waitQueried(t, env, fmt.Sprintf(`EveStatus IS NOT NULL AND EveSessionId = %q AND WorkflowType = %q`, id, signals.SessionWorkflow))
	waitSessionListed(t, env, id, map[[2]string]string{{"idle", ""}: "idle []"})
	runs, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf(`WorkflowId = %q`, id)})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs.Executions) < 2 {
		t.Fatalf("session %s lists %d runs, want it continued as new", id, len(runs.Executions))
	}
	for _, e := range runs.Executions {
		if got := upsertsOfRun(t, ctx, env.Client, id, e.Execution.RunId); len(got) > 0 {
			t.Errorf("run %s of the session wrote %v, want no status of its own", e.Execution.RunId, got)
		}
	}
}

// TestRecordParkWrites records only the histories of changeParkWrites,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordParkWrites
func TestRecordParkWrites(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordParkWrites(t, prefix)
}

// recordParkWrites: a session marked at its start parks and is approved
// (the answered park unwritten), runs a regular turn, then parks and is
// approved again (after the session's status memo); one unmarked parks and
// is approved.
func recordParkWrites(t *testing.T, prefix string) {
	t.Helper()
	for _, marked := range []bool{true, false} {
		env := searchEnv(t, marked)
		save := func(name, wid string) {
			if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
				t.Fatal(err)
			}
		}
		id, d := startParked(t, env, "refund ch_7 7")
		respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
		env.WaitIdle(id)
		if !marked {
			save("session-park-writes-unmarked", id)
			continue
		}
		ctx := env.Ctx(60 * time.Second)
		env.SendAndWait(ctx, id, "what's the weather in Rome")
		res, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "refund ch_8 8", Wait: true})
		if err != nil || res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
			t.Fatalf("second park: %+v %v", res.Outcome, err)
		}
		var req protocol.InputRequestedData
		reqs := evetest.Of(env.Events(ctx, id), protocol.InputRequested)
		reqs[len(reqs)-1].Decode(&req)
		respond(t, env, id, protocol.InputResponse{RequestID: req.Requests[0].RequestID, OptionID: "approve"})
		env.WaitIdle(id)
		save("session-park-writes", id)
		save("turn-park-writes-approved", id+"/turn_0")
		save("turn-park-writes-again", id+"/turn_2")
	}
}

// TestRecordTurnVersions records only the histories of changeTurnVersions,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordTurnVersions
func TestRecordTurnVersions(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordTurnVersions(t, prefix)
}

// recordTurnVersions: turns that take their versions from their input, with
// the search attributes and the inbox on: one parks and is approved, one
// answers at once.
func recordTurnVersions(t *testing.T, prefix string) {
	t.Helper()
	env := searchEnv(t, true)
	save := func(name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	id, d := startParked(t, env, "refund ch_9 9")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.WaitIdle(id)
	env.SendAndWait(env.Ctx(30*time.Second), id, "what's the weather in Rome")
	env.WaitIdle(id)
	save("turn-versions-approved", id+"/turn_0")
	save("turn-versions-regular", id+"/turn_1")
	save("turn-versions-session", id)
}

// TestRecordStatusFromTurns records only the histories of
// changeStatusFromTurns, which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordStatusFromTurns
func TestRecordStatusFromTurns(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordStatusFromTurns(t, prefix)
}

// recordStatusFromTurns: a session of Versions 3 with the attributes and
// the inbox parks, is approved, then runs a regular turn; one on a worker
// without attributes, marked by its creator, parks and is approved (its
// turn writes its status, and its status memo once answered). The change's
// subagent histories (a root turn waiting-input on a proxied request) are
// TestSubagentTypedApproval's, recorded with
// EVE_RECORD_PREFIX=v0.5.0-status-from-turns- (its child's turn left out).
func recordStatusFromTurns(t *testing.T, prefix string) {
	t.Helper()
	for _, worker := range []bool{true, false} {
		env := searchEnvHost(t, true, agent.Host{SearchAttributes: worker, InboxAttributes: worker})
		save := func(name, wid string) {
			if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
				t.Fatal(err)
			}
		}
		id, d := startParked(t, env, "refund ch_9 9")
		respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
		env.WaitIdle(id)
		if worker {
			env.SendAndWait(env.Ctx(30*time.Second), id, "what's the weather in Rome")
			save("status-from-turns-session", id)
			save("status-from-turns-turn-approved", id+"/turn_0")
			save("status-from-turns-turn-regular", id+"/turn_1")
		} else {
			save("status-from-turns-plain-session", id)
			save("status-from-turns-plain-turn", id+"/turn_0")
		}
	}
}
