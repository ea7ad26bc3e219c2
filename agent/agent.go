// Package agent bundles what a worker serves — tools, a model, limits — and
// registers eve's workflows and activities on a Temporal worker. Apps that
// build their own worker binary use it; cmd/worker uses it for the demo agent.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/toolcatalog"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/workflows"
)

// Agent is one agent definition: what an app declares — its name, model,
// tools, policies, limits and prompts. What the process running it wires
// in (a Temporal client, the payload store, a logger, completion URLs) is
// its Host, which eve's commands and eve.NewWorker build.
type Agent struct {
	// RegisterWorker, when set, registers the app's own workflows,
	// activities and Nexus services on every worker the agent is
	// registered on (Register calls it last): those its workflow tools
	// start (tools.DefineWorkflow) on the agent's task queue.
	RegisterWorker func(w worker.Registry)
	// Name names the agent in session.started, /eve/v1/info and the memo,
	// and is an app binary's default task queue (EVE_TASK_QUEUE overrides it).
	Name string
	// Description says what the agent does. A parent that lists it in
	// Subagents shows it to its model as the subagent tool's description;
	// required then.
	Description string
	// Subagents are the agents this one may delegate to (eve's
	// subagents; docs/subagents.md). Each is a whole agent of its own —
	// name, description, model, tools, policies, limits: nothing is
	// inherited — and becomes a model-facing tool of its name, input
	// {message, taskId?}, whose calls are resumable tasks of kind "agent":
	// the first starts a child session of the subagent, a later call by
	// taskId sends the same child another message. The child runs on its
	// own task queue (QueueOf), where the worker host runs a worker for it.
	Subagents []*Agent
	// AgentTool gives the agent eve's built-in tool "agent": the model
	// delegates a focused subtask to a copy of this agent — same model,
	// system prompt, tools, policies and limits, a fresh conversation —
	// with input {message, taskId?}, as it would to a subagent
	// (docs/subagents.md). The copy cannot delegate again: it has no
	// "agent" tool and no subagents. Root-only, as eve's: a subagent
	// cannot have it, and no subagent may be named "agent". (eve gives
	// root agents the tool by default; here it is opted into.)
	AgentTool bool
	// CodeOnly keeps this agent, as a subagent, out of its parent's model
	// tools (eve's tool: false): only a tool's code delegates to it
	// (tools.Context.Agent), and a tool of the parent may take its name
	// (an authored tool that wraps it). It still needs a Description.
	CodeOnly bool
	// System is the system prompt of every model step.
	System string
	Model  model.Model
	Tools  *tools.Registry
	// MaxSteps bounds model steps per turn (default 12).
	MaxSteps int
	// LocalModel runs model steps as local activities. Right for fast,
	// cheap models (the scripted one); real providers with long streamed
	// responses are better served by regular activities.
	LocalModel bool
	// Disable removes built-in tools (such as ask_question) by name.
	// Naming a tool that does not exist is an error.
	Disable []string
	// Resolvers add tools at session, turn or step start.
	Resolvers []tools.Resolver
	// StreamText records streamed model text as message.appended events
	// (needs Host.Client, and a regular model activity: LocalModel false).
	StreamText bool
	// ContinueAsNewAfterTurns, when positive, starts a session's next run
	// after that many turns (besides when Temporal suggests it).
	ContinueAsNewAfterTurns int
	// ContextWindow is the model's context window in tokens (default
	// 200,000). The conversation is compacted automatically when it
	// reaches CompactAt of it.
	ContextWindow int
	// CompactAt is the share of the context window at which a turn
	// compacts the conversation before its next model step (default 0.9;
	// negative turns automatic compaction off).
	CompactAt float64

	// Session limits (eve's "Runtime limits"): before the next model call
	// past one, the turn asks a person to Continue (a fresh window of each
	// limit, same turn) or Stop (the turn is cancelled); docs/limits.md.
	// MaxInputTokensPerSession defaults to 40,000,000 provider-reported
	// input tokens (negative: no limit); the others are off when zero.
	MaxInputTokensPerSession  int
	MaxOutputTokensPerSession int
	// MaxTokenCostPerSession is a US-dollar limit on model token cost at
	// the price Prices declares for the agent's model (Model.ID()).
	MaxTokenCostPerSession float64
	Prices                 map[string]ModelPrice
	// Unattended: nobody can be asked in this agent's sessions (schedules,
	// batch jobs): a model call past a limit fails the turn with
	// SESSION_TOKEN_LIMIT_REACHED or SESSION_TOKEN_COST_LIMIT_REACHED.
	Unattended bool
	// SessionLifetime ends each session that long after it started, once
	// no turn runs and no message waits: session.completed, after which it
	// takes no messages (default 30 days, as eve; negative: never).
	SessionLifetime time.Duration
	// InputDeadline is the default deadline of a person's answer to an
	// approval or a question in this agent's turns (a tool's own
	// tools.Tool.InputDeadline wins): at the deadline the request settles
	// as expired, the model reads that nobody answered in time, and the
	// turn goes on. 0 or negative: none (as eve). Between
	// tools.MinInputDeadline and tools.MaxInputDeadline.
	InputDeadline time.Duration
	// InputReminders are the default reminders before a deadline (a
	// tool's own tools.Tool.InputReminders win; nil: none). Each is an
	// input.reminder event and a call of OnReminder.
	InputReminders *tools.Reminders
	// OnReminder notifies people of reminders and of approvals that
	// escalated (approval.Policy.EscalateAfter): email, chat, a webhook
	// (docs/approvals.md). It runs in an activity once per notice, retried
	// when it fails (5 attempts), so it must tolerate a repeat of the same
	// Reminder.IdempotencyKey. Sessions started without it never call it.
	OnReminder func(ctx context.Context, r tools.Reminder) error
}

// DefaultSessionLifetime is eve's default session lifetime.
const DefaultSessionLifetime = 30 * 24 * time.Hour

// ModelPrice is a model's price in US dollars per million tokens.
type ModelPrice struct {
	InputPerMTok, OutputPerMTok float64
}

// DefaultMaxInputTokensPerSession is eve's default input budget.
const DefaultMaxInputTokensPerSession = 40_000_000

func lifetime(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultSessionLifetime
	case d < 0:
		return 0
	}
	return d
}

// sessionLimits is what the agent's sessions record of its limits.
func (a *Agent) sessionLimits() (workflows.SessionLimits, error) {
	l := workflows.SessionLimits{MaxInputTokens: a.MaxInputTokensPerSession, MaxOutputTokens: max(a.MaxOutputTokensPerSession, 0),
		MaxCostUSD: a.MaxTokenCostPerSession, Unattended: a.Unattended}
	switch {
	case l.MaxInputTokens == 0:
		l.MaxInputTokens = DefaultMaxInputTokensPerSession
	case l.MaxInputTokens < 0:
		l.MaxInputTokens = 0
	}
	if l.MaxCostUSD < 0 {
		return l, fmt.Errorf("register agent %s: MaxTokenCostPerSession is %v; want a positive US-dollar limit, or 0 for none", a.Name, l.MaxCostUSD)
	}
	if l.MaxCostUSD > 0 {
		p, ok := a.Prices[a.Model.ID()]
		if !ok {
			return l, fmt.Errorf("register agent %s: MaxTokenCostPerSession needs the price of model %q: add it to Prices", a.Name, a.Model.ID())
		}
		l.InputUSDPerMTok, l.OutputUSDPerMTok = p.InputPerMTok, p.OutputPerMTok
	}
	return l, nil
}

// Host is what the process that runs an agent wires in: a worker's
// Temporal client, its payload store, its logger, the completion URLs of
// delegated tools, the bus that tells API servers of new events, and which
// search attributes the namespace has. eve's commands and eve.NewWorker
// build it from their flags and environment; an app that builds its own
// Temporal worker fills it for Register (Client and Store at least).
type Host struct {
	// Client is the worker's Temporal client: model steps signal text
	// deltas with it (Agent.StreamText), and a session reads the events of
	// a turn that ended abnormally with it. It must be the client the
	// worker was created with.
	Client client.Client
	// Store holds the conversation and large payloads; use the store the
	// worker's client uses (payloadstore.FromEnv reads EVE_PAYLOAD_STORE).
	// Required.
	Store  payloadstore.Store
	Logger *slog.Logger
	// Actions sign completion URLs of delegated tools (nil: they fail,
	// saying so).
	Actions *Actions
	// Notifier, when set, hears "session X now holds N events" as the
	// workflows record events, so API servers stream by push instead of
	// polling (eve's worker sets it from EVE_NOTIFY).
	Notifier Notifier
	// SearchAttributes records session status in eve's search attributes:
	// each turn writes its own, and a session's is its running turn's (set
	// it only when the namespace has them; eve's worker checks).
	SearchAttributes bool
	// InboxAttributes lists parked turns' open requests in the inbox's
	// search attributes (with SearchAttributes; set it only when the
	// namespace has them too; eve's worker checks).
	InboxAttributes bool
	// ConversationFormat is how conversations are written: one object per
	// model step (conversation.FormatInline, the default), or one per
	// message (conversation.FormatObjects), all an eve 0.4 worker reads:
	// for a fleet that still runs 0.4 workers beside this build. Both are
	// read. eve's worker sets it from EVE_CONVERSATION_FORMAT.
	ConversationFormat conversation.Format
}

// Actions configure the completion URLs of delegated tools: Secret (at
// least 16 bytes, the same EVE_ACTION_SECRET the API servers verify them
// with), PublicURL (the API server as external jobs reach it,
// EVE_PUBLIC_URL) and Grace (how long a URL outlives its action's
// deadline, so a late job is told 410 rather than 401; default 1 h).
type Actions = activities.Actions

// Notifier hears "session X now holds N events" as the workflows record
// events (outside replay), so API servers can stream by push.
type Notifier = workflows.Notifier

// Builtins are the tools eve adds to every agent unless disabled.
func Builtins() []*tools.Tool { return []*tools.Tool{tools.AskQuestion()} }

// Tools is the registry an agent serves — to its turns, the tools API and
// MCP alike: the agent's own tools (minus those it disables) and the
// built-ins it keeps, each checked against the catalog's rules (a
// *catalog.RuleError says which and how to fix it). An agent's own tool of a built-in's name replaces the
// built-in. Disabling a name that no tool or built-in has is an error.
func Tools(a *Agent) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	if a == nil {
		return reg, nil
	}
	var static []*tools.Tool
	if a.Tools != nil {
		static = a.Tools.List()
	}
	known := map[string]bool{}
	for _, t := range static {
		known[t.Name] = true
	}
	builtins := Builtins()
	for _, b := range builtins {
		known[b.Name] = true
	}
	disabled := map[string]bool{}
	for _, name := range a.Disable {
		if !known[name] {
			return nil, fmt.Errorf("disable %q: no tool or built-in has that name (built-ins: %s)", name, builtinNames(builtins))
		}
		disabled[name] = true
	}
	var keep []*tools.Tool
	if a.AgentTool {
		if known[AgentToolName] {
			return nil, fmt.Errorf("AgentTool: a tool is named %q, the name of eve's built-in agent tool: rename the tool or drop AgentTool", AgentToolName)
		}
		known[AgentToolName] = true
		keep = append(keep, agentTool())
	}
	subs := map[string]bool{}
	for _, sub := range a.Subagents {
		if sub == nil {
			return nil, errors.New("subagents: a nil agent")
		}
		if sub.Name == AgentToolName {
			return nil, fmt.Errorf("subagent %q: the name is reserved for eve's built-in agent tool (Agent.AgentTool): rename the subagent", sub.Name)
		}
		if sub.AgentTool {
			return nil, fmt.Errorf("subagent %q: AgentTool is root-only: a subagent cannot delegate to a copy of itself", sub.Name)
		}
		if strings.TrimSpace(sub.Description) == "" {
			return nil, fmt.Errorf("subagent %q: Description is required: it is the tool description the model decides to delegate by", sub.Name)
		}
		if subs[sub.Name] || (!sub.CodeOnly && known[sub.Name]) {
			return nil, fmt.Errorf("subagent %q: a tool or another subagent has that name", sub.Name)
		}
		subs[sub.Name] = true
		if sub.CodeOnly {
			continue // not the model's: code delegates to it (tools.Context.Agent)
		}
		known[sub.Name] = true
		keep = append(keep, tools.DefineSubagent(sub.Name, sub.Description))
	}
	for _, t := range static {
		if !disabled[t.Name] {
			keep = append(keep, t)
		}
	}
	for _, b := range builtins {
		// An agent's own tool of the same name replaces the built-in.
		if !disabled[b.Name] && (a.Tools == nil || !hasTool(a.Tools, b.Name)) {
			keep = append(keep, b)
		}
	}
	if err := reg.Register(keep...); err != nil {
		return nil, err
	}
	if err := toolcatalog.CheckAll(keep...); err != nil {
		return nil, err
	}
	return reg, nil
}

func hasTool(r *tools.Registry, name string) bool { _, ok := r.Get(name); return ok }

func builtinNames(ts []*tools.Tool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// Queue is one agent a worker host serves, and its task queue.
type Queue struct {
	TaskQueue string
	Agent     *Agent
}

// Queues are the agents a worker host serves for a on taskQueue: a itself,
// the copy its AgentTool delegates to (named "agent"), then each subagent
// at any depth on its own queue
// (signals.SubagentTaskQueue: the parent's queue, "/", its name). The host
// runs one worker per queue, each registered with Register.
func Queues(a *Agent, taskQueue string) []Queue {
	out := []Queue{{TaskQueue: taskQueue, Agent: a}}
	if a.AgentTool {
		out = append(out, Queue{TaskQueue: signals.SubagentTaskQueue(taskQueue, AgentToolName), Agent: a.copyForAgentTool()})
	}
	for _, sub := range a.Subagents {
		if sub != nil {
			out = append(out, Queues(sub, signals.SubagentTaskQueue(taskQueue, sub.Name))...)
		}
	}
	return out
}

// Register adds eve's workflows and the agent's activities to w, run with
// what h wires in. A's subagents run on workers of their own (Queues).
func Register(w worker.Registry, a *Agent, h Host) error {
	if a == nil || a.Model == nil {
		return errors.New("register agent: a model is required")
	}
	reg, err := Tools(a)
	if err != nil {
		return fmt.Errorf("register agent %s: %w", a.Name, err)
	}
	var scopes []string
	names := map[string]bool{}
	for _, r := range a.Resolvers {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("register agent %s: %w", a.Name, err)
		}
		if names[r.Name] {
			return fmt.Errorf("register agent %s: two resolvers are named %q", a.Name, r.Name)
		}
		names[r.Name] = true
		if !slices.Contains(scopes, string(r.Scope)) {
			scopes = append(scopes, string(r.Scope))
		}
	}
	if h.Store == nil {
		return fmt.Errorf("register agent %s: a payload store is required: set Host.Store to the store the worker's client uses (payloadstore.FromEnv reads EVE_PAYLOAD_STORE, e.g. file:.eve/payloads or s3://bucket/prefix)", a.Name)
	}
	if a.CompactAt > 1 {
		return fmt.Errorf("register agent %s: CompactAt is %v; want a share of the context window in (0, 1], or negative to turn automatic compaction off", a.Name, a.CompactAt)
	}
	limits, err := a.sessionLimits()
	if err != nil {
		return err
	}
	if err := tools.CheckInputDeadline(a.InputDeadline); err != nil {
		return fmt.Errorf("register agent %s: InputDeadline: %w", a.Name, err)
	}
	if err := a.InputReminders.Check(); err != nil {
		return fmt.Errorf("register agent %s: InputReminders: %w", a.Name, err)
	}
	opts := activities.Options{Tools: reg, Model: a.Model, System: a.System, Resolvers: a.Resolvers, Disabled: a.Disable,
		CheckTool: toolcatalog.Check, OnReminder: a.OnReminder, Store: h.Store, Client: h.Client, Logger: h.Logger, Actions: h.Actions,
		SearchAttributes: h.SearchAttributes, ConversationFormat: h.ConversationFormat}
	for _, sub := range a.Subagents {
		if sub != nil {
			opts.Subagents = append(opts.Subagents, activities.Subagent{Name: sub.Name, Description: sub.Description})
		}
	}
	if sub, ok := h.Notifier.(activities.Subscriber); ok {
		opts.Changes = sub // a bus (notify.Bus) tells waiting calls of answers
	}
	if err := activities.Register(w, opts); err != nil {
		return fmt.Errorf("register agent %s: %w", a.Name, err)
	}
	workflows.Register(w, workflows.Config{
		Limits:                  limits,
		SessionLifetime:         lifetime(a.SessionLifetime),
		InputDeadline:           max(a.InputDeadline, 0),
		InputReminders:          a.InputReminders,
		ReminderHook:            a.OnReminder != nil,
		ResolverScopes:          scopes,
		SearchAttributes:        h.SearchAttributes,
		CodeAgents:              len(a.Subagents) > 0,
		NoInbox:                 !h.InboxAttributes,
		ContinueAsNewAfterTurns: a.ContinueAsNewAfterTurns,
		StreamText:              a.StreamText && h.Client != nil && !a.LocalModel,
		AgentName:               a.Name,
		ModelID:                 a.Model.ID(),
		MaxSteps:                a.MaxSteps,
		LocalModel:              a.LocalModel,
		ContextWindow:           a.ContextWindow,
		CompactAt:               a.CompactAt,
	}, h.Notifier)
	if a.RegisterWorker != nil {
		if err := registerApp(w, a.RegisterWorker); err != nil {
			return fmt.Errorf("register agent %s: RegisterWorker: %w", a.Name, err)
		}
	}
	return nil
}

// registerApp runs the app's RegisterWorker. The SDK panics on a
// registration it refuses (a workflow without a versioning behavior on a
// versioned worker, a name registered twice): that becomes an error that
// says how to fix it, not a crashed worker.
func registerApp(w worker.Registry, register func(worker.Registry)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v (on a versioned worker, EVE_DEPLOYMENT_NAME, each of your workflows needs workflow.RegisterOptions{VersioningBehavior: …}: VersioningBehaviorPinned keeps a tool's workflow on the build that started it, as eve's turns are)", r)
		}
	}()
	register(w)
	return nil
}
