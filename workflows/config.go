// Package workflows holds eve's workflow code: the session (an entity that
// receives messages, keeps the conversation and the event log, and runs one
// workflow per turn), the turn (the model → tools step loop) and the tools
// API's execution.
//
// An app needs two things from it: Register, to run the workflows on a
// worker it builds itself (agent.Register calls it), and Replay, to check
// its saved histories against a new build before rolling it out (the eve
// replay command). Clients reach the workflows through package signals.
//
// Workflow code is deterministic: it reads no clocks but workflow time, no
// randomness, no maps for order, no network, and no worker configuration
// except through Config, which a session records once when it starts.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/tools"
)

// Config is recorded in a session's history when it starts and carried
// across continue-as-new, so a worker restarted with other settings cannot
// change the decisions of a running session.
type Config struct {
	AgentName string `json:"agentName"`
	ModelID   string `json:"modelId"`
	// Traced: the worker that started the session traced it (EVE_OTEL_EXPORTER),
	// so its turns' turn.started carry data.trace. Recorded with the rest,
	// so a replay on a worker configured otherwise records the same events.
	Traced bool `json:"traced,omitempty"`
	// MaxSteps ends a turn with turn.failed after this many model steps.
	MaxSteps int `json:"maxSteps"`
	// LocalModel runs model steps as local activities (lower latency; a
	// step interrupted by a crash runs again).
	LocalModel       bool          `json:"localModel"`
	ModelTimeout     time.Duration `json:"modelTimeout"`
	ModelMaxAttempts int32         `json:"modelMaxAttempts"`
	// SearchAttributes: the namespace has eve's search attributes, so
	// workflows record their status in them.
	SearchAttributes bool `json:"searchAttributes,omitempty"`
	// CodeAgents: the agent has subagents a tool's code may open sessions
	// with (tools.Context.Agent), so its turns record their agent.started
	// (agentcall.go).
	CodeAgents bool `json:"codeAgents,omitempty"`
	// NoInbox: the namespace lacks the inbox's attributes (InboxAttributes),
	// so parked turns do not list their requests (the status still records).
	NoInbox bool `json:"noInbox,omitempty"`
	// ContinueAsNewAfterTurns, when positive, continues the session as new
	// after that many turns in one run, besides when the SDK suggests it.
	ContinueAsNewAfterTurns int `json:"continueAsNewAfterTurns,omitempty"`
	// StreamText records streamed model text as message.appended events
	// (regular model activities only).
	StreamText bool `json:"streamText,omitempty"`
	// ResolverScopes lists the scopes that have tool resolvers.
	ResolverScopes []string `json:"resolverScopes,omitempty"`
	// ContextWindow is the model's context window in tokens; CompactAt the
	// share of it at which the conversation is compacted before a model
	// step (negative: never automatically).
	ContextWindow int     `json:"contextWindow,omitempty"`
	CompactAt     float64 `json:"compactAt,omitempty"`
	// Limits are the session's usage limits (zero: none).
	Limits SessionLimits `json:"limits,omitempty"`
	// SessionLifetime ends a session that long after it started, once it
	// is idle (session.completed); zero: never.
	SessionLifetime time.Duration `json:"sessionLifetime,omitempty"`
	// InputDeadline is the agent's default deadline for a person's
	// answer to an approval or question (0: none).
	InputDeadline time.Duration `json:"inputDeadline,omitempty"`
	// InputReminders are the agent's default reminders before a deadline;
	// ReminderHook: the worker notifies people of reminders and
	// escalations (eve.Remind activities).
	InputReminders *tools.Reminders `json:"inputReminders,omitempty"`
	ReminderHook   bool             `json:"reminderHook,omitempty"`
}

// SessionLimits cap what a session spends on its model (eve's "Runtime
// limits"): provider-reported input and output tokens, and model token
// cost at the agent's declared price. Zero fields are no limit.
type SessionLimits struct {
	MaxInputTokens  int     `json:"maxInputTokens,omitempty"`
	MaxOutputTokens int     `json:"maxOutputTokens,omitempty"`
	MaxCostUSD      float64 `json:"maxCostUsd,omitempty"`
	// USD per million input and output tokens of the session's model.
	InputUSDPerMTok  float64 `json:"inputUsdPerMTok,omitempty"`
	OutputUSDPerMTok float64 `json:"outputUsdPerMTok,omitempty"`
	// Unattended: nobody can be asked to continue; the next model call
	// past a limit fails the turn.
	Unattended bool `json:"unattended,omitempty"`
}

func (c Config) hasScope(s string) bool {
	for _, x := range c.ResolverScopes {
		if x == s {
			return true
		}
	}
	return false
}

// Defaults.
const (
	defaultMaxSteps         = 12
	defaultModelTimeout     = 2 * time.Minute
	defaultModelMaxAttempts = 4
	defaultContextWindow    = 200_000
	defaultCompactAt        = 0.9
)

// WithDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.MaxSteps <= 0 {
		c.MaxSteps = defaultMaxSteps
	}
	if c.ModelTimeout <= 0 {
		c.ModelTimeout = defaultModelTimeout
	}
	if c.ModelMaxAttempts <= 0 {
		c.ModelMaxAttempts = defaultModelMaxAttempts
	}
	if c.ContextWindow <= 0 {
		c.ContextWindow = defaultContextWindow
	}
	if c.CompactAt == 0 {
		c.CompactAt = defaultCompactAt
	}
	if c.AgentName == "" {
		c.AgentName = "agent"
	}
	return c
}

func (c Config) modelRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		MaximumAttempts:        c.ModelMaxAttempts,
		NonRetryableErrorTypes: []string{"ModelError"},
	}
}

// Runtime carries the worker's configuration into the workflows it registers.
type runtime struct {
	Config Config
	// Notifier, when set, hears that a session recorded events (streams
	// learn of changes from it instead of polling). Nil: nobody is told.
	Notifier Notifier
}

// Notifier hears "session sessionID now holds events events". It is a side
// effect outside workflow state, like logging: it is called when an event
// is recorded, never during replay, and must not block. A notification may
// arrive before the workflow task that holds the event completes: readers
// re-read until they see the count.
type Notifier interface {
	Notify(sessionID string, events int)
}

// notify tells the Notifier, if any, outside replay.
func (r *runtime) notify(ctx workflow.Context, sessionID string, events int) {
	if r == nil || r.Notifier == nil || workflow.IsReplaying(ctx) {
		return
	}
	r.Notifier.Notify(sessionID, events)
}
