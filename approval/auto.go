package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/model"
)

// KindAuto is Auto's kind: a decision model reviews each exact call.
const KindAuto = "auto"

// Verdicts of a decision model.
const (
	VerdictClear   = "clear"   // the call runs
	VerdictCaution = "caution" // a person is asked
)

// AutoConfig configures Auto. Every field is optional.
type AutoConfig struct {
	// Instructions replace the default review instructions.
	Instructions string
	// Clear and Caution describe the two verdicts to the model.
	Clear, Caution string
	// Model is the decision model; nil uses the agent's model (the one
	// the turn's steps use, so a scripted model decides in tests).
	Model model.Model
}

// Defaults of AutoConfig, after eve's auto().
const (
	DefaultAutoInstructions = "Review this tool call for dangerous, irreversible, financial or external effects before it runs."
	DefaultAutoClear        = "The call can run without a person's review."
	DefaultAutoCaution      = "A person must review the call before it runs."
)

// Auto asks a decision model to classify each exact call (tool name and
// input) as clear (run) or caution (ask a person). A caution, a failed
// review, or an answer that is no verdict asks a person. The review runs in
// the approval activity and is recorded in the workflow's history with its
// verdict and reason. The tool input is sent to the decision model.
func Auto(cfg AutoConfig) Policy {
	if cfg.Instructions == "" {
		cfg.Instructions = DefaultAutoInstructions
	}
	if cfg.Clear == "" {
		cfg.Clear = DefaultAutoClear
	}
	if cfg.Caution == "" {
		cfg.Caution = DefaultAutoCaution
	}
	return Policy{kind: KindAuto, auto: &cfg}
}

// Review is a decision model's verdict on one call.
type Review struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// ReviewRequest is what the decision model reads about one call.
func (cfg AutoConfig) ReviewRequest(c Context) model.Request {
	system := fmt.Sprintf("%s\n\nVerdicts:\n- clear: %s\n- caution: %s\n\nAnswer with one JSON object and nothing else: {\"verdict\": \"clear\" or \"caution\", \"reason\": \"<one sentence>\"}.",
		cfg.Instructions, cfg.Clear, cfg.Caution)
	user := fmt.Sprintf("Review this tool call.\nTool: %s\nInput: %s", c.ToolName, string(c.ToolInput))
	return model.Request{System: system, Messages: []model.Message{{Role: model.RoleUser, Text: user}}}
}

// ParseReview reads a decision model's answer: a JSON object with a verdict
// of clear or caution (surrounding text is ignored). A truncated answer
// (FinishLength) or anything else is an error.
func ParseReview(resp model.Response) (Review, error) {
	if resp.FinishReason == model.FinishLength {
		return Review{}, errors.New("the decision model's answer was cut off")
	}
	text := resp.Text
	i, j := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}')
	if i < 0 || j < i {
		return Review{}, fmt.Errorf("the decision model answered no JSON verdict: %q", text)
	}
	var r Review
	if err := json.Unmarshal([]byte(text[i:j+1]), &r); err != nil {
		return Review{}, fmt.Errorf("the decision model's verdict is not JSON: %v", err)
	}
	r.Verdict = strings.ToLower(strings.TrimSpace(r.Verdict))
	if r.Verdict != VerdictClear && r.Verdict != VerdictCaution {
		return Review{}, fmt.Errorf("verdict %q is neither clear nor caution", r.Verdict)
	}
	return r, nil
}

// AutoConfig returns Auto's configuration, false for other kinds.
func (p Policy) AutoConfig() (AutoConfig, bool) {
	if p.auto == nil {
		return AutoConfig{}, false
	}
	return *p.auto, true
}

// ReviewWith runs Auto's review of one call with m (the config's model
// wins): clear runs the call (NotApplicable), caution or any failure asks a
// person, with the reason in the prompt. The review itself is returned
// for the record.
func (cfg AutoConfig) ReviewWith(ctx context.Context, m model.Model, c Context) (Status, Review) {
	if cfg.Model != nil {
		m = cfg.Model
	}
	if m == nil {
		return Status{Type: UserApproval, Reason: "no decision model is configured"}, Review{Verdict: VerdictCaution, Reason: "no decision model"}
	}
	resp, err := m.Step(ctx, cfg.ReviewRequest(c), nil)
	if err != nil {
		return Status{Type: UserApproval, Reason: "the automatic review failed"}, Review{Verdict: VerdictCaution, Reason: "review failed: " + err.Error()}
	}
	r, err := ParseReview(resp)
	if err != nil {
		return Status{Type: UserApproval, Reason: "the automatic review failed"}, Review{Verdict: VerdictCaution, Reason: err.Error()}
	}
	if r.Verdict == VerdictClear {
		return Status{Type: NotApplicable, Reason: r.Reason}, r
	}
	reason := "the automatic review advised caution"
	if r.Reason != "" {
		reason += ": " + r.Reason
	}
	return Status{Type: UserApproval, Reason: reason}, r
}
