package signals

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// Delegated actions: every rule of a delegated tool call lives here, from
// its ids to how a completion settles it. The workflows, the worker's
// activity, the API server's completion endpoint, the job helper (package
// actions) and `eve action` all follow these.
//
// The life of an action:
//
//  1. The owning workflow (a turn, or a tools API execution) derives the
//     action's id (ActionID) and runs the call as an activity
//     (ToolActivityID) that hands the job a Completion and goes pending.
//  2. The job completes through the completion URL: the API server asks
//     the owning workflow first (UpdateSettleAction: CheckSettle validates,
//     Settle decides), then completes the activity with an ActionResult.
//     A job may also complete the activity itself with the task token.
//  3. The workflow turns what the activity completed with into the call's
//     result (Observe), or ends the action at its deadline or on
//     cancellation (End).
//
// The late-completion rule: a completion the workflow accepted before the
// deadline (state settling) wins over the deadline; one that comes after
// the action ended is refused (410) and never revives it; one that repeats
// how the action settled is answered as a duplicate (LateSettle).

// Messages into the workflow that owns delegated actions.
const (
	// UpdateSettleAction records a completion that arrived through a
	// completion URL, before the API server completes the activity. Payload
	// SettleAction, result SettleDecision. The validator answers conflicts
	// (409), ended actions (410), unknown actions (404) and invalid output
	// (422) without recording anything; see the error types below.
	UpdateSettleAction = "eve.action.settle"
	// QueryAction reads one action's state. Argument action id, result ActionState.
	QueryAction = "eve.action.state"
)

// ActionID derives a delegated call's action id from the workflow that
// owns the call (a turn's, or a tools API execution's) and its call id, so
// it is the same on every replay and retry.
func ActionID(workflowID, callID string) string {
	sum := sha256.Sum256([]byte(workflowID + "\x00" + callID))
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// toolActivityPrefix starts the activity id of every tool call.
const toolActivityPrefix = "tool/"

// ToolActivityID is the activity id of a tool call's activity (delegated
// or not): "tool/<call id>". A task token names it, so `eve action` finds
// the action from the token (ActionIDOfActivity).
func ToolActivityID(callID string) string { return toolActivityPrefix + callID }

// ActionIDOfActivity returns the action a tool call's activity runs: its
// workflow's id and the call id its activity id names. ok is false when
// the activity is no tool call's.
func ActionIDOfActivity(workflowID, activityID string) (actionID string, ok bool) {
	call, ok := strings.CutPrefix(activityID, toolActivityPrefix)
	if !ok || workflowID == "" {
		return "", false
	}
	return ActionID(workflowID, call), true
}

// ActionsPath is the API server's route prefix of completion URLs:
// POST {ActionsPath}{capability} settles an action, and
// POST {ActionsPath}{capability}/heartbeat keeps its job alive.
const ActionsPath = "/eve/v1/actions/"

// Completion is how an external job finishes a delegated call: POST the
// result to URL (a signed capability URL; no other credential needed). ID
// is the action's id.
type Completion struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// CompletionURL returns the completion URL of a capability on the API
// server at baseURL (as jobs reach it).
func CompletionURL(baseURL, capability string) string {
	return strings.TrimRight(baseURL, "/") + ActionsPath + capability
}

// SplitCompletionPath finds the capability in a completion URL's path: the
// segment after the last "/actions/", without a "/heartbeat" suffix (a
// capability is "<claims>.<mac>"). prefix is the path up to it. ok is
// false for other paths, and for completion paths that name an action id
// rather than a capability.
func SplitCompletionPath(path string) (prefix, capability string, ok bool) {
	i := strings.LastIndex(path, "/actions/")
	if i < 0 {
		return "", "", false
	}
	prefix, capability = path[:i+len("/actions/")], path[i+len("/actions/"):]
	capability, _ = strings.CutSuffix(capability, "/heartbeat")
	if capability == "" || strings.Contains(capability, "/") || !strings.Contains(capability, ".") {
		return "", "", false
	}
	return prefix, capability, true
}

// ResultKind marks a completion payload built by eve (the API server or
// the CLI), as opposed to a raw payload an operator completed with.
const ResultKind = "eve.action-result/v1"

// ActionResult is the payload that completes a delegated activity, and
// the result a delegated call ends with (Observe, End).
type ActionResult struct {
	Kind   string                `json:"eve"`
	Status string                `json:"status"` // completed or failed
	Output json.RawMessage       `json:"output,omitempty"`
	Error  *protocol.ActionError `json:"error,omitempty"`
}

// DecodeActionResult reads what a delegated activity completed with: an
// eve ActionResult, or any other JSON value taken as the output itself.
func DecodeActionResult(raw json.RawMessage) ActionResult {
	var r ActionResult
	if json.Unmarshal(raw, &r) == nil && r.Kind == ResultKind {
		return r
	}
	return ActionResult{Kind: ResultKind, Status: protocol.StatusCompleted, Output: raw}
}

// SettleAction is one completion or failure of a delegated action.
type SettleAction struct {
	ActionID string                `json:"actionId"`
	Output   json.RawMessage       `json:"output,omitempty"`
	Error    *protocol.ActionError `json:"error,omitempty"`
}

// SettleDecision tells the API server what to do.
type SettleDecision struct {
	// Complete: complete the activity now. Duplicate: it already settled
	// with this same outcome; answer 200 and do nothing.
	Decision string `json:"decision"`
}

// Decisions.
const (
	DecisionComplete  = "complete"
	DecisionDuplicate = "duplicate"
)

// Application error types of a rejected SettleAction.
const (
	ErrActionUnknown  = "ActionUnknown"  // 404
	ErrActionConflict = "ActionConflict" // 409
	ErrActionGone     = "ActionGone"     // 410
	ErrActionInvalid  = "ActionInvalid"  // 422
)

// SettleError is a refused completion: Type is one of the ErrAction*
// types (workflows raise it as an application error of that type).
type SettleError struct {
	Type    string
	Message string
}

func (e *SettleError) Error() string { return e.Message }

func refuse(errType, format string, args ...any) *SettleError {
	return &SettleError{Type: errType, Message: fmt.Sprintf(format, args...)}
}

// UnknownAction is the refusal of a completion for an action the workflow
// does not hold.
func UnknownAction(actionID string) *SettleError {
	return refuse(ErrActionUnknown, "unknown action %q", actionID)
}

// SettleHTTP is how a completion URL answers a refusal of type errType
// (shared/design.md): its HTTP status and error code. ok is false for
// other types.
func SettleHTTP(errType string) (status int, code string, ok bool) {
	switch errType {
	case ErrActionUnknown:
		return http.StatusNotFound, "unknown_action", true
	case ErrActionConflict:
		return http.StatusConflict, "action_conflict", true
	case ErrActionGone:
		return http.StatusGone, "action_ended", true
	case ErrActionInvalid:
		return http.StatusUnprocessableEntity, "invalid_output", true
	}
	return 0, "", false
}

// Action states.
const (
	ActionPending   = "pending"
	ActionSettling  = "settling" // a completion was accepted; the activity result is on its way
	ActionCompleted = "completed"
	ActionFailed    = "failed"
	ActionExpired   = "deadline-exceeded"
	ActionCancelled = "cancelled"
)

// ActionState is one delegated action as its workflow sees it. Its methods
// are the settle rules; workflow code may call them (they are pure).
type ActionState struct {
	ActionID string    `json:"actionId"`
	Tool     string    `json:"tool"`
	CallID   string    `json:"callId"`
	State    string    `json:"state"`
	Deadline time.Time `json:"deadline"`
	// Hash identifies the settled outcome (see HashSettle).
	Hash string `json:"hash,omitempty"`
}

// Ended reports whether the action ended without its job: deadline or
// cancellation.
func (a ActionState) Ended() bool { return a.State == ActionExpired || a.State == ActionCancelled }

// CheckSettle answers a completion without changing anything (the settle
// Update's validator): nil to accept, else a *SettleError. A completion
// after the action ended is Gone (a late completion cannot revive it); one
// after it settled is accepted when it repeats that outcome and a Conflict
// otherwise; a pending action's completion is Invalid when it is not
// exactly one of output or error, when error has no message, or when
// checkOutput (the tool's output limit and schema, which the workflow
// holds; nil checks nothing) refuses the output.
func (a ActionState) CheckSettle(req SettleAction, checkOutput func(json.RawMessage) error) error {
	if (req.Error == nil) == (req.Output == nil) {
		return refuse(ErrActionInvalid, `send exactly one of "output" or "error"`)
	}
	switch {
	case a.Ended():
		return refuse(ErrActionGone, "action %s ended first (%s); a late completion cannot revive it", a.ActionID, a.State)
	case a.State != ActionPending:
		if a.Hash != HashSettle(req) {
			return refuse(ErrActionConflict, "action %s already settled with a different outcome", a.ActionID)
		}
		return nil
	}
	if req.Output != nil && checkOutput != nil {
		if err := checkOutput(req.Output); err != nil {
			return &SettleError{Type: ErrActionInvalid, Message: err.Error()}
		}
	}
	if req.Error != nil && req.Error.Message == "" {
		return refuse(ErrActionInvalid, "error.message is required")
	}
	return nil
}

// Settle applies a completion CheckSettle accepted (the settle Update's
// handler): a pending action becomes settling, holding the outcome's hash.
// The API server then completes the activity (DecisionComplete), again for
// as long as the workflow has not seen the activity's result, so a crash
// between the Update and the completion is healed by a retry; after that,
// DecisionDuplicate.
func (a *ActionState) Settle(req SettleAction) SettleDecision {
	if a.State == ActionPending {
		a.State = ActionSettling
		a.Hash = HashSettle(req)
	}
	if a.State == ActionSettling {
		return SettleDecision{Decision: DecisionComplete}
	}
	return SettleDecision{Decision: DecisionDuplicate}
}

// LateSettle answers a completion that found no pending activity (the
// owning workflow ended, or the activity is already complete), from the
// action's last state: nil when it repeats how the action settled (answer
// it as a duplicate), else a Conflict (it settled otherwise) or Gone (it
// ended first; a late completion cannot revive it).
func (a ActionState) LateSettle(req SettleAction) error {
	switch a.State {
	case ActionCompleted, ActionFailed, ActionSettling:
		if a.Hash == HashSettle(req) {
			return nil
		}
		return refuse(ErrActionConflict, "action %s already settled with a different outcome (%s)", a.ActionID, a.State)
	}
	return refuse(ErrActionGone, "action %s ended first (%s); a late completion cannot revive it", a.ActionID, a.State)
}

// DeadlineEnds reports whether the action's deadline ends it now: not
// when a completion was accepted (settling), whose result is on its way
// and wins.
func (a ActionState) DeadlineEnds() bool { return a.State != ActionSettling }

// End ends an action without its job (state ActionExpired at its deadline,
// or ActionCancelled) and returns the call's failed result.
func (a *ActionState) End(state string) ActionResult {
	a.State = state
	e := &protocol.ActionError{Code: protocol.CodeDeadlineExceeded,
		Message: fmt.Sprintf("deadline exceeded: the job of tool %s did not complete by %s", a.Tool, a.Deadline.UTC().Format(time.RFC3339))}
	if state == ActionCancelled {
		e = &protocol.ActionError{Code: protocol.CodeToolCancelled, Message: fmt.Sprintf("tool %s was cancelled before its job completed", a.Tool)}
	}
	return ActionResult{Kind: ResultKind, Status: protocol.StatusFailed, Error: e}
}

// Observe settles the action with what its activity completed with (raw,
// see DecodeActionResult) and returns the call's result: the job's failure
// (code TOOL_EXECUTION_FAILED unless it named one), or its output. Output
// that reached the activity without CheckSettle (a raw task-token
// completion) is checked here: refused output fails the call
// (TOOL_OUTPUT_INVALID).
func (a *ActionState) Observe(raw json.RawMessage, checkOutput func(json.RawMessage) error) ActionResult {
	r := DecodeActionResult(raw)
	if r.Status == protocol.StatusFailed {
		a.State = ActionFailed
		e := r.Error
		if e == nil {
			e = &protocol.ActionError{Code: protocol.CodeToolExecution, Message: "the job failed"}
		}
		if e.Code == "" {
			e.Code = protocol.CodeToolExecution
		}
		if a.Hash == "" {
			a.Hash = HashSettle(SettleAction{Error: e})
		}
		return ActionResult{Kind: ResultKind, Status: protocol.StatusFailed, Error: e}
	}
	if err := a.CheckSettle(SettleAction{ActionID: a.ActionID, Output: r.Output}, checkOutput); err != nil && a.State == ActionPending {
		a.State = ActionFailed
		return ActionResult{Kind: ResultKind, Status: protocol.StatusFailed, Error: &protocol.ActionError{Code: protocol.CodeToolOutputInvalid, Message: err.Error()}}
	}
	a.State = ActionCompleted
	if a.Hash == "" {
		a.Hash = HashSettle(SettleAction{Output: r.Output})
	}
	return ActionResult{Kind: ResultKind, Status: protocol.StatusCompleted, Output: r.Output}
}

// HashSettle fingerprints an outcome, so a repeated completion can be told
// from a different one. Output JSON is canonicalized first (object keys
// sorted, whitespace dropped), so key order does not make a conflict.
func HashSettle(req SettleAction) string {
	h := sha256.New()
	if req.Error != nil {
		fmt.Fprintf(h, "error\x00%s\x00%s", req.Error.Code, req.Error.Message)
	} else {
		h.Write([]byte("output\x00"))
		h.Write(canonicalJSON(req.Output))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func canonicalJSON(raw json.RawMessage) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return raw
	}
	return b
}
