// Package rawsdk is the project's performance baseline: an agent turn written
// directly against the Temporal Go SDK, with no eve code. A turn is
//
//	model activity → tool activity → model activity
//
// where the "model" is scripted (first a tool call, then the answer) and the
// tool is a trivial weather lookup, so the numbers measure Temporal's own
// dispatch cost. The park variant waits for an Update "respond" between the
// first model call and the tool, as a client tool or an approval does in eve.
//
// cmd/bench and the Go benchmarks in this package both use it.
package rawsdk

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Variant selects how the turn's activities run.
type Variant string

const (
	// Regular activities go through the history transfer queue and matching,
	// with eager execution explicitly disabled.
	Regular Variant = "regular"
	// Local activities run inside the workflow task on the same worker.
	Local Variant = "local"
	// Eager activities are regular activities that may be handed to the worker
	// in the response to its workflow task completion. The server must allow
	// it (system.enableActivityEagerExecution=true, part of
	// devserver.TuningFast); otherwise this behaves like Regular.
	Eager Variant = "eager"
)

// Variants lists all variants, in table order.
var Variants = []Variant{Regular, Eager, Local}

// Names used on the wire.
const (
	WorkflowName   = "rawsdk.Turn"
	ModelActivity  = "rawsdk.Model"
	ToolActivity   = "rawsdk.Weather"
	ToolWorkflow   = "rawsdk.WeatherWorkflow"
	UpdateRespond  = "respond"
	QueryParked    = "parked"
	workflowPrefix = "rawsdk-"
)

// TurnInput is the workflow's input.
type TurnInput struct {
	Variant Variant `json:"variant"`
	// Park waits for the "respond" Update after the first model call.
	Park bool `json:"park,omitempty"`
	// ReportTo is a session (shapes.go) the turn signals when it ends, from
	// a local activity; ReportStart starts it if needed.
	ReportTo    string `json:"reportTo,omitempty"`
	ReportStart bool   `json:"reportStart,omitempty"`
	City        string `json:"city"`
	// ChildTool runs the tool as a child workflow (ToolWorkflow, which runs
	// the tool activity as a regular activity) instead of an activity: the
	// shape of an eve workflow tool.
	ChildTool bool `json:"childTool,omitempty"`
	// ChildTurn asks the session to run the turn as its child workflow
	// (ShapeChildTurn); the turn itself ignores it.
	ChildTurn bool `json:"childTurn,omitempty"`
	// Task runs the tool as a task: the tool activity is started and not
	// awaited, the model is called again (it says the work started), then
	// the turn awaits the tool and calls the model with its result: the
	// shape of an eve task call (tools.AsTask).
	Task bool `json:"task,omitempty"`
}

// TurnResult is the workflow's result.
type TurnResult struct {
	Text      string `json:"text"`
	Responder string `json:"responder,omitempty"`
	Steps     int    `json:"steps"`
}

// ModelRequest is the scripted model's input.
type ModelRequest struct {
	Step        int          `json:"step"`
	City        string       `json:"city"`
	ToolResult  *WeatherResp `json:"toolResult,omitempty"`
	Approved    bool         `json:"approved,omitempty"`
	Interaction string       `json:"interaction,omitempty"`
}

// ModelResponse is the scripted model's output: a tool call, then text.
type ModelResponse struct {
	ToolCall *WeatherReq `json:"toolCall,omitempty"`
	Text     string      `json:"text,omitempty"`
}

// WeatherReq is the tool's input.
type WeatherReq struct {
	City string `json:"city"`
}

// WeatherResp is the tool's output.
type WeatherResp struct {
	City    string  `json:"city"`
	TempC   float64 `json:"tempC"`
	Summary string  `json:"summary"`
}

// Respond is the park variant's Update payload.
type Respond struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// Model is the scripted model activity.
func Model(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	if req.ToolResult == nil && req.Step > 0 {
		return ModelResponse{Text: "Started."}, nil // a task's receipt read
	}
	if req.ToolResult == nil {
		return ModelResponse{ToolCall: &WeatherReq{City: req.City}}, nil
	}
	return ModelResponse{Text: fmt.Sprintf("It is %.0f°C and %s in %s.", req.ToolResult.TempC, req.ToolResult.Summary, req.ToolResult.City)}, nil
}

// Weather is the tool activity.
func Weather(ctx context.Context, req WeatherReq) (WeatherResp, error) {
	return WeatherResp{City: req.City, TempC: 21, Summary: "sunny"}, nil
}

// RegisterWorker registers the turn workflow and its activities on w.
func RegisterWorker(w worker.Registry) {
	w.RegisterWorkflowWithOptions(TurnWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivityWithOptions(Model, activityOpts(ModelActivity))
	w.RegisterActivityWithOptions(Weather, activityOpts(ToolActivity))
	w.RegisterWorkflowWithOptions(WeatherWorkflow, workflow.RegisterOptions{Name: ToolWorkflow})
}

// WeatherWorkflow is the tool as a workflow (TurnInput.ChildTool): it runs
// the tool activity as a regular activity and returns its result.
func WeatherWorkflow(ctx workflow.Context, req WeatherReq) (WeatherResp, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, DisableEagerExecution: true})
	var out WeatherResp
	err := workflow.ExecuteActivity(actx, ToolActivity, req).Get(actx, &out)
	return out, err
}

// TurnWorkflow runs one turn.
func TurnWorkflow(ctx workflow.Context, in TurnInput) (TurnResult, error) {
	var (
		parked    bool
		responded *Respond
	)
	if in.Park {
		if err := workflow.SetQueryHandler(ctx, QueryParked, func() (bool, error) { return parked, nil }); err != nil {
			return TurnResult{}, err
		}
		err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRespond,
			func(ctx workflow.Context, r Respond) (string, error) {
				responded = &r
				return "ok", nil
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, r Respond) error {
				if !parked {
					return errors.New("not waiting for a response")
				}
				if responded != nil {
					return errors.New("already responded")
				}
				if r.By == "" {
					return errors.New("respond: by is required")
				}
				return nil
			}})
		if err != nil {
			return TurnResult{}, err
		}
	}

	call := func(name string, arg, result any) error {
		switch in.Variant {
		case Local:
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
			return workflow.ExecuteLocalActivity(lctx, name, arg).Get(lctx, result)
		case Regular, Eager, "":
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				StartToCloseTimeout:   10 * time.Second,
				DisableEagerExecution: in.Variant != Eager,
			})
			return workflow.ExecuteActivity(actx, name, arg).Get(actx, result)
		default:
			return fmt.Errorf("unknown variant %q", in.Variant)
		}
	}

	var first ModelResponse
	if err := call(ModelActivity, ModelRequest{Step: 0, City: in.City}, &first); err != nil {
		return TurnResult{}, err
	}
	if first.ToolCall == nil {
		res := TurnResult{Text: first.Text, Steps: 1}
		return res, report(ctx, in, res)
	}
	res := TurnResult{Steps: 3}
	if in.Park {
		parked = true
		if err := workflow.Await(ctx, func() bool { return responded != nil }); err != nil {
			return TurnResult{}, err
		}
		parked = false
		res.Responder = responded.By
	}
	var tool WeatherResp
	if in.Task {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, DisableEagerExecution: true})
		f := workflow.ExecuteActivity(actx, ToolActivity, *first.ToolCall)
		var ack ModelResponse
		if err := call(ModelActivity, ModelRequest{Step: 1, City: in.City}, &ack); err != nil {
			return TurnResult{}, err
		}
		if err := f.Get(actx, &tool); err != nil {
			return TurnResult{}, err
		}
		res.Steps = 4
	} else if in.ChildTool {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:               workflow.GetInfo(ctx).WorkflowExecution.ID + "/tool",
			WorkflowExecutionTimeout: time.Minute,
		})
		if err := workflow.ExecuteChildWorkflow(cctx, ToolWorkflow, *first.ToolCall).Get(cctx, &tool); err != nil {
			return TurnResult{}, err
		}
	} else if err := call(ToolActivity, *first.ToolCall, &tool); err != nil {
		return TurnResult{}, err
	}
	var final ModelResponse
	if err := call(ModelActivity, ModelRequest{Step: 1, City: in.City, ToolResult: &tool}, &final); err != nil {
		return TurnResult{}, err
	}
	res.Text = final.Text
	return res, report(ctx, in, res)
}

var seq atomic.Int64

var runPrefix = fmt.Sprintf("%s%x-", workflowPrefix, time.Now().UnixNano())

// NextWorkflowID returns a workflow ID unique to this process run.
func NextWorkflowID(kind string) string {
	return fmt.Sprintf("%s%s-%d", runPrefix, kind, seq.Add(1))
}

// RunOption adjusts how RunTurn and RunPark start the workflow.
type RunOption func(*client.StartWorkflowOptions)

// WithEagerStart requests eager workflow start: the first workflow task comes
// back in the start response to a worker created from the same client, instead
// of through the transfer queue and matching, as eve's sessions start their
// turns (from a local activity on the worker).
func WithEagerStart() RunOption {
	return func(o *client.StartWorkflowOptions) { o.EnableEagerStart = true }
}

// WithID starts the workflow with this ID instead of a generated one.
func WithID(id string) RunOption {
	return func(o *client.StartWorkflowOptions) { o.ID = id }
}

func startOptions(kind, taskQueue string, opts []RunOption) client.StartWorkflowOptions {
	o := client.StartWorkflowOptions{ID: NextWorkflowID(kind), TaskQueue: taskQueue}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// RunTurn starts one turn on taskQueue and waits for its result.
func RunTurn(ctx context.Context, c client.Client, taskQueue string, variant Variant, opts ...RunOption) error {
	run, err := c.ExecuteWorkflow(ctx, startOptions("turn", taskQueue, opts), WorkflowName, TurnInput{Variant: variant, City: "Lisbon"})
	if err != nil {
		return err
	}
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		return err
	}
	if res.Steps != 3 || res.Text == "" {
		return fmt.Errorf("unexpected turn result %+v", res)
	}
	return nil
}

// RunChildTurn is RunTurn with the tool run as a child workflow
// (TurnInput.ChildTool): model activity → ExecuteChildWorkflow (the tool
// activity inside it) → model activity.
func RunChildTurn(ctx context.Context, c client.Client, taskQueue string, variant Variant, opts ...RunOption) error {
	run, err := c.ExecuteWorkflow(ctx, startOptions("child-turn", taskQueue, opts), WorkflowName, TurnInput{Variant: variant, City: "Lisbon", ChildTool: true})
	if err != nil {
		return err
	}
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		return err
	}
	if res.Steps != 3 || res.Text == "" {
		return fmt.Errorf("unexpected turn result %+v", res)
	}
	return nil
}

// RunTaskTurn is RunTurn with the tool run as a task (TurnInput.Task):
// model activity → tool activity started, not awaited → model activity →
// the tool's result awaited → model activity.
func RunTaskTurn(ctx context.Context, c client.Client, taskQueue string, variant Variant, opts ...RunOption) error {
	run, err := c.ExecuteWorkflow(ctx, startOptions("task-turn", taskQueue, opts), WorkflowName, TurnInput{Variant: variant, City: "Lisbon", Task: true})
	if err != nil {
		return err
	}
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		return err
	}
	if res.Steps != 4 || res.Text == "" {
		return fmt.Errorf("unexpected turn result %+v", res)
	}
	return nil
}

// RunPark starts a parking turn, waits until it is parked on the "respond"
// Update (polling the "parked" query; not timed), then sends the Update and
// returns the time from sending it to having the turn's result: the
// "respond → turn done" latency.
func RunPark(ctx context.Context, c client.Client, taskQueue string, variant Variant, opts ...RunOption) (time.Duration, error) {
	so := startOptions("park", taskQueue, opts)
	id := so.ID
	run, err := c.ExecuteWorkflow(ctx, so, WorkflowName, TurnInput{Variant: variant, Park: true, City: "Lisbon"})
	if err != nil {
		return 0, err
	}
	if err := waitParked(ctx, c, id, run.GetRunID()); err != nil {
		return 0, err
	}

	start := time.Now()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		RunID:        run.GetRunID(),
		UpdateName:   UpdateRespond,
		Args:         []any{Respond{Approved: true, By: "bench"}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		return 0, fmt.Errorf("respond: %w", err)
	}
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	var ack string
	if err := h.Get(ctx, &ack); err != nil || ack != "ok" {
		return 0, fmt.Errorf("respond result %q: %v", ack, err)
	}
	if res.Responder != "bench" || res.Text == "" {
		return 0, fmt.Errorf("unexpected park result %+v", res)
	}
	return elapsed, nil
}

func waitParked(ctx context.Context, c client.Client, id, runID string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := c.QueryWorkflow(ctx, id, runID, QueryParked)
		if err == nil {
			var parked bool
			if err := v.Get(&parked); err != nil {
				return err
			}
			if parked {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workflow %s not parked after 30 s (last query error: %v)", id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func activityOpts(name string) activity.RegisterOptions {
	return activity.RegisterOptions{Name: name}
}

// StartParked starts a park-variant turn and returns once it waits for
// its "respond" Update (polling the "parked" query).
func StartParked(ctx context.Context, c client.Client, taskQueue string, variant Variant) (client.WorkflowRun, error) {
	so := startOptions("park", taskQueue, nil)
	run, err := c.ExecuteWorkflow(ctx, so, WorkflowName, TurnInput{Variant: variant, Park: true, City: "Lisbon"})
	if err != nil {
		return nil, err
	}
	return run, waitParked(ctx, c, so.ID, run.GetRunID())
}

// Answer sends a parked turn its "respond" Update and returns once the
// workflow accepted it.
func Answer(ctx context.Context, c client.Client, run client.WorkflowRun) error {
	_, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: UpdateRespond,
		Args: []any{Respond{Approved: true, By: "bench"}}, WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	return err
}
