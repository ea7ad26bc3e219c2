package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// A tool that panics fails its call at once with TOOL_PANICKED (the
// model reads that it crashed; the MCP tasks extension reports the task
// failed), and the worker logs the panic with its stack.
func TestExecuteToolPanics(t *testing.T) {
	reg := tools.NewRegistry()
	reg.MustRegister(&tools.Tool{Name: "crash", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute: func(*tools.Context, json.RawMessage) (any, error) { panic("nil map write") }})
	var logs bytes.Buffer
	a := newActivitySet(Options{Tools: reg, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	out, err := a.ExecuteTool(context.Background(), work.ExecuteToolInput{CallID: "call_1", ToolName: "crash", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("activity error %v, want an outcome", err)
	}
	if out.Status != protocol.StatusFailed || out.Error == nil || out.Error.Code != protocol.CodeToolPanicked ||
		!strings.Contains(out.Error.Message, "tool crash crashed (it panicked: nil map write)") {
		t.Fatalf("outcome %+v", out)
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"tool panicked"`) || !strings.Contains(l, "panic_test.go") {
		t.Fatalf("log %s", l)
	}
}
