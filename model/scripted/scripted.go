// Package scripted is a deterministic model driven by rules in a YAML or JSON
// file, so demos and tests run without an API key.
//
// A rule matches the last user message (not one the runtime wrote, such as
// a task.result message) with a case-insensitive regular expression and
// lists steps: each step either calls tools or replies. The step a rule is
// on is the number of assistant messages since that user message, so a
// rule walks its steps as tool results come back (and past a reply the
// runtime held while tasks worked); a rule whose last step calls tools
// repeats it (useful to test max-steps).
// Templates in inputs and replies use {{name}} or {{1}} for regexp captures
// and {{result.TOOL}} or {{result.TOOL.path.to.field}} for tool results
// ({{task.TOOL.field}} reads the latest <task_result> of a TOOL task,
// {{taskId.TOOL}} the task id in a TOOL call's receipt;
// {{results.N.field}} is the Nth result of the latest step, in call order;
// {{note.TOOL}} is the runtime's note on a result, such as a person's edit).
// A path walks fields of objects and 0-based indexes of arrays
// ({{result.echo.content.0.text}}); a string renders as itself, anything
// else as JSON. Only a path's last field may be missing from its object:
// it renders empty, so a reply can name the fields of either outcome
// ({{result.T.status}}{{result.T.error}}). Any other template that cannot
// be filled (an unknown name, a tool with no result, a missing field
// before the last, an index out of range, a field of a string) fails the
// step with an error that names the template.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/eve-temporal/eve/model"
)

// Script is the rules file.
type Script struct {
	Name    string `json:"name" yaml:"name"`
	Default string `json:"default" yaml:"default"`
	Rules   []Rule `json:"rules" yaml:"rules"`
}

// Rule answers messages that match Match.
type Rule struct {
	Match string `json:"match" yaml:"match"`
	// Steps, or the shorthand Calls then Reply.
	Steps []Step `json:"steps" yaml:"steps"`
	Calls []Call `json:"calls" yaml:"calls"`
	Reply string `json:"reply" yaml:"reply"`
	re    *regexp.Regexp
}

// Step is one model response: tool calls (with optional text) or a reply.
type Step struct {
	Text  string `json:"text" yaml:"text"`
	Calls []Call `json:"calls" yaml:"calls"`
	Reply string `json:"reply" yaml:"reply"`
}

// Call is one tool call. Input is an object whose strings are templates;
// InputJSON is a template of the whole JSON input (for numbers from captures).
type Call struct {
	Tool      string         `json:"tool" yaml:"tool"`
	Input     map[string]any `json:"input" yaml:"input"`
	InputJSON string         `json:"inputJSON" yaml:"inputJSON"`
}

// Model is a scripted model.
type Model struct {
	id     string
	script Script
}

// Load reads a rules file (YAML or JSON).
func Load(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scripted model rules: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("scripted model rules %s: %w", path, err)
	}
	return m, nil
}

// Parse compiles rules from YAML or JSON bytes.
func Parse(b []byte) (*Model, error) {
	var s Script
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return New(s)
}

// New compiles a script.
func New(s Script) (*Model, error) {
	for i := range s.Rules {
		r := &s.Rules[i]
		re, err := regexp.Compile("(?i)" + r.Match)
		if err != nil {
			return nil, fmt.Errorf("rule %d: match %q is not a valid regular expression: %w", i+1, r.Match, err)
		}
		r.re = re
		if len(r.Steps) == 0 {
			if len(r.Calls) > 0 {
				r.Steps = append(r.Steps, Step{Calls: r.Calls})
			}
			if r.Reply != "" || len(r.Calls) == 0 {
				r.Steps = append(r.Steps, Step{Reply: r.Reply})
			}
		}
		for j, st := range r.Steps {
			if len(st.Calls) > 0 && st.Reply != "" {
				return nil, fmt.Errorf("rule %d step %d: a step either calls tools or replies, not both (use text: for words beside calls)", i+1, j+1)
			}
			for k, c := range st.Calls {
				if c.Tool == "" {
					return nil, fmt.Errorf("rule %d step %d call %d: tool is required", i+1, j+1, k+1)
				}
			}
		}
	}
	name := s.Name
	if name == "" {
		name = "default"
	}
	return &Model{id: "scripted:" + name, script: s}, nil
}

// ID implements model.Model.
func (m *Model) ID() string { return m.id }

// Step implements model.Model.
func (m *Model) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	lastUser := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser && req.Messages[i].Kind == "" {
			lastUser = i
			break
		}
	}
	userText := ""
	if lastUser >= 0 {
		userText = req.Messages[lastUser].Text
	}
	// Which step: assistant messages since the user spoke (a reply the
	// runtime held while tasks worked counts as a step too).
	stepIdx := 0
	vars := map[string]string{}
	results := resultSet{}
	for _, msg := range req.Messages[lastUser+1:] {
		if msg.Role == model.RoleAssistant {
			stepIdx++
		}
		if msg.Kind == model.KindTaskResult {
			for _, r := range readTaskResults(msg.Text) {
				results[taskKey+r.tool] = r.result
			}
		}
		for i, r := range msg.ToolResults {
			res := result{out: r.Output, failed: r.IsError}
			results[r.Name] = res
			// results.N is the Nth result of the latest step, in call order.
			results["#"+strconv.Itoa(i)] = res
			if r.Note != "" {
				note, _ := json.Marshal(r.Note)
				results[noteKey+r.Name] = result{out: note}
			}
		}
	}
	var rule *Rule
	for i := range m.script.Rules {
		r := &m.script.Rules[i]
		match := r.re.FindStringSubmatch(userText)
		if match == nil {
			continue
		}
		rule = r
		for gi, g := range match {
			vars[strconv.Itoa(gi)] = strings.TrimSpace(g)
		}
		for gi, name := range r.re.SubexpNames() {
			if name != "" {
				vars[name] = strings.TrimSpace(match[gi])
			}
		}
		break
	}
	usageIn := 0
	for _, msg := range req.Messages {
		usageIn += len(msg.Text)/4 + 1
		for _, r := range msg.ToolResults {
			usageIn += len(r.Output) / 4
		}
	}
	if rule == nil {
		return reply(m.script.Default, usageIn, stream), nil
	}
	if stepIdx >= len(rule.Steps) {
		stepIdx = len(rule.Steps) - 1
	}
	st := rule.Steps[stepIdx]
	if len(st.Calls) == 0 {
		text, err := render(st.Reply, vars, results)
		if err != nil {
			return model.Response{}, fmt.Errorf("scripted reply of rule %q: %w", rule.Match, err)
		}
		return reply(text, usageIn, stream), nil
	}
	text, err := render(st.Text, vars, results)
	if err != nil {
		return model.Response{}, fmt.Errorf("scripted text of rule %q: %w", rule.Match, err)
	}
	resp := model.Response{Text: text, FinishReason: model.FinishToolCalls}
	for i, c := range st.Calls {
		input, err := callInput(c, vars, results)
		if err != nil {
			return model.Response{}, fmt.Errorf("scripted call %s of rule %q: %w", c.Tool, rule.Match, err)
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{
			ID:    fmt.Sprintf("call_%d_%d", len(req.Messages), i),
			Name:  c.Tool,
			Input: input,
		})
	}
	resp.Usage = model.Usage{InputTokens: usageIn, OutputTokens: 10 * len(resp.ToolCalls)}
	return resp, nil
}

func reply(text string, usageIn int, stream model.Stream) model.Response {
	if stream != nil && text != "" {
		// Deliver in two pieces, as a streaming provider would.
		half := strings.IndexByte(text[len(text)/2:], ' ')
		if half >= 0 {
			cut := len(text)/2 + half + 1
			stream(text[:cut])
			stream(text[cut:])
		} else {
			stream(text)
		}
	}
	return model.Response{Text: text, FinishReason: model.FinishStop, Usage: model.Usage{InputTokens: usageIn, OutputTokens: len(text)/4 + 1}}
}

func callInput(c Call, vars map[string]string, results resultSet) (json.RawMessage, error) {
	if c.InputJSON != "" {
		s, err := render(c.InputJSON, vars, results)
		if err != nil {
			return nil, err
		}
		if !json.Valid([]byte(s)) {
			// Malformed input, as a real model may send it: passed on as a
			// JSON string, so the runtime rejects it as a tool input error.
			return json.Marshal(s)
		}
		return json.RawMessage(s), nil
	}
	if c.Input == nil {
		return json.RawMessage(`{}`), nil
	}
	v, err := renderValue(c.Input, vars, results)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func renderValue(v any, vars map[string]string, results resultSet) (any, error) {
	switch x := v.(type) {
	case string:
		return render(x, vars, results)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, vars, results)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, vars, results)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// noteKey prefixes a tool result's note among the results ({{note.TOOL}}).
const noteKey = "note:"

// taskKey prefixes a task's result among the results ({{task.TOOL}}): the
// latest <task_result> block of a TOOL task in a task.result message.
const taskKey = "task:"

// receiptID reads the task id from a task's receipt ({{taskId.TOOL}}).
var receiptID = regexp.MustCompile(`^Started task (\S+)\.`)

var taskResultBlock = regexp.MustCompile(`<task_result id="([^"]*)" tool="([^"]*)" status="(completed|failed)">([\s\S]*?)</task_result>`)

type taskResult struct {
	tool   string
	result result
}

// readTaskResults reads a task.result message's blocks: a completed
// task's body is its output (JSON, or text as a string); a failed task's
// is its error, read as {"error": body}.
func readTaskResults(text string) []taskResult {
	var out []taskResult
	for _, m := range taskResultBlock.FindAllStringSubmatch(text, -1) {
		body := strings.ReplaceAll(m[4], `<\/task_result`, `</task_result`)
		var res result
		switch {
		case m[3] == "failed":
			b, _ := json.Marshal(map[string]string{"error": body})
			res = result{out: b, failed: true}
		case json.Valid([]byte(body)):
			res = result{out: json.RawMessage(body)}
		default:
			b, _ := json.Marshal(body)
			res = result{out: b}
		}
		out = append(out, taskResult{tool: m[2], result: res})
	}
	return out
}

// resultSet is the tool results since the user's message, by tool name,
// "#N" (the latest step's Nth) and noteKey+name.
type resultSet map[string]result

// result is a call's output; failed: the call did not complete (its
// output is the runtime's {error, code}).
type result struct {
	out    json.RawMessage
	failed bool
}

var tmpl = regexp.MustCompile(`\{\{\s*([^}]+?)\s*\}\}`)

// render fills s's templates. A template that names no capture and no
// result, or a path that cannot be walked, is an error naming it, so a
// typo fails the step instead of rendering empty.
func render(s string, vars map[string]string, results resultSet) (string, error) {
	var first error
	out := tmpl.ReplaceAllStringFunc(s, func(m string) string {
		key := strings.TrimSpace(m[2 : len(m)-2])
		v, err := expand(key, vars, results)
		if err != nil && first == nil {
			first = fmt.Errorf("template %s: %w", m, err)
		}
		return v
	})
	return out, first
}

func expand(key string, vars map[string]string, results resultSet) (string, error) {
	if v, ok := vars[key]; ok {
		return v, nil
	}
	if rest, ok := strings.CutPrefix(key, "results."); ok {
		n, path, _ := strings.Cut(rest, ".")
		res, ok := results["#"+n]
		if !ok {
			return "", fmt.Errorf("the latest step has no result %s (it has %d, numbered from 0)", n, countIndexed(results))
		}
		return lookup(res, path)
	}
	if tool, ok := strings.CutPrefix(key, "note."); ok {
		if _, ok := results[tool]; !ok {
			return "", noResult(tool, results)
		}
		note, ok := results[noteKey+tool]
		if !ok {
			return "", nil // a result without a note
		}
		return lookup(note, "")
	}
	if tool, ok := strings.CutPrefix(key, "taskId."); ok {
		res, ok := results[tool]
		if !ok {
			return "", noResult(tool, results)
		}
		var receipt string
		_ = json.Unmarshal(res.out, &receipt)
		m := receiptID.FindStringSubmatch(receipt)
		if m == nil {
			return "", fmt.Errorf("the %s result is no task receipt: %s", tool, res.out)
		}
		return m[1], nil
	}
	if rest, ok := strings.CutPrefix(key, "task."); ok {
		tool, path, _ := strings.Cut(rest, ".")
		res, ok := results[taskKey+tool]
		if !ok {
			return "", fmt.Errorf("no <task_result> from a %s task has arrived since the user's message", tool)
		}
		return lookup(res, path)
	}
	if rest, ok := strings.CutPrefix(key, "result."); ok {
		tool, path, _ := strings.Cut(rest, ".")
		res, ok := results[tool]
		if !ok {
			return "", noResult(tool, results)
		}
		return lookup(res, path)
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	return "", fmt.Errorf("%q is not a capture of the rule's match (captures: %s) nor result.TOOL, results.N or note.TOOL", key, strings.Join(names, ", "))
}

func noResult(tool string, results resultSet) error {
	var tools []string
	for k := range results {
		if !strings.HasPrefix(k, "#") && !strings.HasPrefix(k, noteKey) && !strings.HasPrefix(k, taskKey) {
			tools = append(tools, k)
		}
	}
	if len(tools) == 0 {
		return fmt.Errorf("no tool result from %s: no tool has answered since the user's message", tool)
	}
	sort.Strings(tools)
	return fmt.Errorf("no tool result from %s (results from: %s)", tool, strings.Join(tools, ", "))
}

func countIndexed(results resultSet) int {
	n := 0
	for k := range results {
		if strings.HasPrefix(k, "#") {
			n++
		}
	}
	return n
}

// lookup walks path (fields of objects, 0-based indexes of arrays) in a
// result. Only the last field may be absent from its object: it renders
// empty, so a reply can name the fields of either outcome
// ({{result.T.status}}{{result.T.error}}); on a failed call's result
// ({error, code}) any field it lacks renders empty, so the success's
// nested fields can stand beside {{result.T.error}} too. Anything else
// that cannot be walked is an error.
func lookup(res result, path string) (string, error) {
	var v any
	if err := json.Unmarshal(res.out, &v); err != nil {
		return string(res.out), nil // not JSON: the text itself
	}
	if path != "" {
		parts := strings.Split(path, ".")
		for i, p := range parts {
			at := "the result"
			if i > 0 {
				at = strings.Join(parts[:i], ".")
			}
			last := i == len(parts)-1
			switch x := v.(type) {
			case map[string]any:
				e, ok := x[p]
				switch {
				case !ok && res.failed:
					return "", nil
				case !ok && !last:
					return "", fmt.Errorf("%s has no field %q (fields: %s)", at, p, fieldNames(x))
				}
				v = e
			case []any:
				n, err := strconv.Atoi(p)
				if err != nil || n < 0 {
					return "", fmt.Errorf("%s is an array of %d: index it with a number from 0, not %q", at, len(x), p)
				}
				if n >= len(x) {
					return "", fmt.Errorf("%s is an array of %d: index %d is out of range", at, len(x), n)
				}
				v = x[n]
			case nil:
				return "", fmt.Errorf("%s is null: it has no %q", at, p)
			default:
				return "", fmt.Errorf("%s is a %s, not an object or array: it has no %q", at, jsonKind(x), p)
			}
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", nil
	default:
		b, _ := json.Marshal(x)
		return string(b), nil
	}
}

func fieldNames(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Compact summarizes deterministically: how many messages there were and
// the start of every user and assistant text, within a few kilobytes, so
// a replayed or retried compaction gives the same summary.
func (m *Model) Compact(_ context.Context, msgs []model.Message) (string, model.Usage, error) {
	const perMessage, total = 160, 4 << 10
	var b strings.Builder
	tools := 0
	for _, msg := range msgs {
		if msg.Role == model.RoleTool {
			tools += len(msg.ToolResults)
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(msg.Text, model.SummaryPrefix))
		if text == "" {
			continue
		}
		if len(text) > perMessage {
			text = text[:perMessage] + "…"
		}
		line := fmt.Sprintf("- %s: %s\n", msg.Role, strings.ReplaceAll(text, "\n", " "))
		if b.Len()+len(line) > total {
			b.WriteString("- …\n")
			break
		}
		b.WriteString(line)
	}
	return fmt.Sprintf("%d messages (%d tool results) were compacted.\n%s", len(msgs), tools, b.String()), model.Usage{}, nil
}
