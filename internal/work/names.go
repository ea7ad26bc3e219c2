// Package work is the contract between eve's workflows (package workflows)
// and its activities (package activities): the names a workflow schedules
// activities by, their inputs and outputs as history records them, the
// plan of each tool call and its outcome, and the error types and
// timeouts both sides agree on. Changing a type here changes what saved
// histories hold: see CONTRIBUTING.md, "A replay-affecting workflow
// change".
package work

import (
	"time"

	"github.com/eve-temporal/eve/tools"
)

// Registered activity names.
const (
	ModelStepName          = "eve.ModelStep"
	ExecuteToolName        = "eve.ExecuteTool"
	EvaluateApprovalName   = "eve.EvaluateApproval"
	EvaluateResponseName   = "eve.EvaluateResponse"
	ResolveToolsName       = "eve.ResolveTools"
	AppendConversationName = "eve.AppendConversation"
	CompactName            = "eve.Compact"
	// ReviseConversationName replaces the model's answer in the stored
	// conversation.
	ReviseConversationName = "eve.ReviseConversation"
	// TurnEventsName reads the events of a turn that ended abnormally.
	TurnEventsName = "eve.TurnEvents"
	// RemindName runs the worker's reminder hook.
	RemindName = "eve.Remind"
)

// Error types of application errors the activities raise.
const (
	ErrTypeModel     = "ModelError"
	ErrTypeTool      = "ToolError"
	ErrTypeBadConfig = "ConfigError"
	// A response policy failed or did not answer in time.
	ErrTypeResponsePolicy  = "ResponsePolicyError"
	ErrTypeResponseTimeout = "ResponsePolicyTimeout"
	// A call that learned of its cancellation before its activity's
	// context ended (tools.Context.HeartbeatNow).
	ErrTypeCancelled = "CallCancelled"
	// ErrTypeNoClient: the activity needs the worker's Temporal client
	// (agent.Host.Client), and the worker has none.
	ErrTypeNoClient = "NoClient"
	// ErrTypeReminder is a failed reminder hook.
	ErrTypeReminder = "ReminderError"
	// ErrTypeResolve marks a resolver failure (non-retryable when it is a
	// definition error such as two resolvers returning one name).
	ErrTypeResolve = "ResolveError"
	// ErrTypeStore is a payload store failure (retried).
	ErrTypeStore = "StoreError"
)

// Kinds of call, as plans record them (tools.Kind; one table of what each
// implies: tools.Kind.Info).
const (
	KindAuthored  = string(tools.KindAuthored)
	KindClient    = string(tools.KindClient)
	KindDelegated = string(tools.KindDelegated)
	KindWorkflow  = string(tools.KindWorkflow)
	KindNexus     = string(tools.KindNexus)
)

// Timeouts of the policy and hook activities.
const (
	// PolicyTimeout bounds one custom approval policy evaluation.
	PolicyTimeout = 10 * time.Second
	// ResponsePolicyTimeout bounds one response policy evaluation (eve's 10 s).
	ResponsePolicyTimeout = 10 * time.Second
	// RemindTimeout bounds one attempt of the reminder hook; RemindAttempts
	// the attempts of one notice.
	RemindTimeout  = 30 * time.Second
	RemindAttempts = 5
)

// Reasons of candidates whose response policy did not decide.
const (
	ReasonResponseFailed   = "We couldn't verify your response. Please try again."
	ReasonResponseTimedOut = "The approval policy did not answer in time. Please try again."
)
