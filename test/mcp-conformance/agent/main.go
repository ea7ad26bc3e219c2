// Command agent is the conformance suite's fixture server: an eve app whose
// agent registers the tools that @modelcontextprotocol/conformance names
// (test_simple_text, test_error_handling, json_schema_2020_12_tool, greet,
// slow_compute, failing_job, ...), served by its own `mcp --http` and
// `worker` commands (run.sh starts both). Only the tests use it.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eve-temporal/eve"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

type none struct{}

// progressStep spaces test_tool_with_progress's reports: more than the
// heartbeat throttle (80% of its 2 s HeartbeatTimeout), less than the
// timeout.
const progressStep = 1700 * time.Millisecond

type greetIn struct {
	Name string `json:"name"`
}

type fileIn struct {
	Filename string `json:"filename"`
}

type regionIn struct {
	Region string `json:"region"`
}

type computeIn struct {
	Seconds float64 `json:"seconds"`
	Label   string  `json:"label,omitempty"`
}

// jsonSchema2020 is the schema the json-schema-2020-12 scenario expects
// tools/list to carry verbatim.
const jsonSchema2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},
"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},
"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],
"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},
"additionalProperties":false}`

// sleep waits d or until the call is cancelled (tasks/cancel cancels the
// execution, which cancels the activity).
func sleep(ctx *tools.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func fixtures() []*tools.Tool {
	simple := tools.Func("test_simple_text", "Returns a simple text response.",
		func(*tools.Context, none) (string, error) { return "This is a simple text response for testing.", nil })
	failing := tools.Func("test_error_handling", "Always fails with an error the model can read.",
		func(*tools.Context, none) (string, error) {
			return "", tools.NonRetryable(errors.New("this tool intentionally returns an error for testing"))
		})
	schema := tools.Func("json_schema_2020_12_tool", "Takes input described by a JSON Schema 2020-12 document.",
		func(*tools.Context, json.RawMessage) (string, error) { return "ok", nil })
	schema.InputSchema = json.RawMessage(jsonSchema2020)
	greet := tools.Func("greet", "Greets someone.",
		func(_ *tools.Context, in greetIn) (string, error) { return fmt.Sprintf("Hello, %s!", in.Name), nil })
	compute := tools.Func("slow_compute", "Sleeps for the given seconds, then answers.",
		func(ctx *tools.Context, in computeIn) (string, error) {
			if err := sleep(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
				return "", err
			}
			return fmt.Sprintf("computed %s after %gs", in.Label, in.Seconds), nil
		})
	compute.Timeout = 5 * time.Minute
	job := tools.Func("failing_job", "Fails after about a second.",
		func(ctx *tools.Context, none none) (string, error) {
			if err := sleep(ctx, time.Second); err != nil {
				return "", err
			}
			return "", tools.NonRetryable(errors.New("failing_job failed, as it always does"))
		})
	// A tool that crashes: eve reports the panic as the tool's failure.
	crash := tools.Func("protocol_error_job", "Panics.",
		func(*tools.Context, none) (string, error) { panic("protocol_error_job panics, as it always does") })
	crash.Retry = &tools.RetryPolicy{MaximumAttempts: 1}
	// An approval-gated tool: as a task it waits for the caller's approval
	// (input_required); tasks/update answers it.
	confirm := tools.Func("confirm_delete", "Deletes a file once a person approves.",
		func(_ *tools.Context, in fileIn) (string, error) { return "deleted " + in.Filename, nil })
	confirm.Approval = approval.Always()
	// SEP-2243: a parameter mirrored into an Mcp-Param-Region header, which
	// the server checks against the body.
	headers := tools.Func("test_custom_headers", "Echoes a region that clients also send as the Mcp-Param-Region header.",
		func(_ *tools.Context, in regionIn) (string, error) { return "region " + in.Region, nil })
	headers.InputSchema = json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)
	// Progress: three reports, each heartbeated (Temporal records a
	// heartbeat at most every 80% of HeartbeatTimeout, so they are spaced
	// beyond that), relayed as notifications/progress. That leaves a
	// report 300 ms to reach the server before the attempt times out: on
	// a loaded machine it may not, and the next attempt goes on from the
	// last report it recorded (never back to 0: the suite wants the
	// values in order).
	progress := tools.Func("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.",
		func(ctx *tools.Context, _ none) (string, error) {
			var last protocol.Progress
			resumed := ctx.LastHeartbeat(&last)
			for _, p := range []float64{0, 50, 100} {
				if resumed && p < last.Progress {
					continue
				}
				ctx.ReportProgress(p, 100, fmt.Sprintf("%g of 100", p))
				if err := sleep(ctx, progressStep); err != nil {
					return "", err
				}
			}
			return "progress reported: 0, 50, 100", nil
		})
	progress.HeartbeatTimeout = 2 * time.Second
	progress.Idempotent = true // reporting progress has no side effect to repeat
	progress.Retry = &tools.RetryPolicy{InitialInterval: 100 * time.Millisecond}
	return append([]*tools.Tool{simple, failing, schema, greet, compute, job, crash, confirm, headers, progress}, roundFixtures()...)
}

func newAgent() (*agent.Agent, error) {
	reg := tools.NewRegistry()
	if err := reg.Register(fixtures()...); err != nil {
		return nil, err
	}
	m, err := scripted.Parse([]byte("rules: []\n"))
	if err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "conformance", Model: m, Tools: reg, LocalModel: true, Disable: []string{"ask_question"}}, nil
}

func main() { eve.Main(newAgent) }
