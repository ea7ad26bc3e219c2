package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
)

// What the model reads of a call a person edited (approval.Policy.Editable;
// the edit itself is checked in answer.go and judged in input.go): the call
// with the input that ran, and a note naming the editor and the model's
// input.

// editNote is what the model reads beside the result of a call a person
// edited ("" for any other call): who edited it, and both inputs (the
// call in the conversation shows the input that ran).
func editNote(c *pendingCall) string {
	if c.req == nil || c.req.edited == nil {
		return ""
	}
	e := c.req.edited
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
func (c *transcript) reviseEdited(ctx workflow.Context, in turnInput, resp model.Response, calls []*pendingCall) {
	edited := false
	toolCalls := append([]model.ToolCall(nil), resp.ToolCalls...)
	for _, call := range calls {
		if call.req == nil || call.req.edited == nil {
			continue
		}
		for i := range toolCalls {
			if toolCalls[i].ID == call.plan.Call.ID {
				toolCalls[i].Input, edited = call.req.edited.input, true
			}
		}
	}
	if !edited || len(c.pending) > 0 || c.ref.Empty() || ctx.Err() != nil {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
	})
	rev := work.ReviseInput{SessionID: in.SessionID, Conversation: c.ref,
		Message: model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: toolCalls}}
	var ref conversation.Ref
	if err := workflow.ExecuteLocalActivity(lctx, work.ReviseConversationName, rev).Get(ctx, &ref); err != nil {
		workflow.GetLogger(ctx).Error("the edited calls could not be stored in the conversation; the model reads the notes only", "turn", in.TurnID, "error", err)
		return
	}
	c.ref = ref
}
