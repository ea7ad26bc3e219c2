package work

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/tools"
)

// CallPlan is how the workflow must run one tool call. The model step decides
// it from the registry and records it in history, so workflow code never
// reads worker configuration directly.
type CallPlan struct {
	Call  model.ToolCall `json:"call"`
	Known bool           `json:"known"`
	Kind  string         `json:"kind,omitempty"`
	// InputError is set when the input breaks the tool's schema: the call
	// fails at once, without asking anyone or running anything.
	InputError string `json:"inputError,omitempty"`
	// Approval is the policy kind (approval.KindNever ...).
	Approval string `json:"approval,omitempty"`
	Title    string `json:"title,omitempty"`
	// Prompt is the reviewer's text built from the validated input
	// (approval.Policy.WithPrompt); empty: the default.
	Prompt string `json:"prompt,omitempty"`
	// ResponsePolicy: a response policy decides who may settle the call
	// (EvaluateResponse); otherwise only the requester may.
	ResponsePolicy bool `json:"responsePolicy,omitempty"`
	// Editable: a reviewer may approve with an edited input
	// (approval.Policy.Editable), checked against InputSchema (the tool's,
	// set only then) in workflow code.
	Editable    bool            `json:"editable,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Request and OutputSchema are set for client tools.
	Request      *tools.InputRequest `json:"request,omitempty"`
	OutputSchema json.RawMessage     `json:"outputSchema,omitempty"`
	// Deadline is set for delegated and workflow tools.
	Deadline time.Duration `json:"deadline,omitempty"`
	// Workflow is set for workflow tools: the child workflow to start.
	Workflow *WorkflowCall `json:"workflow,omitempty"`
	// Nexus is set for Nexus tools: the operation to run.
	Nexus *NexusCall `json:"nexus,omitempty"`
	// Subagent is set for a subagent's tool: the agent to delegate to.
	Subagent *tools.Subagent `json:"subagent,omitempty"`
	// MaxOutputBytes is the tool's output limit in force
	// (tools.Tool.EffectiveMaxOutputBytes). Workflow code checks delegated
	// completions and client answers against it; 0 (a plan recorded before
	// the field existed) means not known, and nothing is checked.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// InputDeadline is the tool's own deadline for a person's answer
	// (tools.Tool.InputDeadline: 0 the agent's, negative none).
	InputDeadline time.Duration `json:"inputDeadline,omitempty"`
	// RequestDeadline is this call's own deadline from its approval
	// policy (approval.Policy.WithDeadline; 0 none given, negative no
	// deadline); Reminders the tool's own; Escalation the policy's
	// (followups.go in the workflows).
	RequestDeadline time.Duration        `json:"requestDeadline,omitempty"`
	Reminders       *tools.Reminders     `json:"reminders,omitempty"`
	Escalation      *approval.Escalation `json:"escalation,omitempty"`
	// Task is set when the call runs as a task (tools.Tool.Task).
	Task *TaskPlan `json:"task,omitempty"`
	// Activity options for the call.
	Local            bool              `json:"local,omitempty"`
	Timeout          time.Duration     `json:"timeout"`
	HeartbeatTimeout time.Duration     `json:"heartbeatTimeout,omitempty"`
	Retry            tools.RetryPolicy `json:"retry"`
}

// TaskPlan is how a task call runs (tools.Task).
type TaskPlan struct {
	// Deadline bounds the task's work (0: none of its own).
	Deadline time.Duration `json:"deadline,omitempty"`
	// Resumable: the task takes further calls by taskId (tools.Task).
	Resumable bool `json:"resumable,omitempty"`
	// TaskID is the task a resumable task's call continues ("": a new
	// task); Input is then the call's input without taskId.
	TaskID string          `json:"taskId,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// PlanCall is how a call of t runs: the one call-plan builder, used by the
// model step for a turn's calls and by the tools API for executions. A nil
// t (a tool the agent does not have) gives an unknown call. Input that
// breaks t's schema, or for which a delegated tool cannot compute its
// deadline or a client tool its request, sets InputError. The plan is
// recorded in history: what it computes for a tool and an input must not
// change between releases (tests pin it).
func PlanCall(t *tools.Tool, c model.ToolCall) CallPlan {
	if t == nil {
		return CallPlan{Call: c, Timeout: tools.DefaultTimeout, Retry: tools.RetryPolicy{MaximumAttempts: 1}}
	}
	p := CallPlan{
		Call:             c,
		Known:            true,
		Kind:             KindAuthored, // the tool's own once its input is valid (pinned)
		Approval:         t.Approval.Kind(),
		Title:            t.DisplayTitle(),
		Local:            t.Local,
		Timeout:          t.EffectiveTimeout(),
		HeartbeatTimeout: t.HeartbeatTimeout,
		Retry:            t.EffectiveRetry(),
		MaxOutputBytes:   t.EffectiveMaxOutputBytes(),
		InputDeadline:    t.InputDeadline,
	}
	input := c.Input
	var task *TaskPlan
	if t.Task != nil {
		task = &TaskPlan{Deadline: t.Task.Deadline, Resumable: t.Task.Resumable}
		if t.Task.Resumable {
			if id, rest := tools.SplitTaskID(c.Input); id != "" || string(rest) != string(c.Input) {
				task.TaskID, task.Input, input = id, rest, rest
			}
		}
	}
	if err := t.ValidateInput(input); err != nil {
		p.InputError = fmt.Sprintf("invalid input for tool %s: %v. Call it again with input that matches its input schema.", t.Name, err)
		return p
	}
	p.Kind = string(t.Kind())
	p.Task = task
	p.ResponsePolicy = t.Approval.HasResponsePolicy()
	if p.Approval != approval.KindNever {
		pc := approval.PromptContext{ToolName: c.Name, CallID: c.ID, ToolInput: c.Input}
		p.Prompt = t.Approval.Prompt(pc)
		if t.Approval.IsEditable() && !t.Kind().Info().AsksPerson {
			p.Editable, p.InputSchema = true, t.InputSchema
		}
		planFollowUps(&p, t, pc)
	} else {
		p.Reminders = t.InputReminders
	}
	if t.Kind().Info().NeedsDeadline {
		p.OutputSchema = t.OutputSchema
		d, err := t.DeadlineOf(c.Input)
		if err != nil {
			p.InputError = fmt.Sprintf("tool %s cannot compute a deadline for this input: %v", t.Name, err)
			return p
		}
		p.Deadline = d
	}
	if w := t.Workflow; w != nil {
		p.Workflow = &WorkflowCall{Type: w.Type, TaskQueue: w.TaskQueue, IDReuse: string(w.IDReuse), Retry: t.WorkflowRetry()}
	}
	if a := t.Subagent; a != nil {
		p.Subagent = &tools.Subagent{Agent: a.Agent, Description: a.Description}
	}
	if n := t.Nexus; n != nil {
		p.Nexus = &NexusCall{Endpoint: n.Endpoint, Service: n.Service, Operation: n.Operation}
	}
	if t.Kind().Info().AsksPerson {
		p.OutputSchema = t.OutputSchema
		req, err := t.RequestFor(c.Input)
		if err != nil {
			p.InputError = fmt.Sprintf("tool %s cannot ask with this input: %v", t.Name, err)
			return p
		}
		p.Request = &req
	}
	return p
}

// planFollowUps records in a call's plan what follows its approval request:
// the policy's per-call deadline, the tool's reminders and the policy's
// escalation.
func planFollowUps(p *CallPlan, t *tools.Tool, pc approval.PromptContext) {
	if d := t.Approval.Deadline(pc); d != 0 {
		if d > 0 {
			d = min(max(d, tools.MinInputDeadline), tools.MaxInputDeadline)
		}
		p.RequestDeadline = d
	}
	p.Reminders = t.InputReminders
	if e, ok := t.Approval.Escalation(); ok {
		p.Escalation = &e
	}
}

// WorkflowCall is the child workflow a workflow tool's call starts
// (tools.Workflow, as the plan records it; its execution timeout is the
// plan's Deadline).
type WorkflowCall struct {
	Type      string             `json:"type"`
	TaskQueue string             `json:"taskQueue,omitempty"`
	IDReuse   string             `json:"idReuse,omitempty"`
	Retry     *tools.RetryPolicy `json:"retry,omitempty"`
}

// NexusCall is the operation a Nexus tool's call runs (tools.Nexus, as the
// plan records it; its schedule-to-close timeout is the plan's Deadline).
type NexusCall struct {
	Endpoint  string `json:"endpoint"`
	Service   string `json:"service"`
	Operation string `json:"operation"`
}
