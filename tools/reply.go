package tools

import (
	"encoding/json"

	"github.com/eve-temporal/eve/model"
)

// ReplyToolName is eve's structured-output tool: a turn whose message
// asked for an output schema offers it to the model, with the schema as
// its input, and ends when the model calls it with a valid value (eve's
// dist/src/harness/final-output.js). It is the runtime's, never a
// registry's.
const ReplyToolName = "eve__reply"

// ReplyToolDescription is eve's description of eve__reply, word for word.
const ReplyToolDescription = "Reply with your final answer in the required structure by calling this tool. Call it when you are done, as your final step; do not answer in prose."

// ReplyDescriptor is eve__reply as the model sees it for outputSchema.
func ReplyDescriptor(outputSchema json.RawMessage) model.ToolDescriptor {
	return model.ToolDescriptor{Name: ReplyToolName, Description: ReplyToolDescription, InputSchema: outputSchema}
}
