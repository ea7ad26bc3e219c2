// Package tools defines authored tools: a model-facing name, a description,
// an input schema, an optional output schema and an Execute function that
// runs as a Temporal activity.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
)

// NamePattern is the rule for model-facing tool names (Anthropic's and OpenAI's).
var NamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Context is what Execute gets besides its input.
type Context struct {
	context.Context
	// Session carries the session id and its auth: the caller of the current
	// turn (Auth.Current) and the session's creator (Auth.Initiator). Enforce
	// tenant and authorization rules from here, not from model input.
	Session  auth.Session
	TurnID   string
	CallID   string
	ToolName string
	// IdempotencyKey is the same on every attempt of this call and differs
	// between calls: "<session id>/<turn id>/<call id>" in a turn (the turn
	// is part of it because a model's call ids need not be unique across
	// turns), "<execution id>/execute" in a tools-API execution. Use it to
	// de-duplicate a side effect that a retry (see Tool.Idempotent) or an
	// at-least-once downstream could repeat.
	IdempotencyKey string
	// Attempt counts from 1.
	Attempt int32
	// Approver is the person who approved this call, nil for a call that
	// needed no approval. Approval is consent only: the call still runs as
	// the requester (Session.Auth.Current); act as the approver only when
	// the tool means to.
	Approver *auth.Principal
	// Client is what the calling MCP client answered and declared, for a
	// tool with ClientInput set that an MCP client calls; nil otherwise
	// (nobody can be asked: fail, or do without). See AskClient.
	Client *protocol.ClientRound
	// TaskID is the task this call serves, for a task tool's call
	// (tools.AsTask); "" otherwise.
	TaskID string
	// task is a resumable task's state (TaskState, SaveTaskState).
	task      *taskBox
	heartbeat func(details ...any)
	beatNow   func(details ...any)
	// cp is shared by copies of the Context (a call that runs another
	// tool on it), so that their heartbeats carry the same checkpoint.
	cp       *checkpointBox
	last     func(v any) error
	stopping <-chan struct{}
	ask      Asker
	// sendAgent delivers Agent's messages; agents counts the sessions
	// the call opened (agent.go).
	sendAgent AgentSender
	agents    *agentBox
}

// checkpointBox holds a call's checkpoint: heartbeats from other
// goroutines (a watcher, a server's progress) read it.
type checkpointBox struct {
	mu sync.Mutex
	v  any
}

func (c *Context) checkpoint() any {
	if c.cp == nil {
		return nil
	}
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	return c.cp.v
}

// Heartbeat reports progress. Long tools should call it more often than
// their HeartbeatTimeout; an attempt that stops heartbeating fails (and is
// retried only under the tool's retry policy, see Tool.Idempotent). A
// heartbeat without details repeats the last Checkpoint.
func (c *Context) Heartbeat(details ...any) {
	if len(details) == 0 {
		if cp := c.checkpoint(); cp != nil {
			details = []any{cp}
		}
	}
	if c.heartbeat != nil {
		c.heartbeat(details...)
	}
}

// HeartbeatNow sends a heartbeat with the last Checkpoint at once, past
// Temporal's throttling (Heartbeat's are held for up to 80% of
// HeartbeatTimeout), and ends the Context when Temporal answers that the
// call was cancelled. A long wait calls it every second or so to learn
// of a cancelled turn at once rather than at its next throttled
// heartbeat. Each is a request to Temporal (on Temporal Cloud a billed
// action): use it while something that costs runs, not for every call.
// It blocks for the request; where the runtime cannot send one at once
// (a local activity, a test) it is Heartbeat.
func (c *Context) HeartbeatNow() {
	if c.beatNow == nil {
		c.Heartbeat()
		return
	}
	var details []any
	if cp := c.checkpoint(); cp != nil {
		details = []any{cp}
	}
	c.beatNow(details...)
}

// SetHeartbeatNow installs what HeartbeatNow sends with. The runtime
// calls it, with a function that ends the Context when the call was
// cancelled.
func (c *Context) SetHeartbeatNow(fn func(details ...any)) { c.beatNow = fn }

// Checkpoint heartbeats with v and keeps it: heartbeats without details
// repeat it, so that a retried attempt reads it with LastHeartbeat even
// when the lost attempt heartbeated again afterwards.
func (c *Context) Checkpoint(v any) {
	if c.cp == nil {
		c.cp = &checkpointBox{}
	}
	c.cp.mu.Lock()
	c.cp.v = v
	c.cp.mu.Unlock()
	c.Heartbeat(v)
}

// LastHeartbeat decodes into v the details of the last heartbeat an
// earlier attempt of this call recorded, and reports whether there was
// one: a checkpoint, from which a retried attempt (on another worker,
// after a crash) resumes instead of starting over. Only the first
// detail is decoded.
func (c *Context) LastHeartbeat(v any) bool {
	return c.last != nil && c.last(v) == nil
}

// SetLastHeartbeat installs what LastHeartbeat reads. The runtime calls
// it; tests of tools may too.
func (c *Context) SetLastHeartbeat(fn func(v any) error) { c.last = fn }

// WorkerStopping reports whether the call's context ends because its
// worker stops (the call goes on in a later attempt, on another worker),
// rather than because the call was cancelled or timed out.
func (c *Context) WorkerStopping() bool {
	if c.stopping == nil {
		return false
	}
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}

// SetWorkerStop installs the channel WorkerStopping reads (closed when
// the worker stops). The runtime calls it.
func (c *Context) SetWorkerStop(ch <-chan struct{}) { c.stopping = ch }

// ReportProgress heartbeats with how far the call got: progress counts up
// (each report at least the last), total is what it counts to (0: not
// known), message says what it does now. Callers that asked for progress
// receive it (MCP clients as notifications/progress). Temporal records
// heartbeats at most every 80% of HeartbeatTimeout (30 s without one), so
// set HeartbeatTimeout to what callers should see; reports in between
// are merged into the latest.
func (c *Context) ReportProgress(progress, total float64, message string) {
	p := protocol.Progress{Progress: progress, Message: message}
	if total > 0 {
		p.Total = &total
	}
	c.Heartbeat(p)
}

// NewContext builds a Context. The runtime calls it; tests of tools may too.
func NewContext(ctx context.Context, session auth.Session, turnID, callID, toolName string, attempt int32, heartbeat func(...any)) *Context {
	return &Context{
		Context:        ctx,
		Session:        session,
		TurnID:         turnID,
		CallID:         callID,
		ToolName:       toolName,
		IdempotencyKey: IdempotencyKey(session.ID, turnID, callID),
		Attempt:        attempt,
		heartbeat:      heartbeat,
		cp:             &checkpointBox{},
		agents:         &agentBox{},
	}
}

// IdempotencyKey is the key NewContext gives a call: "<session>/<turn>/<call>",
// or "<session>/<call>" when the turn is empty or is the session itself (a
// tools-API execution, whose session and turn are the execution id).
func IdempotencyKey(sessionID, turnID, callID string) string {
	if turnID == "" || turnID == sessionID {
		return sessionID + "/" + callID
	}
	return sessionID + "/" + turnID + "/" + callID
}

// ExecuteFunc runs a tool. The returned value is marshalled to JSON and
// checked against the output schema. An error fails this attempt; it is
// retried only when the tool is Idempotent or sets its own Retry policy, and
// never when wrapped with NonRetryable.
type ExecuteFunc func(ctx *Context, input json.RawMessage) (any, error)

// RetryPolicy bounds the attempts of a tool call. Zero fields take
// Temporal's defaults (1 s initial interval, coefficient 2, maximum interval
// 100 × the initial one), except MaximumAttempts.
type RetryPolicy struct {
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaximumInterval    time.Duration
	// MaximumAttempts counts the first attempt; 1 means no retries. 0 means
	// DefaultMaxAttempts (3), never unlimited; negative is a registration
	// error.
	MaximumAttempts int32
}

// Defaults for tool execution.
const (
	DefaultTimeout = 60 * time.Second
	// DefaultMaxAttempts is the number of attempts of an Idempotent tool
	// without its own Retry policy, and what MaximumAttempts 0 in a tool's
	// own policy stands for.
	DefaultMaxAttempts = 3
	// DefaultMaxOutputBytes bounds a tool's JSON output when the tool sets
	// no MaxOutputBytes (1 MiB).
	DefaultMaxOutputBytes = 1 << 20
)

// DefaultRetry is the policy of an Idempotent tool that sets no Retry
// policy of its own.
var DefaultRetry = RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: DefaultMaxAttempts}

// NoRetry is the policy of a tool that is neither Idempotent nor sets a
// Retry policy: it runs once. A failed, timed-out or interrupted attempt
// (its worker died) fails the call, and the model sees that error.
var NoRetry = RetryPolicy{MaximumAttempts: 1}

// Tool is one tool an agent offers the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema for an object (use
	// {"type":"object","properties":{}} for a tool without arguments).
	InputSchema json.RawMessage
	// OutputSchema is optional; when set, Execute's result must match it.
	OutputSchema json.RawMessage
	Execute      ExecuteFunc

	// Timeout bounds one attempt (default 60 s).
	Timeout time.Duration
	// HeartbeatTimeout, when set, fails an attempt that stops heartbeating.
	HeartbeatTimeout time.Duration
	// ClientInput lets Execute ask the MCP client that calls it for input
	// (AskClient: elicitation, sampling, roots), in rounds: each round is
	// one execution, whose Context.Client carries the last round's answers.
	// Outside MCP, Context.Client is nil.
	ClientInput bool
	// Idempotent says that running the call twice does no harm (or that
	// Execute de-duplicates by Context.IdempotencyKey). Only then is a
	// failed attempt retried with DefaultRetry (3 attempts) — including an
	// attempt lost with its worker, which runs again on another worker once
	// its Timeout or HeartbeatTimeout has passed. A tool that is not
	// Idempotent and sets no Retry runs at most once (NoRetry).
	Idempotent bool
	// Retry sets the tool's own retry policy, whether or not it is
	// Idempotent: setting it says the tool accepts being run again.
	// MaximumAttempts 0 means DefaultMaxAttempts; 1 means no retries.
	Retry *RetryPolicy
	// MaxOutputBytes bounds the size of one call's output as JSON: Execute's
	// marshalled result, a delegated job's completion output, or a client
	// tool's answer (0 means DefaultMaxOutputBytes, 1 MiB; negative is a
	// registration error). A larger output never fails the turn: the call
	// fails with code TOOL_OUTPUT_TOO_LARGE, and the model sees that error
	// as its result (a delegated completion is refused with 422 instead,
	// leaving the action pending). Return less (page or summarize) rather
	// than raise it: everything a tool returns is recorded in Temporal
	// history and sent to the model.
	MaxOutputBytes int
	// InputDeadline is how long a person has to answer this tool's
	// approval or question: at the deadline the request settles as
	// expired, and the model reads that nobody answered in time. 0 takes
	// the agent's default (agent.Agent.InputDeadline); negative: no
	// deadline. Between MinInputDeadline and MaxInputDeadline.
	InputDeadline time.Duration
	// InputReminders remind whoever may answer before the deadline
	// (nil: the agent's, agent.Agent.InputReminders).
	InputReminders *Reminders
	// Approval gates the call (default approval.Never()).
	Approval approval.Policy
	// Title names the tool for people, e.g. in "Approve Refund Charge?"
	// (default: derived from Name).
	Title string
	// Client makes this a client tool (see DefineClient); Execute is nil.
	Client *Client
	// Delegated makes this a delegated tool (see DefineDelegated).
	Delegated *Delegated
	// Workflow makes this a workflow tool: a call runs a Temporal
	// workflow as a child (see DefineWorkflow).
	Workflow *Workflow
	// Nexus makes this a Nexus tool: a call runs an operation behind a
	// Nexus endpoint (see DefineNexus).
	Nexus *Nexus
	// Subagent makes this a subagent's tool: a call delegates to a child
	// session of that agent (see DefineSubagent, agent.Agent.Subagents).
	Subagent *Subagent
	// Remote is set on a tool a connection serves (package connections).
	Remote *Remote
	// Task makes the tool's calls tasks: a receipt now, the result later
	// (see AsTask).
	Task *Task

	// Local runs the tool as a Temporal local activity: much lower latency,
	// but an attempt interrupted by a worker crash, or whose workflow task
	// fails, runs again without a recorded start (same IdempotencyKey), and
	// it cannot heartbeat. Use it only for fast,
	// idempotent tools (and mark them Idempotent to have failed attempts
	// retried).
	Local bool

	// Catalog metadata: how the tools API and MCP describe the tool
	// (docs/catalog.md). agent.Register (and so eve.NewWorker) checks
	// them, and the rest of the tool, against the catalog's rules, so
	// every tool an agent serves can be served to turns, the tools API
	// and MCP alike; a resolver's tools are held to the same rules.

	// Toolkit is the toolkit slug of the tool's canonical name
	// "<toolkit>.<Name>" (lowercase words joined by "_" or "-", such as
	// "billing"). Empty: the toolkit of the catalog the tool is listed in
	// (the tools API uses the agent's name as a slug).
	Toolkit string
	// Capability groups tools by what they do, such as "email.send"
	// (default: the toolkit slug).
	Capability string
	// Version is the tool's semantic version (default "1.0.0").
	Version string
	// Annotations describe the tool's behaviour to clients: ReadOnly,
	// Destructive (not both), Idempotent, OpenWorld. The catalog also marks
	// a tool Idempotent when the tool is, and a delegated tool Async and
	// OpenWorld.
	Annotations Annotations

	input  *schema.Schema
	output *schema.Schema
}

// Annotations describe a tool's behaviour to clients and policies, as the
// catalog and MCP show them.
type Annotations struct {
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool
	// Destructive: the tool may delete or overwrite (meaningful only when
	// not ReadOnly).
	Destructive bool
	// Idempotent: repeating a call with the same input has no further
	// effect (the tool's Idempotent field sets it too).
	Idempotent bool
	// OpenWorld: the tool reaches outside systems (the web, third-party APIs).
	OpenWorld bool
}

// Remote describes a tool served by a connection (an MCP server or an
// OpenAPI operation). Package connections sets it.
type Remote struct {
	// Connection is the connection's name. It owns every tool name that
	// starts with "<Connection>__": an authored tool under that prefix is
	// a resolve error naming both.
	Connection string
	// Tool is the tool's name on the remote side.
	Tool string
	// Identity names where calls go: a digest of the connection's endpoint
	// and instance key, never a secret. The resolution that offers the tool
	// records it, and a call whose tool resolves to another identity by the
	// time it runs (an approval answered days later included) fails instead
	// of going to a new destination.
	Identity string
}

// nonRetryable marks an error that must not be retried.
type nonRetryable struct{ err error }

func (e nonRetryable) Error() string { return e.err.Error() }
func (e nonRetryable) Unwrap() error { return e.err }

// NonRetryable wraps err so the call fails at once instead of being retried.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return nonRetryable{err}
}

// IsNonRetryable reports whether err was wrapped with NonRetryable.
func IsNonRetryable(err error) bool {
	var nr nonRetryable
	return errors.As(err, &nr)
}

// Func defines a tool from a typed function. The input schema is derived
// from In and the output schema from Out (struct fields become required
// properties unless tagged omitempty; `jsonschema:"..."` tags describe them).
func Func[In, Out any](name, description string, fn func(ctx *Context, in In) (Out, error)) *Tool {
	t := &Tool{Name: name, Description: description}
	in, err := jsonschema.For[In](nil)
	if err == nil {
		t.InputSchema, err = json.Marshal(in)
	}
	if err != nil {
		t.InputSchema = json.RawMessage(fmt.Sprintf(`{"$comment":%q}`, "cannot derive schema: "+err.Error()))
	}
	// Tool results are JSON objects in the catalog (and MCP's
	// structuredContent): an output schema is kept only for a Go type whose
	// schema is an object (a struct or a map); other results are not checked.
	if out, err := jsonschema.For[Out](nil); err == nil && out.Type == "object" {
		if b, err := json.Marshal(out); err == nil {
			t.OutputSchema = b
		}
	}
	t.Execute = func(ctx *Context, raw json.RawMessage) (any, error) {
		var v In
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, NonRetryable(fmt.Errorf("decode input: %w", err))
		}
		return fn(ctx, v)
	}
	return t
}

// compile checks the tool's definition; each problem names the rule.
func (t *Tool) compile() error {
	var errs []error
	if !NamePattern.MatchString(t.Name) {
		errs = append(errs, fmt.Errorf("name must match %s (letters, digits, _ and -, at most 64)", NamePattern))
	}
	if IsTaskControl(t.Name) {
		errs = append(errs, fmt.Errorf("the name %s is eve's own (the tools it adds for tasks)", t.Name))
	}
	if t.Description == "" {
		errs = append(errs, errors.New("description is required: it is how the model decides to call the tool"))
	}
	if len(t.InputSchema) == 0 {
		errs = append(errs, errors.New(`input schema is required; use {"type":"object","properties":{}} for a tool without arguments`))
	} else if s, err := schema.Compile(t.Name+"/input", t.InputSchema); err != nil {
		errs = append(errs, fmt.Errorf("input schema: %w", err))
	} else if s.RootType() != "object" {
		errs = append(errs, errors.New(`input schema: the root must be {"type":"object"} (model providers send tool input as an object)`))
	} else {
		t.input = s
	}
	if t.Client != nil {
		errs = append(errs, t.compileClient()...)
	} else if t.Delegated != nil {
		errs = append(errs, t.compileDelegated()...)
	} else if t.Workflow != nil {
		errs = append(errs, t.compileWorkflow()...)
	} else if t.Nexus != nil {
		errs = append(errs, t.compileNexus()...)
	} else if t.Subagent != nil {
		errs = append(errs, t.compileSubagent()...)
	} else if t.Execute == nil {
		errs = append(errs, errors.New("Execute is required (or define a client tool with DefineClient)"))
	}
	if t.Task != nil {
		errs = append(errs, t.compileTask()...)
	}
	if len(t.OutputSchema) > 0 {
		if s, err := schema.Compile(t.Name+"/output", t.OutputSchema); err != nil {
			errs = append(errs, fmt.Errorf("output schema: %w", err))
		} else {
			t.output = s
		}
	}
	if err := CheckInputDeadline(t.InputDeadline); err != nil {
		errs = append(errs, fmt.Errorf("InputDeadline: %w", err))
	}
	if err := t.InputReminders.Check(); err != nil {
		errs = append(errs, fmt.Errorf("InputReminders: %w", err))
	}
	if e, ok := t.Approval.Escalation(); ok {
		if err := e.Check(); err != nil {
			errs = append(errs, fmt.Errorf("Approval: %w", err))
		}
	}
	if t.Timeout < 0 || t.HeartbeatTimeout < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	if t.MaxOutputBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxOutputBytes %d must not be negative (0 means the default, %d bytes)", t.MaxOutputBytes, DefaultMaxOutputBytes))
	}
	if t.Retry != nil && t.Retry.MaximumAttempts < 0 {
		errs = append(errs, errors.New("retry: MaximumAttempts must not be negative"))
	}
	if t.ClientInput && (t.Client != nil || t.Delegated != nil || t.Workflow != nil || t.Nexus != nil) {
		errs = append(errs, errors.New("ClientInput is for tools whose Execute runs: a client, delegated, workflow or Nexus tool cannot ask an MCP client"))
	}
	if t.Local && t.HeartbeatTimeout > 0 {
		errs = append(errs, errors.New("a Local tool cannot heartbeat: drop HeartbeatTimeout or Local"))
	}
	if t.Approval.IsEditable() && (t.Approval.Kind() == approval.KindNever || t.Client != nil) {
		errs = append(errs, errors.New("an editable approval needs a policy that asks a person (Always, Once, Custom or Auto) on a tool that is not a client tool: drop Editable or change the policy"))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// ValidateInput checks model input against the input schema.
func (t *Tool) ValidateInput(input json.RawMessage) error {
	if t.input == nil {
		return fmt.Errorf("tool %s is not registered", t.Name)
	}
	return t.input.Validate(input)
}

// ValidateOutput checks a result against the output schema, if any.
func (t *Tool) ValidateOutput(output json.RawMessage) error {
	if t.output == nil {
		return nil
	}
	return t.output.Validate(output)
}

// EffectiveTimeout is the per-attempt timeout.
func (t *Tool) EffectiveTimeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}

// EffectiveMaxOutputBytes is the output limit in force: MaxOutputBytes, or
// DefaultMaxOutputBytes when it is not set.
func (t *Tool) EffectiveMaxOutputBytes() int {
	if t.MaxOutputBytes > 0 {
		return t.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

// EffectiveRetry is the retry policy in force: the tool's own Retry (with
// MaximumAttempts 0 read as DefaultMaxAttempts), else DefaultRetry for an
// Idempotent tool, else NoRetry. The model step records it in each call's
// plan, so changing a tool's policy affects only calls planned afterwards.
func (t *Tool) EffectiveRetry() RetryPolicy {
	switch {
	case t.Retry != nil:
		r := *t.Retry
		if r.MaximumAttempts == 0 {
			r.MaximumAttempts = DefaultMaxAttempts
		}
		return r
	case t.Idempotent:
		return DefaultRetry
	default:
		return NoRetry
	}
}

// DisplayTitle is the tool's name for people.
func (t *Tool) DisplayTitle() string {
	if t.Title != "" {
		return t.Title
	}
	words := strings.FieldsFunc(t.Name, func(r rune) bool { return r == '_' || r == '-' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// Bounds of an input deadline (tools.Tool.InputDeadline,
// agent.Agent.InputDeadline).
const (
	MinInputDeadline = time.Second
	MaxInputDeadline = 365 * 24 * time.Hour
)

// CheckInputDeadline checks an input deadline: 0 (the default), negative
// (none), or between MinInputDeadline and MaxInputDeadline.
func CheckInputDeadline(d time.Duration) error {
	if d > 0 && (d < MinInputDeadline || d > MaxInputDeadline) {
		return fmt.Errorf("%v is out of range: give between %v and %v, 0 for the default, or a negative value for none", d, MinInputDeadline, MaxInputDeadline)
	}
	return nil
}
