package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eve-temporal/eve/model"
)

// Task makes a tool's calls tasks (eve's tools/tasks.md): a call returns a
// receipt at once ("Started task deploy-4hd8sa. …") and keeps working while
// the conversation goes on; its result reaches the model later, in a
// task.result message at the next step boundary, and no turn ends while a
// task works. Set it with AsTask on any tool that runs (Func, a Tool with
// Execute, DefineDelegated); a client tool's answer is a person's, so it
// cannot be a task.
type Task struct {
	// Resumable makes each task take further calls (eve's serve): the
	// model calls the tool again with the task's taskId (eve adds the
	// optional taskId property to the tool's input schema), and each such
	// call runs Execute again, with the state the task's last call saved
	// (Context.TaskState, Context.SaveTaskState); its result is the reply
	// the model reads in a <task_result>. Between calls the task is idle:
	// it holds no turn and no worker, only its state, which the session
	// keeps across turns, so any later turn can continue it (running with
	// that turn's caller's auth). Calls to a working task wait their turn.
	// Authored tools only.
	Resumable bool
	// Deadline bounds the task's work (0: none beyond the tool's own
	// Timeout, or a delegated tool's deadline). When it passes, the work
	// is cancelled and the task settles failed with code
	// TASK_DEADLINE_EXCEEDED, which the model reads in its <task_result>.
	Deadline time.Duration
}

// MaxWorkingTasks is how many tasks may work at once in one session (eve's
// limit); a call that would start one more fails with TOO_MANY_TASKS.
const MaxWorkingTasks = 32

// AsTask makes t's calls tasks and returns t, so a definition reads
//
//	deploy := tools.AsTask(tools.Func("deploy", "Deploy a service.", deployFn), tools.Task{Deadline: 10 * time.Minute})
func AsTask(t *Tool, task Task) *Tool {
	t.Task = &task
	return t
}

// IsTask reports whether t's calls are tasks.
func (t *Tool) IsTask() bool { return t.Task != nil }

func (t *Tool) compileTask() []error {
	var errs []error
	if t.Client != nil {
		errs = append(errs, errors.New("a client tool cannot be a task: its result is a person's answer"))
	}
	if t.Task.Resumable && t.Delegated != nil {
		errs = append(errs, errors.New("a delegated tool cannot be a resumable task: each call's state comes back from Execute"))
	}
	if t.Task.Resumable && (t.Workflow != nil || t.Nexus != nil) {
		errs = append(errs, errors.New("a workflow or Nexus tool cannot be a resumable task: each call is a workflow or operation of its own, with no Execute to keep state"))
	}
	if t.Task.Deadline < 0 {
		errs = append(errs, errors.New("Task.Deadline must not be negative"))
	}
	if t.Local {
		errs = append(errs, errors.New("a task cannot be Local: it runs beside the turn in an activity of its own"))
	}
	return errs
}

// The tools eve adds for an agent with task tools (eve__task_wait,
// eve__task_cancel): the runtime answers them, no Execute runs. A tool
// may not take their names.
const (
	TaskWaitName   = "eve__task_wait"
	TaskCancelName = "eve__task_cancel"
)

// IsTaskControl reports whether name is one of the tools eve adds for tasks.
func IsTaskControl(name string) bool { return name == TaskWaitName || name == TaskCancelName }

// eve 0.80's texts (dist/src/execution/tasks/render.js), byte for byte.
const (
	taskWaitDescription        = "Call " + TaskWaitName + " sparingly, only when you deliberately want to withhold a message from the user while waiting for a task result. Tasks keep running and their results reach you without calling " + TaskWaitName + ". If the user should hear from you now, reply instead. Wait silently until any of your tasks has a result, a new message arrives, or timeoutSeconds pass. It returns after the first result, which follows in a <task_result> message; wait again only if you still want to withhold a reply until another result arrives. Waiting never stops a task."
	taskWaitTimeoutDescription = "Optional. Seconds to wait before returning without a result. Omit it to wait for a result or a new message, which is almost always right. Don't use short timeouts to check on tasks: results reach you without checking."
	taskCancelDescription      = "Stop a task's current work. That work never reports back; if it already had a result, that result is still delivered. An agent, or any task that accepts more input, stays available: call its tool with its taskId to give it new work."
	taskCancelIDDescription    = `The id of the task to stop, copied from its "Started task" receipt or the [Tasks] note.`
)

// TaskSystemBlock is the system prompt block eve adds for an agent with
// task tools (a root session's).
const TaskSystemBlock = "Tasks\n" +
	"- A call that returns \"Started task <id>\" is a task: it keeps working while you continue. Every agent call is a task.\n" +
	"- Each result arrives once, in a <task_result> message. Until then you know nothing about it, so don't guess or report its result.\n" +
	"- Ending your reply doesn't end your turn. While tasks work, eve holds your turn and calls you again with each result.\n" +
	"- If you have nothing to tell the person until a result arrives, call " + TaskWaitName + ". Start every independent task first, then wait.\n" +
	"- If the person should hear from you now, for example to confirm work is underway when they don't need the result yet, reply. When results arrive, report them without repeating yourself.\n" +
	"- Don't redo work you delegated. Never use sleep or shell commands to wait for a task.\n" +
	"- To correct or continue an agent, or any task that accepts more input, call its tool again with its taskId. A new message never stops your tasks: answer it if it asks you something, decide whether it changes the work, then keep each task, correct an agent by taskId, or stop a task with " + TaskCancelName + "."

// TaskControlDescriptors are eve__task_wait and eve__task_cancel as the
// model sees them.
func TaskControlDescriptors() []model.ToolDescriptor {
	wait, _ := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"timeoutSeconds": map[string]any{"type": "integer", "minimum": 1, "description": taskWaitTimeoutDescription},
	}})
	cancel, _ := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "required": []string{"taskId"}, "properties": map[string]any{
		"taskId": map[string]any{"type": "string", "description": taskCancelIDDescription},
	}})
	return []model.ToolDescriptor{
		{Name: TaskWaitName, Description: taskWaitDescription, InputSchema: wait},
		{Name: TaskCancelName, Description: taskCancelDescription, InputSchema: cancel},
	}
}

// HasTasks reports whether any of the registry's tools is a task.
func (r *Registry) HasTasks() bool {
	for _, t := range r.List() {
		if t.IsTask() {
			return true
		}
	}
	return false
}

// MaxTaskStateBytes bounds a resumable task's state as JSON: it is kept in
// the session's workflow state between turns.
const MaxTaskStateBytes = 64 << 10

// taskBox is a resumable task's state as a call sees and leaves it.
type taskBox struct {
	in, out json.RawMessage
	saved   bool
}

// TaskState decodes into v the state the task's last call saved and
// reports whether there was one (false on the task's first call, and for
// a tool that is not a resumable task).
func (c *Context) TaskState(v any) bool {
	if c.task == nil || len(c.task.in) == 0 {
		return false
	}
	return json.Unmarshal(c.task.in, v) == nil
}

// SaveTaskState keeps v, as JSON of at most MaxTaskStateBytes, as the
// resumable task's state for its next call; a call that saves nothing
// leaves the state as it was. It fails for a tool that is not a
// resumable task.
func (c *Context) SaveTaskState(v any) error {
	if c.task == nil {
		return errors.New("SaveTaskState: the call is not a resumable task's")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("SaveTaskState: %w", err)
	}
	if len(b) > MaxTaskStateBytes {
		return fmt.Errorf("SaveTaskState: the state is %d bytes; a task keeps at most %d (tools.MaxTaskStateBytes)", len(b), MaxTaskStateBytes)
	}
	c.task.out, c.task.saved = b, true
	return nil
}

// SetTaskState makes the call a resumable task's, with the state its last
// call saved (nil: none). The runtime calls it.
func (c *Context) SetTaskState(state json.RawMessage) { c.task = &taskBox{in: state} }

// SavedTaskState is the state the call saved (SaveTaskState), and whether
// it saved any. The runtime calls it.
func (c *Context) SavedTaskState() (json.RawMessage, bool) {
	if c.task == nil {
		return nil, false
	}
	return c.task.out, c.task.saved
}

// taskIDInput is the property eve adds to a resumable tool's input.
const taskIDInput = "taskId"

// eve's texts for a resumable tool's description and its taskId property.
const (
	serveToolDescription   = "To send this task more input, call this tool again with its taskId; without taskId, each call starts a new task."
	taskIDInputDescription = `The id of a task this tool started, copied from its "Started task" receipt or the [Tasks] note, to send it this input. Omit it to start a new task.`
)

// ModelDescriptor is the tool as the model sees it: a resumable task's
// input has eve's optional taskId property, and its description says how
// to use it.
func (t *Tool) ModelDescriptor() model.ToolDescriptor {
	d := model.ToolDescriptor{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	if t.Task == nil || !t.Task.Resumable {
		return d
	}
	d.Description = strings.TrimRight(strings.TrimSpace(t.Description), ".") + ". " + serveToolDescription
	var s map[string]any
	if json.Unmarshal(t.InputSchema, &s) != nil {
		return d
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props[taskIDInput] = map[string]any{"type": "string", "description": taskIDInputDescription}
	s["properties"] = props
	if b, err := json.Marshal(s); err == nil {
		d.InputSchema = b
	}
	return d
}

// SplitTaskID takes the taskId property out of a resumable task's input:
// the id ("" when absent or empty) and the tool's own input.
func SplitTaskID(input json.RawMessage) (string, json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil {
		return "", input
	}
	raw, ok := m[taskIDInput]
	if !ok {
		return "", input
	}
	delete(m, taskIDInput)
	rest, err := json.Marshal(m)
	if err != nil {
		return "", input
	}
	var id string
	_ = json.Unmarshal(raw, &id)
	return id, rest
}
