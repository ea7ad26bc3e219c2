package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Checking an answer: what a person's response to a request decides, or
// why it decides nothing. It changes no state (but compiles the tool's
// schemas, once): the respond Update's validator runs it before anything
// is recorded, and the transitions (request.go) take its decision.

// decide checks one answer against its request without changing anything
// (but compiling the tool's output schema, once).
func (r *request) decide(resp protocol.InputResponse) (decision, error) {
	res := protocol.InputResolution{Kind: r.req.Kind, RequestID: r.req.RequestID}
	if resp.OptionID == "" && strings.TrimSpace(resp.Text) == "" {
		return decision{}, errors.New("give an optionId or text")
	}
	if err := r.checkEditable(resp); err != nil {
		return decision{}, err
	}
	if r.req.Kind == protocol.KindSessionLimit {
		return r.decideLimit(resp)
	}
	respCopy := resp
	res.Response = &respCopy
	if r.req.Kind == protocol.KindToolApproval {
		opt := resp.OptionID
		if opt == "" {
			m, ok := protocol.ResolveText(protocol.InputRequest{Options: append(r.req.Options, protocol.InputOption{ID: "deny", Label: "Deny"})}, resp.Text)
			if !ok {
				return decision{}, fmt.Errorf("text %q is neither approve nor cancel/deny", resp.Text)
			}
			opt = m.OptionID
			resp.Text = ""
		}
		switch strings.ToLower(opt) {
		case "approve":
			if resp.Text != "" {
				return decision{}, errors.New("text is only accepted with cancel/deny (as the reason)")
			}
			res.Outcome = protocol.OutcomeApproved
		case "cancel", "deny":
			res.Outcome = protocol.OutcomeDenied
			return decision{res: res, reason: strings.TrimSpace(resp.Text)}, nil
		default:
			return decision{}, fmt.Errorf("unknown option %q: a tool approval takes approve, or cancel/deny", opt)
		}
		return r.withEdit(decision{res: res}, resp)
	}
	q := r.plan.Request
	out := map[string]any{}
	switch {
	case resp.OptionID != "" && q.Multi():
		ids := strings.Split(resp.OptionID, ",")
		var picked []string
		for _, id := range ids {
			id = strings.TrimSpace(id)
			if !hasOption(r.req.Options, id) {
				return decision{}, fmt.Errorf("unknown option %q (options: %s)", id, optionIDs(r.req.Options))
			}
			if slices.Contains(picked, id) {
				return decision{}, fmt.Errorf("option %q chosen twice", id)
			}
			picked = append(picked, id)
		}
		if len(picked) < q.MinSelections || len(picked) > q.MaxSelections {
			return decision{}, fmt.Errorf("%d options chosen; choose between %d and %d", len(picked), q.MinSelections, q.MaxSelections)
		}
		out["optionIds"] = picked
	case resp.OptionID != "":
		if !hasOption(r.req.Options, resp.OptionID) {
			return decision{}, fmt.Errorf("unknown option %q (options: %s)", resp.OptionID, optionIDs(r.req.Options))
		}
		out["optionId"] = resp.OptionID
	default:
		m, ok := protocol.ResolveText(r.req, resp.Text)
		if !ok {
			return decision{}, fmt.Errorf("text %q matches no option and this question takes no free text (options: %s)", resp.Text, optionIDs(r.req.Options))
		}
		if m.OptionID != "" {
			if q.Multi() {
				out["optionIds"] = []string{m.OptionID}
			} else {
				out["optionId"] = m.OptionID
			}
		} else {
			out["text"] = resp.Text
		}
	}
	if resp.OptionID != "" && resp.Text != "" {
		if !r.req.AllowFreeform {
			return decision{}, errors.New("this question takes no free text beside the option")
		}
		out["text"] = resp.Text
	}
	raw := mustJSON(out)
	if r.schema == nil && len(r.plan.OutputSchema) > 0 {
		s, err := schema.Compile(r.plan.Call.Name+"/output", r.plan.OutputSchema)
		if err != nil {
			return decision{}, fmt.Errorf("the tool's output schema does not compile: %v", err)
		}
		r.schema = s
	}
	if r.schema != nil {
		if err := r.schema.Validate(raw); err != nil {
			return decision{}, fmt.Errorf("the answer %s breaks the tool's output schema: %v", raw, err)
		}
	}
	res.Outcome = protocol.OutcomeAnswered
	return decision{res: res, output: raw}, nil
}

func hasOption(opts []protocol.InputOption, id string) bool {
	for _, o := range opts {
		if o.ID == id {
			return true
		}
	}
	return false
}

func optionIDs(opts []protocol.InputOption) string {
	if len(opts) == 0 {
		return "none; answer with text"
	}
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.ID
	}
	return strings.Join(ids, ", ")
}

// decideLimit checks an answer to a session-limit request: continue or
// stop, by option id, label or number.
func (r *request) decideLimit(resp protocol.InputResponse) (decision, error) {
	opt := resp.OptionID
	if opt == "" {
		m, ok := protocol.ResolveText(r.req, resp.Text)
		if !ok || m.OptionID == "" {
			return decision{}, fmt.Errorf("text %q is neither continue nor stop", resp.Text)
		}
		opt = m.OptionID
	}
	if opt != optionContinue && opt != optionStop {
		return decision{}, fmt.Errorf("unknown option %q: a session-limit request takes continue or stop", opt)
	}
	answer := protocol.InputResponse{RequestID: r.req.RequestID, OptionID: opt}
	return decision{res: protocol.InputResolution{Kind: r.req.Kind, Outcome: protocol.OutcomeAnswered, RequestID: r.req.RequestID, Response: &answer}}, nil
}

// Approve with edits (approval.Policy.Editable): a reviewer approves a call
// with an edited input (protocol.InputResponse.Input). The validator checks
// the edit against the tool's input schema (recorded in the plan), so an
// invalid edit leaves no trace; an accepted edit is a candidate that the
// approval policy (custom, Auto) and the response policy judge on the
// edited input before it settles the request (judge); the call runs with
// the edit; the model reads the call with the input that ran and a note
// naming the editor and the original input (edits.go).

// inputEdit is a person's edit of a call's input.
type inputEdit struct {
	input, original json.RawMessage
	by              *auth.Principal
}

// editError is an edit the validator refuses; typ is its failure type
// (signals.ErrTypeInvalidEdit, signals.ErrTypeNotEditable) and field the
// JSON pointer of the failing field.
type editError struct {
	typ, field, msg string
}

func (e *editError) Error() string { return e.msg }

// hasEdit reports whether resp carries an edited input (JSON null is none).
func hasEdit(resp protocol.InputResponse) bool {
	in := bytes.TrimSpace(resp.Input)
	return len(in) > 0 && !bytes.Equal(in, []byte("null"))
}

// sameResponse reports whether a and b are one answer (a repeat of an
// applied answer is accepted and changes nothing).
func sameResponse(a, b protocol.InputResponse) bool {
	return a.RequestID == b.RequestID && a.OptionID == b.OptionID && a.Text == b.Text &&
		hasEdit(a) == hasEdit(b) && (!hasEdit(a) || sameJSON(a.Input, b.Input))
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// checkEditable refuses an edit of a request that takes none, or sent
// with another option than approve.
func (r *request) checkEditable(resp protocol.InputResponse) error {
	if !hasEdit(resp) {
		return nil
	}
	if r.req.Kind != protocol.KindToolApproval || !r.plan.Editable {
		what := "this " + r.req.Kind + " request"
		if r.req.Kind == protocol.KindToolApproval {
			what = fmt.Sprintf("the approval of tool %s", r.plan.Call.Name)
		}
		return &editError{typ: signals.ErrTypeNotEditable, msg: fmt.Sprintf("%s takes no edited input: only a tool whose approval policy is Editable (approval.Policy.Editable) does", what)}
	}
	if !strings.EqualFold(resp.OptionID, "approve") {
		return errors.New(`an edited input goes only with optionId "approve"`)
	}
	return nil
}

// withEdit adds resp's edit to an approving decision once the edit matches
// the tool's input schema (compiled once). An edit equal to the model's
// input is a plain approval.
func (r *request) withEdit(d decision, resp protocol.InputResponse) (decision, error) {
	if !hasEdit(resp) {
		return d, nil
	}
	edited := json.RawMessage(bytes.TrimSpace(resp.Input))
	if edited[0] != '{' || !json.Valid(edited) {
		return decision{}, &editError{typ: signals.ErrTypeInvalidEdit, msg: fmt.Sprintf("the edited input of tool %s must be a JSON object", r.plan.Call.Name)}
	}
	if r.editSchema == nil {
		s, err := schema.Compile(r.plan.Call.Name+"/input", r.plan.InputSchema)
		if err != nil {
			return decision{}, fmt.Errorf("the input schema of tool %s does not compile: %v", r.plan.Call.Name, err)
		}
		r.editSchema = s
	}
	vs, err := r.editSchema.Violations(edited)
	if err != nil {
		return decision{}, &editError{typ: signals.ErrTypeInvalidEdit, msg: fmt.Sprintf("the edited input of tool %s is not JSON: %v", r.plan.Call.Name, err)}
	}
	if len(vs) > 0 {
		v := vs[0]
		at := v.InstanceLocation
		if at == "" {
			at = "(root)"
		}
		return decision{}, &editError{typ: signals.ErrTypeInvalidEdit, field: v.InstanceLocation,
			msg: fmt.Sprintf("the edited input breaks tool %s's input schema at %s: %s; the request stays open, send a corrected input", r.plan.Call.Name, at, v.Message)}
	}
	if sameJSON(edited, r.plan.Call.Input) {
		d.res.Response.Input = nil
		return d, nil
	}
	d.res.Response.Input = edited
	d.res.OriginalInput = r.plan.Call.Input
	d.edited = &inputEdit{input: edited, original: r.plan.Call.Input}
	return d, nil
}

// editFailure makes a validator error of a refused edit an application
// error of its type, the failing field in its details, so the API server
// answers 422 naming the field; other errors pass unchanged.
func editFailure(err error) error {
	var ee *editError
	if !errors.As(err, &ee) {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), ee.typ, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{ee.field}})
}
