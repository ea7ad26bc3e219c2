package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
)

// The anatomy of a park (-anatomy N): where a park's Temporal CPU goes.
// Raw-SDK workflows rebuild the shape eve's park had with child turns
// (before version direct-turns) piece by piece, and N parks of each are
// measured for Temporal and worker CPU per park. eve's park now is 3
// workflow tasks and 21 events (the -n run prints it; cmd/bench's
// raw-session rows rebuild that shape):
//
//	one workflow     Update-with-Start; one workflow task runs the model
//	                 step (a local activity) and answers the Update, parked
//	+ markers        the same, plus what eve's session records in its first
//	                 task: a side effect, 3 version markers (each with its
//	                 TemporalChangeVersion upsert) and a memo upsert
//	session + child  the session starts the turn as a child; the turn runs
//	                 the step and signals the session, which answers the
//	                 Update: 5 workflow tasks, without the markers
//	child + markers  session + child with the markers (the turn has 2
//	                 version markers): 37 history events, eve's park then
//
// The differences between rows are what the removable pieces cost.

type anatomyInput struct {
	Markers bool // the session's side effect, versions and memo; the turn's versions
	Child   bool // run the step in a child workflow that signals back
}

const (
	anatomyUpdate = "send"
	anatomySignal = "parked"
)

func anatomyStep(ctx context.Context) (string, error) { return "parked", nil }

func anatomySession(ctx workflow.Context, in anatomyInput) error {
	parked := false
	if err := workflow.SetUpdateHandler(ctx, anatomyUpdate, func(ctx workflow.Context, msg string) (string, error) {
		if err := workflow.Await(ctx, func() bool { return parked }); err != nil {
			return "", err
		}
		return "waiting", nil
	}); err != nil {
		return err
	}
	if in.Markers {
		var cfg string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return "config" }).Get(&cfg); err != nil {
			return err
		}
		for _, id := range []string{"anatomy-a", "anatomy-b", "anatomy-c"} {
			workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1)
		}
		if err := workflow.UpsertMemo(ctx, map[string]any{"agent": "park"}); err != nil {
			return err
		}
	}
	if in.Child {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/turn"})
		workflow.ExecuteChildWorkflow(cctx, anatomyTurn, in)
		workflow.GetSignalChannel(ctx, anatomySignal).Receive(ctx, nil)
	} else {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
		if err := workflow.ExecuteLocalActivity(lctx, anatomyStep).Get(ctx, nil); err != nil {
			return err
		}
	}
	parked = true
	// Parked until the bench ends (as eve's sessions wait for an answer).
	return workflow.Await(ctx, func() bool { return false })
}

func anatomyTurn(ctx workflow.Context, in anatomyInput) error {
	if in.Markers {
		for _, id := range []string{"anatomy-d", "anatomy-e"} {
			workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1)
		}
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if err := workflow.ExecuteLocalActivity(lctx, anatomyStep).Get(ctx, nil); err != nil {
		return err
	}
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if err := workflow.SignalExternalWorkflow(ctx, parent.ID, "", anatomySignal, nil).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// anatomyRounds is how many batches each shape's parks are split into.
const anatomyRounds = 5

// runAnatomy measures n parks of each shape on its own dev server.
func runAnatomy(ctx context.Context, n, conc int) error {
	srv, c, stop, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer stop()
	tq := fmt.Sprintf("anatomy-%d", time.Now().UnixNano())
	w := worker.New(c, tq, workerOptions())
	w.RegisterWorkflow(anatomySession)
	w.RegisterWorkflow(anatomyTurn)
	w.RegisterActivity(anatomyStep)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	shapes := []struct {
		name string
		in   anatomyInput
	}{
		{"one workflow", anatomyInput{}},
		{"+ markers", anatomyInput{Markers: true}},
		{"session + child", anatomyInput{Child: true}},
		{"child + markers", anatomyInput{Markers: true, Child: true}},
	}
	fmt.Printf("\nanatomy of a park (raw SDK rebuilding eve's park with child turns), %d parks per shape at concurrency %d, in %d alternating rounds:\n", n, conc, anatomyRounds)
	fmt.Printf("%-16s %-8s %-8s %-8s %-10s %s\n", "shape", "events", "tasks", "actions", "parked/s", "CPU ms per park: server + worker&client")
	var seq atomic.Int64
	park := func(ctx context.Context, in anatomyInput) (string, error) {
		id := fmt.Sprintf("%s-%d", tq, seq.Add(1))
		start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: tq,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, anatomySession, in)
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: anatomyUpdate, Args: []any{"hello"},
				WaitForStage: client.WorkflowUpdateStageCompleted},
		})
		if err != nil {
			return "", err
		}
		var out string
		if err := h.Get(ctx, &out); err != nil || out != "waiting" {
			return "", fmt.Errorf("park %s: %q %v", id, out, err)
		}
		return id, nil
	}
	// A few untimed parks of each shape first (worker caches, pollers).
	for _, s := range shapes {
		for range 5 {
			if _, err := park(ctx, s.in); err != nil {
				return err
			}
		}
	}
	// Then rounds: a batch of each shape in turn, so that load from other
	// processes and the server's growing state hit every shape alike.
	type total struct {
		parks        int
		wall         time.Duration
		server, self time.Duration
		last         string
	}
	totals := make([]total, len(shapes))
	batch := max(conc, n/anatomyRounds)
	for done := 0; done < n; done += batch {
		size := min(batch, n-done)
		for i, s := range shapes {
			cpu := benchkit.StartCPU(srv.PID())
			t0 := time.Now()
			var next atomic.Int64
			var firstErr error
			var once sync.Once
			var last atomic.Value
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for next.Add(1) <= int64(size) {
						cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
						id, err := park(cctx, s.in)
						cancel()
						if err != nil {
							once.Do(func() { firstErr = err })
							return
						}
						last.Store(id)
					}
				})
			}
			wg.Wait()
			if firstErr != nil {
				return fmt.Errorf("%s: %w", s.name, firstErr)
			}
			t := &totals[i]
			t.wall += time.Since(t0)
			srvCPU, selfCPU, _ := cpu.Delta()
			t.server += srvCPU
			t.self += selfCPU
			t.parks += size
			t.last = last.Load().(string)
		}
	}
	for i, s := range shapes {
		t := totals[i]
		h, err := benchkit.CountHops(ctx, c, []string{t.last}, nil)
		if err != nil {
			return err
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(t.parks) }
		fmt.Printf("%-16s %-8d %-8d %-8d %-10.1f %.1f + %.1f\n", s.name, h.Events, h.Tasks, h.Actions,
			float64(t.parks)/t.wall.Seconds(), ms(t.server), ms(t.self))
	}
	return nil
}
