package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Approve with edits (approval.Policy.Editable): a reviewer approves a call
// with an edited input (protocol.InputResponse.Input). The respond Update's
// validator checks the edit against the tool's input schema (recorded in
// the plan), so an invalid edit leaves no trace; an accepted edit is a
// candidate that the approval policy (custom, Auto) and the response policy
// judge on the edited input before it settles the request; the call runs
// with the edit; the model reads the call with the input that ran and a
// note naming the editor and the original input.

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
func (r *openRequest) checkEditable(resp protocol.InputResponse) error {
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
func (r *openRequest) withEdit(d decision, resp protocol.InputResponse) (decision, error) {
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
	d.edit = &inputEdit{input: edited, original: r.plan.Call.Input}
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

// admitEdit readies an edited decision for its candidate: the editor is
// recorded. A history recorded before edits existed (the version says so)
// took the response as a plain approval; so does its replay.
func (t *turn) admitEdit(ctx workflow.Context, d decision, responder *auth.Principal) decision {
	if d.edit == nil {
		return d
	}
	if workflow.GetVersion(ctx, changeEdits, workflow.DefaultVersion, 1) < 1 {
		d.edit, d.res.OriginalInput = nil, nil
		return d
	}
	e := *d.edit
	e.by = responder
	d.edit = &e
	d.res.EditedBy = principalRef(responder)
	if d.res.EditedBy == nil {
		d.res.EditedBy = &protocol.PrincipalRef{ID: auth.TypeAnonymous, Type: auth.TypeAnonymous}
	}
	return d
}

// candidateVia reports whether d, answering r, goes through a candidate:
// a response policy judges r, or d edits the call.
func (t *turn) candidateVia(r *openRequest, d decision) bool { return t.judged(r) || d.edit != nil }

// evaluateCandidate judges a candidate: an edit is put to the approval
// policy again (custom and Auto decide on the input), then to the response
// policy (if any; else the default rule, checked before); a plain response
// to its response policy only.
func (t *turn) evaluateCandidate(ctx workflow.Context, c *candidate) workflow.Future {
	if c.d.edit == nil {
		return t.evaluateResponse(ctx, c)
	}
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		p := c.r.plan
		if needsPolicy(p) && reviewed(ctx, p) {
			var st approval.Status
			err := evaluatePolicy(ctx, work.ApprovalInput{Context: approval.Context{
				Session: t.session(), ToolName: p.Call.Name, ToolInput: c.d.edit.input, CallID: p.Call.ID,
				ApprovedTools: append([]string{}, t.board.approved...),
			}, Dynamic: t.dynamicFor(p.Call.Name)}).Get(ctx, &st)
			switch {
			case err != nil || !st.Valid() || (st.Type == approval.UserApproval && st.Reason == approval.ReasonPolicyFailed):
				// It could not judge the edit: nothing settles.
				set.Set(nil, temporal.NewNonRetryableApplicationError("the approval policy failed on the edited input", work.ErrTypeResponsePolicy, err))
				return
			case st.Type == approval.Denied:
				reason := "The approval policy denies the edited call."
				if st.Reason != "" {
					reason = "The approval policy denies the edited call: " + st.Reason
				}
				set.Set(approval.Reject(reason), nil)
				return
			}
		}
		if !t.judged(c.r) {
			set.Set(approval.Allow(), nil)
			return
		}
		var v approval.Verdict
		err := t.evaluateResponse(ctx, c).Get(ctx, &v)
		set.Set(v, err)
	})
	return f
}

// editedRequest fills a response policy's request with the edit: the input
// that would run, and the model's.
func (c *candidate) editedRequest(req *approval.Request) {
	if e := c.d.edit; e != nil {
		req.ToolInput, req.OriginalInput = e.input, e.original
	}
}

// refusedEdit says why the policies refused the edits of a batch that
// settled none of them ("" when an edit settled its request, or none was
// refused): the respond Update's RespondResult.EditRefused.
func (t *turn) refusedEdit(req []protocol.InputResponse) string {
	var why []string
	for _, resp := range req {
		r := t.board.byID[resp.RequestID]
		if r == nil || !hasEdit(resp) || r.editRefusal == "" {
			continue
		}
		if r.settled && r.edit != nil && sameJSON(r.edit.input, resp.Input) {
			return "" // an edit settled its request: the batch did something
		}
		why = append(why, fmt.Sprintf("request %s: %s", resp.RequestID, r.editRefusal))
		r.editRefusal = ""
	}
	return strings.Join(why, "; ")
}

// editNote is what the model reads beside the result of a call a person
// edited ("" for any other call): who edited it, and both inputs (the
// call in the conversation shows the input that ran).
func editNote(c *pendingCall) string {
	if c.req == nil || c.req.edit == nil {
		return ""
	}
	e := c.req.edit
	who := "an anonymous person"
	if e.by != nil {
		who = e.by.ID
		if e.by.Type != "" {
			who = e.by.Type + " " + e.by.ID
		}
	}
	return fmt.Sprintf("Note: a person (%s) edited this call's input before approving it. It ran with %s, not with the input you proposed, %s.",
		who, compactJSON(e.input), compactJSON(e.original))
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// reviseEdited shows the model the calls of its answer with the inputs
// that ran: the stored answer (the conversation's last message, which the
// step stored) is replaced when a person edited one of its calls. A store
// that fails leaves the answer as the model gave it; the results' notes
// still say what ran.
func (t *turn) reviseEdited(ctx workflow.Context, resp model.Response, calls []*pendingCall) {
	edited := false
	toolCalls := append([]model.ToolCall(nil), resp.ToolCalls...)
	for _, c := range calls {
		if c.req == nil || c.req.edit == nil {
			continue
		}
		for i := range toolCalls {
			if toolCalls[i].ID == c.plan.Call.ID {
				toolCalls[i].Input, edited = c.req.edit.input, true
			}
		}
	}
	if !edited || len(t.conv.pending) > 0 || t.conv.ref.Empty() || ctx.Err() != nil {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
	})
	in := work.ReviseInput{SessionID: t.in.SessionID, Conversation: t.conv.ref,
		Message: model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: toolCalls}}
	var ref conversation.Ref
	if err := workflow.ExecuteLocalActivity(lctx, work.ReviseConversationName, in).Get(ctx, &ref); err != nil {
		workflow.GetLogger(ctx).Error("the edited calls could not be stored in the conversation; the model reads the notes only", "turn", t.in.TurnID, "error", err)
		return
	}
	t.conv.ref = ref
}
