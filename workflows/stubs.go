package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/stubmatch"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
)

// Tool stubs (eve's evals): a session created with rules replaces the
// execution of matching calls with the rule's outcome. The decision is a
// SideEffect, so it is in the turn's history before anything runs: a
// replay or a retried workflow task reads it instead of matching again, and
// a stubbed call never schedules its tool's activity, even after a worker
// crash. Positions (how many calls each rule settled) move only from
// recorded decisions, so they are the same on every replay.

// stubState is a session's rules and how far each rule's sequence went.
type stubState struct {
	Rules []protocol.ToolStub `json:"rules"`
	// Positions counts the calls each rule settled (by rule id).
	Positions map[string]int `json:"positions,omitempty"`
}

// stubDecision is a call's recorded stub decision: Matched false runs the
// real tool.
type stubDecision struct {
	Matched  bool                     `json:"matched"`
	RuleID   string                   `json:"ruleId,omitempty"`
	Position int                      `json:"position,omitempty"`
	Outcome  protocol.ToolStubOutcome `json:"outcome"`
}

// decideStub matches a call against the rules in order (the first match
// wins) and records the decision. ok is false when the call runs for real.
func (s *stubState) decide(ctx workflow.Context, tool string, input json.RawMessage) (stubDecision, bool) {
	if s == nil || !s.names(tool) {
		return stubDecision{}, false
	}
	if workflow.GetVersion(ctx, changeStubs, workflow.DefaultVersion, 1) < 1 {
		return stubDecision{}, false
	}
	positions := map[string]int{}
	for k, v := range s.Positions {
		positions[k] = v
	}
	var d stubDecision
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		return matchStub(s.Rules, positions, tool, input)
	}).Get(&d)
	if err != nil || !d.Matched {
		return stubDecision{}, false
	}
	if s.Positions == nil {
		s.Positions = map[string]int{}
	}
	s.Positions[d.RuleID] = d.Position + 1
	return d, true
}

// names reports whether a rule names the tool.
func (s *stubState) names(tool string) bool {
	for _, r := range s.Rules {
		if r.Tool == tool {
			return true
		}
	}
	return false
}

// matchStub is the pure match: the first rule for the tool whose every
// matcher holds for the input wins.
func matchStub(rules []protocol.ToolStub, positions map[string]int, tool string, input json.RawMessage) stubDecision {
	r := stubmatch.Match(rules, tool, input)
	if r == nil {
		return stubDecision{}
	}
	n := positions[r.ID]
	return stubDecision{Matched: true, RuleID: r.ID, Position: n, Outcome: r.At(n)}
}

// stubOutcome is the result the model reads for a stubbed call.
func stubOutcome(d stubDecision) work.ToolOutcome {
	if t := d.Outcome.Throw; t != nil {
		return work.FailedOutcome(protocol.CodeToolExecution, t.Message)
	}
	out := d.Outcome.Response
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return work.ToolOutcome{Status: protocol.StatusCompleted, Output: out}
}
