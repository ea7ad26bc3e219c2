package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// The execution contract lives in package signals; these names keep the
// workflow's code as it was.
const executionCallID = signals.ExecutionCallID

// Error codes of executions (signals.Code*).
const (
	codeInvalidOutput    = signals.CodeInvalidOutput
	codeDeadlineExceeded = signals.CodeDeadlineExceeded
	codeDenied           = signals.CodeDenied
	codeApprovalRequired = signals.CodeApprovalRequired
	codeNotExecutable    = signals.CodeNotExecutable
)

// executionInput is the workflow's own input: signals.ExecutionInput, the
// starters' contract, with the plan decoded (the JSON is the same).
type executionInput struct {
	ExecutionID    string          `json:"executionId"`
	Tool           string          `json:"tool"`
	UserID         string          `json:"userId"`
	ConnectionID   string          `json:"connectionId,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	InputHash      string          `json:"inputHash,omitempty"`
	Caller         *auth.Principal `json:"caller,omitempty"`
	// Plan says how to run the call (see signals.ExecutionInput.Plan).
	Plan         work.CallPlan `json:"plan"`
	SkipApproval bool          `json:"skipApproval,omitempty"`
	AskApproval  bool          `json:"askApproval,omitempty"`
	// Client is the MCP client's round (signals.ExecutionInput.Client).
	Client *protocol.ClientRound `json:"client,omitempty"`
}

// executionOutput is signals.ExecutionOutput.
type executionOutput = signals.ExecutionOutput

// RegisterExecutions registers the execution workflow under
// signals.ExecutionWorkflow. It runs the activities agent.Register
// registers (ExecuteTool, EvaluateApproval), so register both on the same
// worker. Registering twice is harmless.
func registerExecutions(reg WorkflowRegistry) { (*runtime)(nil).RegisterExecutions(reg) }

// RegisterExecutions registers the execution workflow of this runtime: its
// Notifier, when set, hears each change of an execution's state (under the
// execution id, the count of changes), so MCP servers push task status
// instead of polling.
func (r *runtime) RegisterExecutions(reg WorkflowRegistry) {
	reg.RegisterWorkflowWithOptions(func(ctx workflow.Context, in executionInput) (executionOutput, error) {
		return execution{rt: r}.runWorkflow(ctx, in)
	}, workflow.RegisterOptions{
		Name:                          signals.ExecutionWorkflow,
		DisableAlreadyRegisteredCheck: true,
		VersioningBehavior:            executionBehavior,
	})
}

// execution is one running execution workflow.
type execution struct {
	rt      *runtime // its Notifier hears state changes; nil: none
	changes int
	in      executionInput
	out     executionOutput
	action  *actionState // delegated tools only
	answer  *signals.ExecutionApprovalAnswer
	// client is the MCP client's round, once versioned in.
	client *protocol.ClientRound
	// call is the call that ran (re-run by a task's next client round);
	// answers collects the client's answers to the pending round.
	call    *pendingCall
	answers map[string]json.RawMessage
}

// Execution runs one tool call outside a session. Tool failures, timeouts
// and cancellation are results (Status), never a failed workflow.
func executionWorkflow(ctx workflow.Context, in executionInput) (executionOutput, error) {
	return execution{}.runWorkflow(ctx, in)
}

// changed tells the runtime's Notifier that the execution's state changed
// (outside replay; nothing is recorded).
func (e *execution) changed(ctx workflow.Context) {
	e.changes++
	e.rt.notify(ctx, e.in.ExecutionID, e.changes)
}

func (x execution) runWorkflow(ctx workflow.Context, in executionInput) (executionOutput, error) {
	info := workflow.GetInfo(ctx)
	if in.ExecutionID == "" {
		in.ExecutionID = info.WorkflowExecution.ID
	}
	e := &execution{rt: x.rt, in: in, out: executionOutput{
		ExecutionResult: protocol.ExecutionResult{ID: in.ExecutionID, Tool: in.Tool, Status: protocol.ExecutionRunning},
		UserID:          in.UserID,
		InputHash:       in.InputHash,
		StartedAt:       workflow.Now(ctx),
	}}
	if err := e.registerHandlers(ctx); err != nil {
		return executionOutput{}, err
	}
	// Only executions started with a round ask for the version: the
	// others record (and replay) nothing new.
	if in.Client != nil && workflow.GetVersion(ctx, changeClientInput, workflow.DefaultVersion, 1) == 1 {
		e.client = in.Client
	}
	e.changed(ctx) // running
	outcome := e.run(ctx)
	if e.client != nil && e.client.Task {
		outcome = e.clientRounds(ctx, outcome)
	}
	e.settle(ctx, outcome)
	e.changed(ctx)
	// Let a settle update in flight answer before the workflow closes.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
	return e.out, nil
}

func (e *execution) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, signals.QueryExecution, func() (executionOutput, error) {
		return e.out, nil
	}); err != nil {
		return err
	}
	// Registering a handler records nothing: executions that never ask
	// replay as before.
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateExecutionApproval,
		func(ctx workflow.Context, a signals.ExecutionApprovalAnswer) error {
			e.answer = &a
			return nil
		}, workflow.UpdateHandlerOptions{Validator: e.validateAnswer}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, signals.UpdateExecutionClientInput,
		func(ctx workflow.Context, a signals.ExecutionClientAnswer) error {
			for id, r := range a.Responses {
				e.answers[id] = r
				delete(e.out.ClientInput, id)
			}
			if len(e.out.ClientInput) > 0 {
				e.changed(ctx) // fewer pending requests
			}
			return nil
		}, workflow.UpdateHandlerOptions{Validator: e.validateClientAnswer}); err != nil {
		return err
	}
	return registerActionHandlers(ctx, func(id string) *actionState {
		if e.action != nil && e.action.ActionID == id {
			return e.action
		}
		return nil
	})
}

func (e *execution) session() auth.Session {
	caller := e.in.Caller
	if caller == nil {
		caller = &auth.Principal{ID: e.in.UserID, Type: "user"}
	}
	return auth.Session{ID: e.in.ExecutionID, Auth: auth.Auth{Current: caller, Initiator: caller}}
}

// run takes the call through the pipeline a turn's calls go through
// (gateCall, execute); nobody can be asked outside a session, so a call the
// gate puts to a person is refused.
func (e *execution) run(ctx workflow.Context) work.ToolOutcome {
	p := e.plan()
	var custom approval.Status
	if needsPolicy(p) && kindOf(p).OutsideSession && reviewed(ctx, p) {
		err := evaluatePolicy(ctx, work.ApprovalInput{Context: approval.Context{
			Session: e.session(), ToolName: p.Call.Name, ToolInput: p.Call.Input, CallID: p.Call.ID,
		}}).Get(ctx, &custom)
		if err != nil && ctx.Err() != nil {
			return cancelledOutcome(e.in.Tool)
		}
		if err != nil {
			custom = approval.Status{} // fails closed
		}
	}
	c := gateCall(p, e.in.Tool, false, custom)
	switch c.stage {
	case stageUnknown:
		return work.FailedOutcome(protocol.CodeToolNotFound, fmt.Sprintf("unknown tool %q", e.in.Tool))
	case stageInvalid:
		return work.FailedOutcome(protocol.CodeToolInputInvalid, c.reason)
	case stageDenied:
		msg := fmt.Sprintf("the call to %s was denied by policy", e.in.Tool)
		if c.reason != "" {
			msg += ": " + strings.TrimRight(c.reason, ".")
		}
		return work.FailedOutcome(codeDenied, msg+". The tool did not run.")
	case stageAnswer:
		return work.FailedOutcome(codeNotExecutable, fmt.Sprintf("tool %s is a client tool: a person answers it inside a session, so it cannot be executed on its own", e.in.Tool))
	case stageAsk:
		if e.in.AskApproval && workflow.GetVersion(ctx, changeAskApproval, workflow.DefaultVersion, 1) == 1 {
			return e.ask(ctx, c)
		}
		msg := fmt.Sprintf("tool %s needs a person's approval, which only a session can ask for; it did not run", e.in.Tool)
		if c.reason != "" {
			msg += ": " + c.reason
		}
		return work.FailedOutcome(codeApprovalRequired, msg)
	}
	e.call = c
	return execute(ctx, e, c)
}

// ask puts the call to the person the execution runs for and waits for
// the answer (UpdateExecutionApproval); approved, the call runs.
func (e *execution) ask(ctx workflow.Context, c *pendingCall) work.ToolOutcome {
	p := c.plan
	e.out.Approval = &signals.ExecutionApproval{RequestID: signals.ExecutionApprovalRequestID, Tool: e.in.Tool, Input: p.Call.Input, Reason: c.reason}
	e.changed(ctx)
	if err := workflow.Await(ctx, func() bool { return e.answer != nil }); err != nil {
		e.out.Approval = nil
		return cancelledOutcome(e.in.Tool)
	}
	e.out.Approval = nil
	e.changed(ctx)
	if !e.answer.Approved {
		msg := fmt.Sprintf("the call to %s was denied by %s", e.in.Tool, e.answer.By.ID)
		if e.answer.Reason != "" {
			msg += ": " + strings.TrimRight(e.answer.Reason, ".")
		}
		return work.FailedOutcome(codeDenied, msg+". The tool did not run.")
	}
	c.stage = stageRun
	e.call = c
	return execute(ctx, e, c)
}

// clientRounds keeps a task's execution going while its tool asks the
// client (tools.AskClient): the requests wait in the state
// (ClientInput, input_required to MCP) until UpdateExecutionClientInput
// has answered all of them, possibly over several updates; then the tool
// runs again with the answers and its state.
func (e *execution) clientRounds(ctx workflow.Context, o work.ToolOutcome) work.ToolOutcome {
	for round := 1; ; round++ {
		var ask protocol.ClientInputRequest
		if e.call == nil || o.Error == nil || o.Error.Code != protocol.CodeClientInputRequired ||
			json.Unmarshal(o.Output, &ask) != nil || ask.BeforeTask || len(ask.InputRequests) == 0 {
			return o
		}
		if round > signals.MaxClientRounds {
			return work.FailedOutcome(protocol.CodeToolExecution, fmt.Sprintf("tool %s asked its client for input %d times in one task, the limit (signals.MaxClientRounds, fixed): ask for several inputs in one round", e.in.Tool, signals.MaxClientRounds))
		}
		e.out.ClientInput = map[string]protocol.ClientRequest{}
		for id, r := range ask.InputRequests {
			e.out.ClientInput[id] = r
		}
		e.answers = map[string]json.RawMessage{}
		e.changed(ctx)
		if err := workflow.Await(ctx, func() bool { return len(e.out.ClientInput) == 0 }); err != nil {
			e.out.ClientInput = nil
			return cancelledOutcome(e.in.Tool)
		}
		e.out.ClientInput = nil
		e.changed(ctx)
		e.client = &protocol.ClientRound{Responses: e.answers, State: ask.State, Capabilities: e.client.Capabilities, Task: true}
		o = execute(ctx, e, e.call)
	}
}

// validateClientAnswer accepts answers only to pending requests, from the
// principal the execution runs for.
func (e *execution) validateClientAnswer(a signals.ExecutionClientAnswer) error {
	switch {
	case len(e.out.ClientInput) == 0:
		return fmt.Errorf("execution %s waits for no client input", e.in.ExecutionID)
	case len(a.Responses) == 0:
		return fmt.Errorf("execution %s: the answer carries no responses", e.in.ExecutionID)
	case a.By == nil || a.By.ID != e.in.UserID || (e.in.Caller != nil && a.By.Type != e.in.Caller.Type):
		return fmt.Errorf("only the principal execution %s runs for may answer its client input", e.in.ExecutionID)
	}
	for id := range a.Responses {
		if _, ok := e.out.ClientInput[id]; !ok {
			return fmt.Errorf("execution %s waits for no client input %q", e.in.ExecutionID, id)
		}
	}
	return nil
}

// validateAnswer accepts only the answer to the approval the execution
// waits for, from the principal it runs for.
func (e *execution) validateAnswer(a signals.ExecutionApprovalAnswer) error {
	switch {
	case e.out.Approval == nil || e.answer != nil:
		return fmt.Errorf("execution %s waits for no approval", e.in.ExecutionID)
	case a.RequestID != e.out.Approval.RequestID:
		return fmt.Errorf("execution %s waits for approval %q, not %q", e.in.ExecutionID, e.out.Approval.RequestID, a.RequestID)
	case a.By == nil || a.By.ID != e.in.UserID || (e.in.Caller != nil && a.By.Type != e.in.Caller.Type):
		return fmt.Errorf("only the principal execution %s runs for may answer its approval", e.in.ExecutionID)
	}
	return nil
}

// plan is the call's plan with an execution's defaults: its call id, the
// default timeout and deadline, and no approval policy when the starter
// decided the caller may skip it.
func (e *execution) plan() work.CallPlan {
	if e.in.Plan.Call.ID == "" {
		e.in.Plan.Call.ID = executionCallID
	}
	p := e.in.Plan
	if p.Timeout <= 0 {
		p.Timeout = tools.DefaultTimeout
	}
	if p.Deadline <= 0 {
		p.Deadline = tools.DefaultDeadline
	}
	if e.in.SkipApproval {
		p.Approval = approval.KindNever
	}
	return p
}

func (e *execution) toolInput(c *pendingCall) work.ExecuteToolInput {
	p := c.plan
	return work.ExecuteToolInput{Session: e.session(), TurnID: e.in.ExecutionID, CallID: p.Call.ID, ToolName: p.Call.Name, Input: p.Call.Input, Client: e.client}
}

func (e *execution) openAction(_ workflow.Context, a *actionState) func() {
	e.action = a // the workflow holds one action
	e.out.ActionID = a.ActionID
	return func() {}
}

// settle records the outcome as the execution's result.
func (e *execution) settle(ctx workflow.Context, o work.ToolOutcome) {
	now := workflow.Now(ctx)
	e.out.FinishedAt = &now
	if o.Status == protocol.StatusCompleted {
		e.out.Status = protocol.ExecutionSucceeded
		e.out.Output = o.Output
		if len(e.out.Output) == 0 {
			e.out.Output = json.RawMessage("null")
		}
		return
	}
	code, msg := protocol.CodeToolExecution, "the tool failed"
	if o.Error != nil {
		code, msg = o.Error.Code, o.Error.Message
	}
	e.out.Status, code = executionStatusOf(code)
	e.out.Error = &protocol.ExecutionError{Code: code, Message: msg}
	if code == protocol.CodeClientInputRequired && e.client != nil {
		e.out.Output = o.Output // the requests, for the MCP server
	}
}

// executionStatusOf maps a tool outcome's error code (protocol codes, or a
// delegated job's own code) to an execution status and the code the tools
// API reports.
func executionStatusOf(code string) (protocol.ExecutionStatus, string) {
	switch code {
	case protocol.CodeToolTimeout:
		return protocol.ExecutionTimedOut, protocol.ExecCodeTimeout
	case protocol.CodeDeadlineExceeded:
		return protocol.ExecutionTimedOut, codeDeadlineExceeded
	case protocol.CodeToolCancelled:
		return protocol.ExecutionCanceled, protocol.ExecCodeCanceled
	case protocol.CodeToolInputInvalid:
		return protocol.ExecutionFailed, protocol.ExecCodeInvalidInput
	case protocol.CodeToolOutputInvalid:
		return protocol.ExecutionFailed, codeInvalidOutput
	case protocol.CodeToolExecution:
		return protocol.ExecutionFailed, protocol.ExecCodeExecutionFailed
	case protocol.CodeToolNotFound:
		return protocol.ExecutionFailed, protocol.ExecCodeUnknownTool
	case protocol.CodeToolDenied:
		return protocol.ExecutionFailed, codeDenied
	case "":
		return protocol.ExecutionFailed, protocol.ExecCodeExecutionFailed
	}
	return protocol.ExecutionFailed, code
}
