package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
)

// The session's tasks over HTTP (docs/tasks.md, "See and stop tasks"):
// its owner lists them with their progress and stops a working one;
// another principal is refused; a settled task is 409, an unknown one
// 404, and neither records anything. With EVE_RECORD_HISTORIES=1 and
// EVE_RECORD_PREFIX=v0.5.0- it saves the turn (v0.5.0-turn-taskcancel-api.json).
func TestTaskRoutes(t *testing.T) {
	env := evetest.New(t)
	tt := newTaskTools()
	env.StartWorker(tt.agent(t))
	e := newAPIEnv(t, env, func(o *api.Options) { o.Keys = apiTestKeys })
	alice, bob := e.as("key-alice"), e.as("key-bob")
	ctx := env.Ctx(90 * time.Second)

	acc, err := alice.CreateAndSend(ctx, "watch")
	if err != nil {
		t.Fatal(err)
	}
	id := acc.SessionID
	waitTaskEvent(t, env, id, protocol.TurnWaiting, 1)

	// Both work; their tool's progress shows once a heartbeat reached
	// Temporal.
	var listed client.SessionTasks
	deadline := time.Now().Add(15 * time.Second)
	for {
		if listed, err = alice.Tasks(ctx, id); err != nil {
			t.Fatal(err)
		}
		if len(listed.Tasks) == 2 && listed.Tasks[0].Progress != nil && listed.Tasks[1].Progress != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks without progress: %+v", listed)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ignore := cmpopts.IgnoreFields(protocol.TaskInfo{}, "TaskID", "CallID", "Progress")
	want := client.SessionTasks{SessionID: id, TurnID: "turn_0", Tasks: []protocol.TaskInfo{
		{Kind: "tool", Name: "hold", Status: protocol.TaskWorking, TurnID: "turn_0"},
		{Kind: "tool", Name: "hold", Status: protocol.TaskWorking, TurnID: "turn_0"},
	}}
	if diff := cmp.Diff(want, listed, ignore); diff != "" {
		t.Fatalf("tasks (-want +got):\n%s", diff)
	}
	for _, ts := range listed.Tasks {
		if !strings.HasPrefix(ts.TaskID, "hold-") || ts.CallID == "" || ts.Progress.Message == "" {
			t.Errorf("task %+v", ts)
		}
	}
	first, second := listed.Tasks[0].TaskID, listed.Tasks[1].TaskID
	if _, err := bob.Tasks(ctx, id); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob lists alice's tasks: %v", err)
	}

	// hold-11 completes; the model says so and the turn holds for hold-12.
	tt.release("hold-11")
	waitTaskEvent(t, env, id, protocol.TurnWaiting, 2)
	if listed, err = alice.Tasks(ctx, id); err != nil || len(listed.Tasks) != 2 || listed.Tasks[0].Status != protocol.TaskCompleted || listed.Tasks[1].Status != protocol.TaskWorking {
		t.Fatalf("after hold-11: %+v %v", listed, err)
	}
	before := e.log(t, id)
	for _, c := range []struct {
		name   string
		c      *client.Client
		taskID string
		status int
		code   string
	}{
		{"settled", alice, first, http.StatusConflict, api.CodeTaskNotWorking},
		{"unknown", alice, "hold-zzzzzz", http.StatusNotFound, api.CodeTaskNotFound},
		{"another principal", bob, second, http.StatusForbidden, api.CodeForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.c.CancelTask(ctx, id, c.taskID)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != c.status || ce.Code != c.code {
				t.Fatalf("cancel: %v, want %d %s", err, c.status, c.code)
			}
		})
	}
	if after := e.log(t, id); !cmp.Equal(before, after) {
		t.Fatalf("refused cancels changed the log: %d events before, %d after", len(before), len(after))
	}

	// Alice stops hold-12: it settles cancelled (task_cancel), the model
	// reads that it was stopped, and the turn ends.
	res, err := alice.CancelTask(ctx, id, second)
	if err != nil || !res.OK || res.TaskID != second || res.TurnID != "turn_0" || res.Status != protocol.TaskCancelled {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	evs := waitFor(t, env, id, idle(1))
	wantSummary := []string{"started hold", "started hold", "waiting tasks", "settled hold completed", "waiting tasks",
		"settled hold cancelled task_cancel", protocol.TurnCompleted, protocol.SessionWaiting}
	if diff := cmp.Diff(wantSummary, taskSummary(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got, wantReply := lastReply(t, evs), "Other: "+second+" was stopped from outside this conversation"; !strings.HasPrefix(got, wantReply) {
		t.Errorf("reply %q, want %q…", got, wantReply)
	}
	if tt.runCount("hold-12") != 1 {
		t.Errorf("hold-12 ran %d times", tt.runCount("hold-12"))
	}
	saveTaskHistory(t, env, id+"/turn_0", "turn-taskcancel-api")

	// Between turns: no task works, none is kept; a cancel finds none.
	if listed, err = alice.Tasks(ctx, id); err != nil || listed.TurnID != "" || len(listed.Tasks) != 0 {
		t.Fatalf("between turns: %+v %v", listed, err)
	}
	if _, err := alice.CancelTask(ctx, id, second); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("cancel between turns: %v", err)
	}
}
