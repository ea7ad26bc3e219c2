package rawsdk

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Shapes: the raw turn above, run the ways a product with sessions could
// run it, with no eve code, to measure what a session costs when each turn
// is a workflow of its own:
//
//   - ShapeSession (eve's shape): the caller sends the message to a session
//     workflow (Update-with-Start); the session starts the turn from a local
//     activity (eagerly), the turn signals its end from a local activity, and
//     the session answers the Update.
//   - ShapeTurnFirst: the caller starts the turn workflow itself and waits
//     for its result; the turn tells the session of its end (signal-with-
//     start from a local activity), off the caller's path. The session no
//     longer serializes turns; this is the floor of any design with a
//     session entity.
//   - ShapeChildTurn: as ShapeSession, but the session runs the turn as a
//     child workflow and reads its result, as eve's session does (a child
//     is started by the server, never eagerly, and its start wakes the
//     parent once more).
type Shape string

const (
	ShapeSession   Shape = "session"
	ShapeTurnFirst Shape = "turn-first"
	ShapeChildTurn Shape = "child-turn"
)

// Names of the shapes' workflows, activities, signal and update.
const (
	SessionWorkflowName = "rawsdk.Session"
	startActivity       = "rawsdk.Start"
	signalActivity      = "rawsdk.Signal"
	signalEnded         = "ended"
	updateSend          = "send"
)

// shapeActivities reach the server from local activities.
type shapeActivities struct{ c client.Client }

type startReq struct {
	ID, TaskQueue string
	Input         TurnInput
}

func (a shapeActivities) Start(ctx context.Context, r startReq) error {
	_, err := a.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.ID, TaskQueue: r.TaskQueue, EnableEagerStart: true}, WorkflowName, r.Input)
	return err
}

type signalReq struct {
	ID, TaskQueue string
	Result        TurnResult
	// WithStart starts the session if it does not run yet.
	WithStart bool
}

func (a shapeActivities) Signal(ctx context.Context, r signalReq) error {
	if r.WithStart {
		_, err := a.c.SignalWithStartWorkflow(ctx, r.ID, signalEnded, r.Result, client.StartWorkflowOptions{ID: r.ID, TaskQueue: r.TaskQueue}, SessionWorkflowName)
		return err
	}
	return a.c.SignalWorkflow(ctx, r.ID, "", signalEnded, r.Result)
}

// RegisterShapes adds the session workflow and the shapes' local
// activities; c must be the client the worker was created with.
func RegisterShapes(w worker.Registry, c client.Client) {
	w.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
	a := shapeActivities{c}
	w.RegisterActivityWithOptions(a.Start, activityOpts(startActivity))
	w.RegisterActivityWithOptions(a.Signal, activityOpts(signalActivity))
}

func localOpts(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
}

// report tells the session of the turn's end, if the turn has one.
func report(ctx workflow.Context, in TurnInput, res TurnResult) error {
	if in.ReportTo == "" {
		return nil
	}
	return workflow.ExecuteLocalActivity(localOpts(ctx), signalActivity, signalReq{
		ID: in.ReportTo, TaskQueue: workflow.GetInfo(ctx).TaskQueueName, Result: res, WithStart: in.ReportStart,
	}).Get(ctx, nil)
}

// SessionWorkflow is an entity that runs turns one at a time (ShapeSession)
// or only hears of them (ShapeTurnFirst). It stays open, as a session does.
func SessionWorkflow(ctx workflow.Context) error {
	ended := workflow.GetSignalChannel(ctx, signalEnded)
	busy, turns := false, 0
	if err := workflow.SetUpdateHandler(ctx, updateSend, func(ctx workflow.Context, in TurnInput) (TurnResult, error) {
		if err := workflow.Await(ctx, func() bool { return !busy }); err != nil {
			return TurnResult{}, err
		}
		busy = true
		defer func() { busy = false }()
		info := workflow.GetInfo(ctx)
		id := fmt.Sprintf("%s/turn_%d", info.WorkflowExecution.ID, turns)
		turns++
		if in.ChildTurn {
			in.ChildTurn = false
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
			var res TurnResult
			err := workflow.ExecuteChildWorkflow(cctx, WorkflowName, in).Get(cctx, &res)
			return res, err
		}
		in.ReportTo = info.WorkflowExecution.ID
		if err := workflow.ExecuteLocalActivity(localOpts(ctx), startActivity, startReq{ID: id, TaskQueue: info.TaskQueueName, Input: in}).Get(ctx, nil); err != nil {
			return TurnResult{}, err
		}
		var res TurnResult
		ended.Receive(ctx, &res)
		return res, nil
	}); err != nil {
		return err
	}
	// ShapeSession: the Update reads the turns' reports. ShapeTurnFirst:
	// they are only noted (each costs the session a workflow task).
	return workflow.Await(ctx, func() bool { return false })
}

// RunShape runs one turn in the shape, under a new session id, and waits
// for its result.
func RunShape(ctx context.Context, c client.Client, taskQueue string, shape Shape, variant Variant, sessionID string) error {
	in := TurnInput{Variant: variant, City: "Lisbon", ChildTurn: shape == ShapeChildTurn}
	var res TurnResult
	switch shape {
	case ShapeSession, ShapeChildTurn:
		start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: sessionID, TaskQueue: taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, SessionWorkflowName)
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions:          client.UpdateWorkflowOptions{WorkflowID: sessionID, UpdateName: updateSend, Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted},
		})
		if err != nil {
			return err
		}
		if err := h.Get(ctx, &res); err != nil {
			return err
		}
	case ShapeTurnFirst:
		in.ReportTo, in.ReportStart = sessionID, true
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sessionID + "/turn_0", TaskQueue: taskQueue}, WorkflowName, in)
		if err != nil {
			return err
		}
		if err := run.Get(ctx, &res); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown shape %q", shape)
	}
	if res.Steps != 3 || res.Text == "" {
		return fmt.Errorf("unexpected turn result %+v", res)
	}
	return nil
}
