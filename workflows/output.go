package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Structured output (changeOutputSchema; eve's per-turn outputSchema,
// guides/client/output-schema.mdx). A turn whose message sent a schema
// offers the model eve__reply with the schema as its input, as eve's
// harness does (dist/src/harness/final-output.js, step/after-model.js):
//
//   - a valid eve__reply, alone in its step and with no task working,
//     ends the turn: step.completed, result.completed {result},
//     turn.completed; the outcome's Data is the value;
//   - an invalid one is answered with what is wrong, and the model tries
//     again in the next step (bounded by MaxSteps, as any step);
//   - one beside other calls, or while tasks work, is answered with eve's
//     words saying why it was not delivered, and the model goes on (one
//     while a message the turn took waits to be read, likewise);
//   - a final answer in prose fails the turn with eve's
//     OUTPUT_SCHEMA_NOT_FULFILLED.

// codeOutputSchema and msgOutputSchema are eve's OUTPUT_SCHEMA_NOT_FULFILLED.
const (
	codeOutputSchema = "OUTPUT_SCHEMA_NOT_FULFILLED"
	msgOutputSchema  = "The agent could not produce a result matching the requested schema."
)

// eve's answers to an eve__reply it does not deliver.
const replyBesideCalls = "Your reply wasn't delivered because other calls in this response were still running. Use their results, then call " + tools.ReplyToolName + " again."

const replyBeforeMessage = "Your reply wasn't delivered because a new message arrived. Read it, then call " + tools.ReplyToolName + " again."

func replyWhileWorking(taskIDs []string) string {
	return fmt.Sprintf("You can't give your final reply while tasks you started are working (%s). Wait for their results with %s, or stop a task with %s, then call %s.",
		strings.Join(taskIDs, ", "), tools.TaskWaitName, tools.TaskCancelName, tools.ReplyToolName)
}

// replyDelivered is the result the model's accepted eve__reply call gets in
// the conversation (a call needs a result before the next user message).
var replyDelivered = json.RawMessage(`"Delivered."`)

// structured is the turn's output schema, when its message sent one.
type structured struct {
	raw    json.RawMessage
	schema *schema.Schema
	// results answer this step's eve__reply calls that were not delivered.
	results []model.ToolResult
}

// startStructured decides, at the turn's start, whether it asks for a
// structured result. The schema was checked when the message was sent; one
// that does not compile here (a worker's older compiler) fails the turn
// at once.
func (t *turn) startStructured(ctx workflow.Context) error {
	if len(t.in.OutputSchema) == 0 || !t.changeOn(ctx, changeOutputSchema) {
		return nil
	}
	s, err := schema.Compile("outputSchema", t.in.OutputSchema)
	if err != nil {
		return fmt.Errorf("the message's outputSchema is not a usable JSON Schema: %v", err)
	}
	t.out = &structured{raw: t.in.OutputSchema, schema: s}
	return nil
}

// isReply reports whether c is the turn's eve__reply.
func (t *turn) isReply(c model.ToolCall) bool {
	return t.out != nil && c.Name == tools.ReplyToolName
}

// otherCalls are a step's calls but eve__reply, which the turn answers itself.
func (t *turn) otherCalls(calls []model.ToolCall) []model.ToolCall {
	if t.out == nil {
		return calls
	}
	var out []model.ToolCall
	for _, c := range calls {
		if !t.isReply(c) {
			out = append(out, c)
		}
	}
	return out
}

// takeReply reads a step's eve__reply calls. It returns the value to end
// the turn with (nil: the turn goes on; the calls' answers wait in
// t.out.results for the step's tool message).
func (t *turn) takeReply(resp model.Response) json.RawMessage {
	t.out.results = nil
	var replies []model.ToolCall
	for _, c := range resp.ToolCalls {
		if t.isReply(c) {
			replies = append(replies, c)
		}
	}
	if len(replies) == 0 {
		return nil
	}
	fail := func(c model.ToolCall, msg string) {
		t.out.results = append(t.out.results, model.ToolResult{CallID: c.ID, Name: c.Name, Output: mustJSON(msg), IsError: true})
	}
	others := len(resp.ToolCalls) - len(replies)
	var value json.RawMessage
	for i, c := range replies {
		switch {
		case others > 0 || i > 0:
			fail(c, replyBesideCalls)
		case t.mustHold():
			fail(c, replyWhileWorking(t.workingTasks()))
		case len(t.steering) > 0:
			// A message the turn took arrived meanwhile: the model reads
			// it first (eve goes on while its queue has input).
			fail(c, replyBeforeMessage)
		default:
			if err := t.out.schema.Validate(c.Input); err != nil {
				fail(c, fmt.Sprintf("Invalid input for tool %s: %v. Call it again with a value that matches the required structure.", tools.ReplyToolName, err))
				continue
			}
			value = c.Input
			t.out.results = append(t.out.results, model.ToolResult{CallID: c.ID, Name: c.Name, Output: replyDelivered})
		}
	}
	return value
}

// endStructured ends the turn with its structured result.
func (t *turn) endStructured(ctx workflow.Context, stepIdx int, value json.RawMessage) (turnOutput, error) {
	t.conv.add(model.Message{Role: model.RoleTool, ToolResults: t.out.results})
	// What the conversation keeps of the reply: the value as the
	// assistant's text, as eve's history does.
	t.conv.add(model.Message{Role: model.RoleAssistant, Text: string(value)})
	t.closing = true
	t.log.emit(ctx, protocol.ResultCompleted, protocol.ResultCompletedData{Result: value, StepRef: t.step(stepIdx)})
	t.log.emit(ctx, protocol.TurnCompleted, t.ref())
	t.data = value
	return t.finish(ctx, signals.TurnStatusCompleted, string(value), "")
}
