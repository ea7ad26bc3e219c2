package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func execInput(kind string) executionInput {
	return executionInput{
		ExecutionID: "exec_test", Tool: "test.echo", UserID: "u1", InputHash: "h",
		Plan: work.CallPlan{
			Call:  model.ToolCall{Name: "echo", Input: json.RawMessage(`{"x":1}`)},
			Known: true, Kind: kind, Timeout: time.Minute,
			Retry: tools.RetryPolicy{MaximumAttempts: 1},
		},
	}
}

type execEnv struct {
	*testsuite.TestWorkflowEnvironment
	mu    sync.Mutex
	calls []work.ExecuteToolInput
}

func newExecEnv(t *testing.T, tool func(ctx context.Context, in work.ExecuteToolInput) (any, error)) *execEnv {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	e := &execEnv{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment()}
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "exec_test"})
	e.RegisterWorkflowWithOptions(executionWorkflow, workflow.RegisterOptions{Name: signals.ExecutionWorkflow})
	e.RegisterActivityWithOptions(func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		e.mu.Lock()
		e.calls = append(e.calls, in)
		e.mu.Unlock()
		return tool(ctx, in)
	}, activity.RegisterOptions{Name: work.ExecuteToolName})
	return e
}

func (e *execEnv) result(t *testing.T) executionOutput {
	t.Helper()
	if !e.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := e.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out executionOutput
	if err := e.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExecutionAuthoredSucceeds(t *testing.T) {
	env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: json.RawMessage(`{"echo":1}`)}, nil
	})
	env.ExecuteWorkflow(signals.ExecutionWorkflow, execInput(work.KindAuthored))
	out := env.result(t)
	if out.Status != protocol.ExecutionSucceeded || string(out.Output) != `{"echo":1}` || out.ID != "exec_test" || out.Tool != "test.echo" || out.FinishedAt == nil {
		t.Fatalf("result = %+v", out)
	}
	if len(env.calls) != 1 {
		t.Fatalf("calls = %d", len(env.calls))
	}
	c := env.calls[0]
	if c.CallID != executionCallID || c.ToolName != "echo" || c.Session.ID != "exec_test" || c.Session.Auth.Current.ID != "u1" {
		t.Fatalf("activity input = %+v", c)
	}
}

func TestExecutionAuthoredFails(t *testing.T) {
	env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		return nil, temporal.NewNonRetryableApplicationError("tool echo failed: boom", work.ErrTypeTool, nil)
	})
	env.ExecuteWorkflow(signals.ExecutionWorkflow, execInput(work.KindAuthored))
	out := env.result(t)
	if out.Status != protocol.ExecutionFailed || out.Error == nil || out.Error.Code != protocol.ExecCodeExecutionFailed || !strings.Contains(out.Error.Message, "boom") {
		t.Fatalf("result = %+v (%+v)", out, out.Error)
	}
}

func TestExecutionOutcomeCodes(t *testing.T) {
	env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		return work.FailedOutcome(protocol.CodeToolOutputInvalid, "bad output"), nil
	})
	env.ExecuteWorkflow(signals.ExecutionWorkflow, execInput(work.KindAuthored))
	out := env.result(t)
	if out.Status != protocol.ExecutionFailed || out.Error.Code != codeInvalidOutput || len(out.Output) != 0 {
		t.Fatalf("result = %+v (%+v)", out, out.Error)
	}
}

func TestExecutionClientToolRefused(t *testing.T) {
	env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		t.Error("a client tool must not run")
		return nil, nil
	})
	env.ExecuteWorkflow(signals.ExecutionWorkflow, execInput(work.KindClient))
	out := env.result(t)
	if out.Status != protocol.ExecutionFailed || out.Error.Code != codeNotExecutable {
		t.Fatalf("result = %+v", out)
	}
}

func TestExecutionApprovalGate(t *testing.T) {
	ran := 0
	tool := func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		ran++
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: json.RawMessage(`{}`)}, nil
	}
	in := execInput(work.KindAuthored)
	in.Plan.Approval = approval.KindAlways
	env := newExecEnv(t, tool)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
	if out := env.result(t); out.Status != protocol.ExecutionFailed || out.Error.Code != codeApprovalRequired || ran != 0 {
		t.Fatalf("gated: result = %+v, ran %d", out, ran)
	}
	in.SkipApproval = true
	env = newExecEnv(t, tool)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
	if out := env.result(t); out.Status != protocol.ExecutionSucceeded || ran != 1 {
		t.Fatalf("skip approval: result = %+v, ran %d", out, ran)
	}
}

func TestExecutionCustomPolicy(t *testing.T) {
	for _, c := range []struct {
		status approval.Status
		want   protocol.ExecutionStatus
		code   string
	}{
		{approval.Skip(), protocol.ExecutionSucceeded, ""},
		{approval.Approve(), protocol.ExecutionSucceeded, ""},
		{approval.Deny("not yours"), protocol.ExecutionFailed, codeDenied},
		{approval.Ask(), protocol.ExecutionFailed, codeApprovalRequired},
	} {
		env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
			return work.ToolOutcome{Status: protocol.StatusCompleted, Output: json.RawMessage(`{}`)}, nil
		})
		st := c.status
		env.RegisterActivityWithOptions(func(ctx context.Context, in work.ApprovalInput) (approval.Status, error) {
			if in.Context.Session.Auth.Current.ID != "u1" {
				t.Errorf("policy sees caller %+v", in.Context.Session.Auth.Current)
			}
			return st, nil
		}, activity.RegisterOptions{Name: work.EvaluateApprovalName})
		in := execInput(work.KindAuthored)
		in.Plan.Approval = approval.KindCustom
		env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
		out := env.result(t)
		if out.Status != c.want || (c.code != "" && out.Error.Code != c.code) {
			t.Fatalf("%s: result = %+v (%+v)", c.status.Type, out, out.Error)
		}
		if c.code == codeDenied && !strings.Contains(out.Error.Message, "not yours") {
			t.Fatalf("deny reason lost: %s", out.Error.Message)
		}
	}
}

// A custom policy that fails refuses the execution: nobody can be asked
// outside a session, and a failed policy never runs the tool.
func TestExecutionPolicyErrorFailsClosed(t *testing.T) {
	ran := 0
	env := newExecEnv(t, func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		ran++
		return work.ToolOutcome{Status: protocol.StatusCompleted, Output: json.RawMessage(`{}`)}, nil
	})
	env.RegisterActivityWithOptions(func(ctx context.Context, in work.ApprovalInput) (approval.Status, error) {
		return approval.Status{}, temporal.NewNonRetryableApplicationError("policy store down", "PolicyError", nil)
	}, activity.RegisterOptions{Name: work.EvaluateApprovalName})
	in := execInput(work.KindAuthored)
	in.Plan.Approval = approval.KindCustom
	env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
	out := env.result(t)
	if out.Status != protocol.ExecutionFailed || out.Error.Code != codeApprovalRequired || ran != 0 ||
		!strings.Contains(out.Error.Message, approval.ReasonPolicyFailed) {
		t.Fatalf("result = %+v (%+v), ran %d", out, out.Error, ran)
	}
}

func delegatedInput() executionInput {
	in := execInput(work.KindDelegated)
	in.Plan.Deadline = time.Hour
	in.Plan.OutputSchema = json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	return in
}

// pendingTool goes pending like a delegated tool and hands its task token out.
func pendingTool(tokens chan []byte) func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
	return func(ctx context.Context, in work.ExecuteToolInput) (any, error) {
		tokens <- activity.GetInfo(ctx).TaskToken
		return nil, activity.ErrResultPending
	}
}

func TestExecutionDelegatedSettle(t *testing.T) {
	tokens := make(chan []byte, 1)
	env := newExecEnv(t, pendingTool(tokens))
	in := delegatedInput()
	actionID := signals.ActionID(in.ExecutionID, executionCallID)
	type rejection struct{ name, typ string }
	var rejected []rejection
	reject := func(name string, req signals.SettleAction) {
		env.UpdateWorkflow(signals.UpdateSettleAction, name, &testsuite.TestUpdateCallback{
			OnAccept: func() { t.Errorf("%s: accepted", name) },
			OnReject: func(err error) {
				var ae *temporal.ApplicationError
				if errors.As(err, &ae) {
					rejected = append(rejected, rejection{name, ae.Type()})
				} else {
					t.Errorf("%s: %v", name, err)
				}
			},
			OnComplete: func(any, error) {},
		}, req)
	}
	var decision signals.SettleDecision
	env.RegisterDelayedCallback(func() {
		reject("unknown", signals.SettleAction{ActionID: "act_nope", Output: json.RawMessage(`{"ok":true}`)})
		reject("invalid", signals.SettleAction{ActionID: actionID, Output: json.RawMessage(`{"ok":"yes"}`)})
		env.UpdateWorkflow(signals.UpdateSettleAction, "good", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { t.Errorf("good: rejected: %v", err) },
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("good: %v", err)
					return
				}
				decision = v.(signals.SettleDecision)
			},
		}, signals.SettleAction{ActionID: actionID, Output: json.RawMessage(`{"ok":true}`)})
		reject("conflict", signals.SettleAction{ActionID: actionID, Output: json.RawMessage(`{"ok":false}`)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(signals.QueryAction, actionID)
		if err != nil {
			t.Error(err)
		} else {
			var st signals.ActionState
			_ = v.Get(&st)
			if st.State != signals.ActionSettling {
				t.Errorf("state after settle = %s", st.State)
			}
		}
		result := signals.ActionResult{Kind: signals.ResultKind, Status: protocol.StatusCompleted, Output: json.RawMessage(`{"ok":true}`)}
		if err := env.CompleteActivity(<-tokens, result, nil); err != nil {
			t.Error(err)
		}
	}, 2*time.Minute)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
	out := env.result(t)
	if out.Status != protocol.ExecutionSucceeded || string(out.Output) != `{"ok":true}` || out.ActionID != actionID {
		t.Fatalf("result = %+v", out)
	}
	if decision.Decision != signals.DecisionComplete {
		t.Fatalf("decision = %+v", decision)
	}
	want := []rejection{{"unknown", signals.ErrActionUnknown}, {"invalid", signals.ErrActionInvalid}, {"conflict", signals.ErrActionConflict}}
	if len(rejected) != len(want) {
		t.Fatalf("rejections = %+v", rejected)
	}
	for i := range want {
		if rejected[i] != want[i] {
			t.Fatalf("rejections = %+v, want %+v", rejected, want)
		}
	}
	if c := env.calls[0]; c.ActionID != actionID || c.Deadline.IsZero() || c.TurnID != in.ExecutionID {
		t.Fatalf("activity input = %+v", c)
	}
}

func TestExecutionDelegatedJobFails(t *testing.T) {
	tokens := make(chan []byte, 1)
	env := newExecEnv(t, pendingTool(tokens))
	env.RegisterDelayedCallback(func() {
		result := signals.ActionResult{Kind: signals.ResultKind, Status: protocol.StatusFailed, Error: &protocol.ActionError{Code: "quota", Message: "over quota"}}
		if err := env.CompleteActivity(<-tokens, result, nil); err != nil {
			t.Error(err)
		}
	}, time.Minute)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, delegatedInput())
	out := env.result(t)
	if out.Status != protocol.ExecutionFailed || out.Error.Code != "quota" || out.Error.Message != "over quota" {
		t.Fatalf("result = %+v (%+v)", out, out.Error)
	}
}

func TestExecutionDelegatedDeadline(t *testing.T) {
	tokens := make(chan []byte, 1)
	env := newExecEnv(t, pendingTool(tokens))
	in := delegatedInput()
	in.Plan.Deadline = 10 * time.Minute
	env.ExecuteWorkflow(signals.ExecutionWorkflow, in)
	out := env.result(t)
	if out.Status != protocol.ExecutionTimedOut || out.Error.Code != codeDeadlineExceeded {
		t.Fatalf("result = %+v (%+v)", out, out.Error)
	}
}

func TestExecutionDelegatedCancel(t *testing.T) {
	tokens := make(chan []byte, 1)
	env := newExecEnv(t, pendingTool(tokens))
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, delegatedInput())
	out := env.result(t)
	if out.Status != protocol.ExecutionCanceled || out.Error.Code != protocol.ExecCodeCanceled {
		t.Fatalf("result = %+v (%+v)", out, out.Error)
	}
}

func TestExecutionQueryWhileRunning(t *testing.T) {
	tokens := make(chan []byte, 1)
	env := newExecEnv(t, pendingTool(tokens))
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(signals.QueryExecution)
		if err != nil {
			t.Error(err)
			return
		}
		var st executionOutput
		_ = v.Get(&st)
		if st.Status != protocol.ExecutionRunning || st.ID != "exec_test" || st.ActionID == "" {
			t.Errorf("state = %+v", st)
		}
		env.CancelWorkflow()
	}, time.Minute)
	env.ExecuteWorkflow(signals.ExecutionWorkflow, delegatedInput())
	_ = env.result(t)
}

func TestExecutionStatusOf(t *testing.T) {
	for code, want := range map[string]protocol.ExecutionStatus{
		protocol.CodeToolTimeout:      protocol.ExecutionTimedOut,
		protocol.CodeDeadlineExceeded: protocol.ExecutionTimedOut,
		protocol.CodeToolCancelled:    protocol.ExecutionCanceled,
		protocol.CodeToolExecution:    protocol.ExecutionFailed,
		"custom_job_code":             protocol.ExecutionFailed,
	} {
		if got, _ := executionStatusOf(code); got != want {
			t.Errorf("%s: %s, want %s", code, got, want)
		}
	}
}

func TestRegisterExecutionsTwice(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	registerExecutions(env)
	registerExecutions(env) // agent.Register and a test harness may both register it
	r := worker.NewWorkflowReplayer()
	registerExecutions(r)
	registerExecutions(r)
}
