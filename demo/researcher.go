package demo

import (
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// researcherRules are the researcher subagent's scripted model: its first
// message is eve's subagent prompt (…"Caller message:\n<topic>"), which it
// answers with its own tool; a follow-up message digs deeper.
const researcherRules = `
name: researcher
default: "I research topics; send me one."
rules:
  - match: '(?m)^Caller message:\s*fetch (?P<topic>\S.*?)[?.!]*$'
    steps:
      - calls: [{tool: fetch_paper, input: {topic: "{{topic}}"}}]
      - reply: "Fetched: {{result.fetch_paper}}"
  - match: '(?m)^Caller message:\s*(?P<topic>\S.*?)[?.!]*$'
    steps:
      - calls: [{tool: lookup_sources, input: {topic: "{{topic}}"}}]
      - reply: "{{result.lookup_sources.summary}}"
  - match: '^(?P<question>\S.*?)[?.!]*$'
    reply: "On {{question}}: 2 more sources, both recent."
`

// SourcesInput is lookup_sources' input.
type SourcesInput struct {
	Topic string `json:"topic" jsonschema:"the topic to look up"`
}

// Sources is what lookup_sources finds.
type Sources struct {
	Topic   string `json:"topic"`
	Count   int    `json:"count"`
	Summary string `json:"summary"`
}

// LookupSources is the researcher subagent's own tool (its parent, the
// demo agent, does not have it).
func LookupSources() *tools.Tool {
	return tools.Func("lookup_sources", "Look up sources on a topic.",
		func(_ *tools.Context, in SourcesInput) (Sources, error) {
			topic := strings.TrimSpace(in.Topic)
			return Sources{Topic: topic, Count: 3, Summary: fmt.Sprintf("3 sources on %s agree it is promising", topic)}, nil
		})
}

// FetchPaper is the researcher's approval-gated tool: a person approves
// every fetch. Asked from the demo agent ("ask researcher fetch <topic>"),
// the approval is proxied to the root session's stream and answered there
// (docs/subagents.md, "People in the loop from any depth").
func FetchPaper() *tools.Tool {
	t := tools.Func("fetch_paper", "Fetch the full text of a paper on a topic. A person approves every fetch.",
		func(_ *tools.Context, in SourcesInput) (string, error) {
			return fmt.Sprintf("the paper on %s (12 pages)", strings.TrimSpace(in.Topic)), nil
		})
	t.Approval = approval.Always().WithPrompt(func(c approval.PromptContext) string {
		var in SourcesInput
		if c.Input(&in) != nil {
			return ""
		}
		return fmt.Sprintf("Let the researcher fetch a paper on %s?", strings.TrimSpace(in.Topic))
	})
	return t
}

// Researcher is the demo's declared subagent: an agent of its own (name,
// description, model, tools) that the demo agent delegates to with
// "ask researcher <topic>"; "tell <taskId> <message>" continues the same
// child session in a later turn.
func Researcher() (*agent.Agent, error) {
	m, err := scripted.Parse([]byte(researcherRules))
	if err != nil {
		return nil, fmt.Errorf("researcher rules: %w", err)
	}
	reg := tools.NewRegistry()
	if err := reg.Register(LookupSources()); err != nil {
		return nil, err
	}
	if err := reg.Register(FetchPaper()); err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "researcher", Description: "Researches a topic with its own sources and reports what it found.",
		Model: m, Tools: reg, LocalModel: true}, nil
}
