package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/protocol"
)

// InputRequest is how a client tool's call is shown to a person.
type InputRequest struct {
	Prompt string `json:"prompt"`
	// Display is select, text or confirmation (default: select with
	// options, text without).
	Display string                 `json:"display,omitempty"`
	Options []protocol.InputOption `json:"options,omitempty"`
	// AllowFreeform accepts text beside (or instead of) the options.
	AllowFreeform bool `json:"allowFreeform,omitempty"`
	// MinSelections and MaxSelections make a multi-select question when
	// MaxSelections > 1. The answer lists option ids separated by commas.
	MinSelections int `json:"minSelections,omitempty"`
	MaxSelections int `json:"maxSelections,omitempty"`
}

// Multi reports whether the request takes several options.
func (r InputRequest) Multi() bool { return r.MaxSelections > 1 }

// Normalize fills defaults and checks the request.
func (r InputRequest) Normalize() (InputRequest, error) {
	var errs []error
	if strings.TrimSpace(r.Prompt) == "" {
		errs = append(errs, errors.New("input request: prompt is required"))
	}
	if r.Display == "" {
		r.Display = protocol.DisplaySelect
		if len(r.Options) == 0 {
			r.Display = protocol.DisplayText
		}
	}
	switch r.Display {
	case protocol.DisplaySelect, protocol.DisplayText, protocol.DisplayConfirmation:
	default:
		errs = append(errs, fmt.Errorf("input request: display %q: want select, text or confirmation", r.Display))
	}
	seen := map[string]bool{}
	for i, o := range r.Options {
		switch {
		case o.ID == "" || o.Label == "":
			errs = append(errs, fmt.Errorf("input request: option %d needs an id and a label", i+1))
		case seen[strings.ToLower(o.ID)]:
			errs = append(errs, fmt.Errorf("input request: option id %q appears twice", o.ID))
		case strings.Contains(o.ID, ","):
			errs = append(errs, fmt.Errorf("input request: option id %q must not contain a comma", o.ID))
		}
		seen[strings.ToLower(o.ID)] = true
		switch o.Style {
		case "", "primary", "danger", "default":
		default:
			errs = append(errs, fmt.Errorf("input request: option %q style %q: want primary, danger or default", o.ID, o.Style))
		}
	}
	if r.Display == protocol.DisplaySelect && len(r.Options) == 0 {
		errs = append(errs, errors.New("input request: display select needs options"))
	}
	if r.MinSelections < 0 || r.MaxSelections < 0 || (r.MaxSelections > 0 && r.MinSelections > r.MaxSelections) {
		errs = append(errs, fmt.Errorf("input request: selections min %d max %d: want 0 <= min <= max", r.MinSelections, r.MaxSelections))
	}
	if r.Multi() && len(r.Options) < r.MinSelections {
		errs = append(errs, fmt.Errorf("input request: min selections %d exceeds the %d options", r.MinSelections, len(r.Options)))
	}
	return r, errors.Join(errs...)
}

// Client makes a tool a client tool: it has no Execute; its call becomes an
// input request that a person answers in the app, and the answer is the
// tool's result.
type Client struct {
	// Request is the static request; RequestFor, when set, computes it from
	// the call's input instead.
	Request    InputRequest
	RequestFor func(input json.RawMessage) (InputRequest, error)
}

// Output schemas a client tool gets when it declares none.
var (
	defaultClientOutput = json.RawMessage(`{"type":"object","properties":{"optionId":{"type":"string"},"text":{"type":"string"}},"additionalProperties":false}`)
	multiClientOutput   = json.RawMessage(`{"type":"object","properties":{"optionIds":{"type":"array","items":{"type":"string"}},"text":{"type":"string"}},"additionalProperties":false}`)
)

// DefineClient defines a client tool. The default output is
// {optionId?, text?} ({optionIds?, text?} for multi-select).
func DefineClient(name, description string, inputSchema json.RawMessage, c Client) *Tool {
	return &Tool{Name: name, Description: description, InputSchema: inputSchema, Client: &c}
}

// RequestFor computes the input request of one call.
func (t *Tool) RequestFor(input json.RawMessage) (InputRequest, error) {
	if t.Client == nil {
		return InputRequest{}, fmt.Errorf("tool %s is not a client tool", t.Name)
	}
	r := t.Client.Request
	if t.Client.RequestFor != nil {
		var err error
		if r, err = t.Client.RequestFor(input); err != nil {
			return InputRequest{}, err
		}
	}
	return r.Normalize()
}

func (t *Tool) compileClient() []error {
	var errs []error
	if t.Execute != nil {
		errs = append(errs, errors.New("a client tool has no Execute: the person's answer is its result"))
	}
	if t.Client.RequestFor == nil {
		if _, err := t.Client.Request.Normalize(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(t.OutputSchema) == 0 {
		t.OutputSchema = defaultClientOutput
		if t.Client.RequestFor == nil && t.Client.Request.Multi() {
			t.OutputSchema = multiClientOutput
		}
	}
	return errs
}

// AskQuestion is the built-in ask_question tool, defined with the same
// public API as any client tool: the model asks, a person answers.
func AskQuestion() *Tool {
	return DefineClient("ask_question",
		"Ask the user a clarifying question. Offer options when there are obvious answers; the user may also answer in their own words.",
		json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","minLength":1},"options":{"type":"array","items":{"type":"string","minLength":1},"maxItems":20,"uniqueItems":true}},"required":["question"],"additionalProperties":false}`),
		Client{RequestFor: func(input json.RawMessage) (InputRequest, error) {
			var in struct {
				Question string   `json:"question"`
				Options  []string `json:"options"`
			}
			if err := json.Unmarshal(input, &in); err != nil {
				return InputRequest{}, err
			}
			r := InputRequest{Prompt: in.Question, AllowFreeform: true}
			for _, o := range in.Options {
				// As in eve: the option id is its label.
				r.Options = append(r.Options, protocol.InputOption{ID: o, Label: o})
			}
			return r, nil
		}})
}
