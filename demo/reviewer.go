package demo

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// reviewerRules are the reviewer subagent's scripted model: it answers
// eve's subagent prompt with a structured review (eve__reply): notes that
// mention "TODO" are not ready.
const reviewerRules = `
name: reviewer
default: "I review release notes; send me some."
rules:
  - match: '(?s)Caller message:.*TODO'
    steps:
      - calls: [{tool: eve__reply, input: {approved: false, reason: "the notes still have a TODO"}}]
  - match: '(?s)Caller message:'
    steps:
      - calls: [{tool: eve__reply, input: {approved: true, reason: "clear and complete"}}]
`

// reviewSchema is the review publish_notes asks the reviewer for.
var reviewSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved","reason"],"additionalProperties":false}`)

// Reviewer is the demo's code-only subagent (agent.Agent.CodeOnly, eve's
// tool: false): the demo model never sees it; publish_notes delegates to
// it from code.
func Reviewer() (*agent.Agent, error) {
	m, err := scripted.Parse([]byte(reviewerRules))
	if err != nil {
		return nil, fmt.Errorf("reviewer rules: %w", err)
	}
	return &agent.Agent{Name: "reviewer", Description: "Reviews release notes and says whether they are ready to publish.",
		Model: m, LocalModel: true, CodeOnly: true}, nil
}

// NotesInput is publish_notes' input.
type NotesInput struct {
	Notes string `json:"notes" jsonschema:"the release notes to publish"`
}

// Publication is what publish_notes did.
type Publication struct {
	Published bool   `json:"published"`
	Reason    string `json:"reason,omitempty"`
	URL       string `json:"url,omitempty"`
	Review    string `json:"review"` // the reviewer's session
}

// PublishNotes publishes release notes only after the reviewer approves
// them (eve's tools/tasks.md example): its code opens a session with the
// code-only reviewer and asks for a typed review
// (tools.Context.Agent(...).Send with an OutputSchema).
func PublishNotes() *tools.Tool {
	return tools.Func("publish_notes", "Publish release notes once the reviewer approves them.",
		func(ctx *tools.Context, in NotesInput) (Publication, error) {
			res, err := ctx.Agent("reviewer").Send("Review these release notes:\n\n"+in.Notes, tools.SendOptions{OutputSchema: reviewSchema})
			if err != nil {
				return Publication{}, err
			}
			if res.Status == tools.AgentFailed {
				return Publication{}, fmt.Errorf("the review did not finish: %s", res.Error.Message)
			}
			var review struct {
				Approved bool   `json:"approved"`
				Reason   string `json:"reason"`
			}
			if err := json.Unmarshal(res.Data, &review); err != nil {
				return Publication{}, fmt.Errorf("read the review: %w", err)
			}
			if !review.Approved {
				return Publication{Published: false, Reason: review.Reason, Review: res.SessionID}, nil
			}
			slug := strings.Join(strings.Fields(strings.ToLower(in.Notes)), "-")
			if len(slug) > 24 {
				slug = slug[:24]
			}
			return Publication{Published: true, URL: "https://notes.example/" + slug, Review: res.SessionID}, nil
		})
}
