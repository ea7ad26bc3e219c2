package workflows

import (
	"fmt"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
)

// Session limits, as eve 0.80.1's "Runtime limits" (docs/agent-config.md):
// the model call that crosses a limit finishes; before the next one the
// turn parks on a session-limit request. Continue grants a fresh window of
// each limit and resumes the same turn; Stop cancels the turn (a person's
// decision, turn.cancelled). A message that answers neither waits in the
// held turn and is read once the window is granted. A session nobody can
// be asked in fails the call instead.

// Error codes of a turn that ran into a limit nobody could lift.
const (
	codeSessionTokenLimit = "SESSION_TOKEN_LIMIT_REACHED"
	codeSessionCostLimit  = "SESSION_TOKEN_COST_LIMIT_REACHED"
)

// Options of a session-limit request (eve's ids).
const (
	optionContinue = "continue"
	optionStop     = "stop"
)

// violation is the first limit a session's window has reached.
type violation struct {
	kind     string // input, output, token-cost
	limit    int
	used     int
	limitUSD float64
	usedUSD  float64
}

func (l SessionLimits) cost(u protocol.TokenUsage) float64 {
	return (float64(u.InputTokens)*l.InputUSDPerMTok + float64(u.OutputTokens)*l.OutputUSDPerMTok) / 1e6
}

// check reports the first limit used has reached, in eve's order.
func (l SessionLimits) check(used protocol.TokenUsage) *violation {
	switch {
	case l.MaxInputTokens > 0 && used.InputTokens >= l.MaxInputTokens:
		return &violation{kind: "input", limit: l.MaxInputTokens, used: used.InputTokens}
	case l.MaxOutputTokens > 0 && used.OutputTokens >= l.MaxOutputTokens:
		return &violation{kind: "output", limit: l.MaxOutputTokens, used: used.OutputTokens}
	case l.MaxCostUSD > 0 && l.cost(used) >= l.MaxCostUSD:
		return &violation{kind: "token-cost", limitUSD: l.MaxCostUSD, usedUSD: l.cost(used)}
	}
	return nil
}

// windowUsed is what the session spent in its current window: before the
// turn, plus the turn's own usage since its last grant.
func (t *turn) windowUsed() protocol.TokenUsage {
	u := t.usage
	if t.grantedAt != nil {
		u.InputTokens -= t.grantedAt.InputTokens
		u.OutputTokens -= t.grantedAt.OutputTokens
	} else {
		u.InputTokens += t.in.Budget.InputTokens
		u.OutputTokens += t.in.Budget.OutputTokens
	}
	return u
}

// holdForLimits runs before each model call: within the limits it returns
// at once; past one it asks a person (or fails the turn when nobody can be
// asked) and reports whether the turn ended.
func (t *turn) holdForLimits(ctx workflow.Context, stepIdx int) (turnOutput, bool) {
	v := t.cfg.Limits.check(t.windowUsed())
	if v == nil {
		return turnOutput{}, false
	}
	if t.cfg.Limits.Unattended || t.parent == nil {
		code, msg := codeSessionTokenLimit, fmt.Sprintf("The session reached its configured %s token limit (%d tokens; it used %d). Raise the agent's MaxInputTokensPerSession / MaxOutputTokensPerSession, or let a person be asked (agent.Agent.Unattended false).", v.kind, v.limit, v.used)
		if v.kind == "token-cost" {
			code, msg = codeSessionCostLimit, fmt.Sprintf("The session reached its configured model token-cost limit ($%g; it used $%.6f). Raise the agent's MaxTokenCostPerSession, or let a person be asked (agent.Agent.Unattended false).", v.limitUSD, v.usedUSD)
		}
		out, _ := t.turnFailed(ctx, code, msg)
		return out, true
	}
	r := t.board.add(sessionLimitRequest(t.in, stepIdx, v), workflow.Now(ctx))
	t.park(ctx, stepIdx, []*request{r})
	if err := workflow.Await(ctx, func() bool { return r.state.closed() }); err != nil || ctx.Err() != nil {
		if fx, err := r.cancel(); err == nil {
			t.recordResolved(ctx, fx.resolved)
		}
		out, _ := t.cancelled(ctx)
		return out, true
	}
	if r.res.Response == nil || r.res.Response.OptionID != optionContinue {
		// Stop: the person ends the turn, through the cancellation path.
		out, _ := t.cancelled(ctx)
		return out, true
	}
	u := t.usage
	t.grantedAt = &u
	t.readSteering(ctx) // replies that waited behind the prompt
	return turnOutput{}, false
}

// sessionLimitRequest is eve's continuation prompt; its id derives from
// the session, the turn and the usage, so a retried task makes the same.
func sessionLimitRequest(in turnInput, stepIdx int, v *violation) *request {
	used, input, prompt := strconv.Itoa(v.used), map[string]any{"kind": v.kind, "limit": v.limit, "usedTokens": v.used}, ""
	desc := "Grant a fresh token budget"
	if v.kind == "token-cost" {
		used, input, desc = strconv.FormatFloat(v.usedUSD, 'f', -1, 64), map[string]any{"kind": v.kind, "limitUsd": v.limitUSD, "usedCostUsd": v.usedUSD}, "Grant a fresh model token-cost budget"
		prompt = fmt.Sprintf("This session has hit the $%g model token-cost limit per session.", v.limitUSD)
	} else {
		prompt = fmt.Sprintf("This session has hit the %s-token limit (%s) per session.", v.kind, compactCount(v.limit))
	}
	prompt += " This is a guardrail against defective long-running sessions. If session activity looks fine, just approve to keep going."
	id := fmt.Sprintf("%s:%d:limit:%s:%s", in.SessionID, in.Sequence, v.kind, used)
	return &request{stepIdx: stepIdx, req: protocol.InputRequest{
		Action:  protocol.ToolCallAction{CallID: id, Input: mustJSON(input), Kind: "tool-call", ToolName: "session_limit_continuation"},
		Display: protocol.DisplayConfirmation,
		Kind:    protocol.KindSessionLimit,
		Options: []protocol.InputOption{
			{ID: optionContinue, Label: "Approve", Description: desc, Style: "primary"},
			{ID: optionStop, Label: "Stop", Description: "Stop now", Style: "danger"},
		},
		Prompt:    prompt,
		RequestID: id,
	}}
}

// compactCount writes 40000000 as 40M and 1500 as 1.5K, as eve does.
func compactCount(n int) string {
	trim := func(f float64) string {
		s := strconv.FormatFloat(f, 'f', 1, 64)
		if len(s) > 2 && s[len(s)-2:] == ".0" {
			return s[:len(s)-2]
		}
		return s
	}
	switch {
	case n >= 1_000_000:
		return trim(float64(n)/1e6) + "M"
	case n >= 1_000:
		return trim(float64(n)/1e3) + "K"
	}
	return strconv.Itoa(n)
}

// budgetOf is what a session spent in its current limit window.
func budgetOf(st *sessionState) protocol.TokenUsage {
	return protocol.TokenUsage{
		InputTokens:  st.Usage.InputTokens - st.BudgetBase.InputTokens,
		OutputTokens: st.Usage.OutputTokens - st.BudgetBase.OutputTokens,
	}
}
