package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// blob returns a JSON string whose marshalled form is exactly n bytes.
func blob(n int) string { return strings.Repeat("x", n-2) }

func sized(name string, limit int, schema string) *tools.Tool {
	t := &tools.Tool{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`), MaxOutputBytes: limit,
		Execute: func(_ *tools.Context, in json.RawMessage) (any, error) {
			var v struct{ N int }
			json.Unmarshal(in, &v)
			return blob(v.N), nil
		}}
	if schema != "" {
		t.OutputSchema = json.RawMessage(schema)
	}
	return t
}

func TestExecuteToolOutputLimit(t *testing.T) {
	reg := tools.NewRegistry()
	reg.MustRegister(
		sized("read_file", 0, ""),
		sized("big_file", 2<<20, ""),
		sized("tiny", 10, `{"type":"object","required":["never"]}`), // the size check comes before the schema check (a string breaks this schema)
	)
	var logs bytes.Buffer
	a := newActivitySet(Options{Tools: reg, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	run := func(tool string, n int) work.ToolOutcome {
		t.Helper()
		out, err := a.ExecuteTool(context.Background(), work.ExecuteToolInput{CallID: "call_" + tool, ToolName: tool, Input: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)})
		if err != nil {
			t.Fatalf("%s(%d): activity error %v, want an outcome", tool, n, err)
		}
		return out
	}
	const def = tools.DefaultMaxOutputBytes
	cases := []struct {
		tool   string
		n      int
		over   bool
		limit  int
		status string
	}{
		{"read_file", def - 1, false, def, protocol.StatusCompleted},
		{"read_file", def, false, def, protocol.StatusCompleted}, // exactly at the limit
		{"read_file", def + 1, true, def, protocol.StatusFailed},
		{"read_file", 1572864, true, def, protocol.StatusFailed},
		{"read_file", 5 << 20, true, def, protocol.StatusFailed},
		{"big_file", 1572864, false, 2 << 20, protocol.StatusCompleted}, // per-tool override
		{"big_file", 2<<20 + 1, true, 2 << 20, protocol.StatusFailed},
		{"tiny", 11, true, 10, protocol.StatusFailed},
	}
	for _, c := range cases {
		logs.Reset()
		o := run(c.tool, c.n)
		if o.Status != c.status {
			t.Fatalf("%s(%d): status %s, want %s (%+v)", c.tool, c.n, o.Status, c.status, o.Error)
		}
		if !c.over {
			if len(o.Output) != c.n {
				t.Fatalf("%s(%d): output is %d bytes", c.tool, c.n, len(o.Output))
			}
			continue
		}
		want := "tool " + c.tool + " returned " + strconv.Itoa(c.n) + " bytes of output; the limit is " + strconv.Itoa(c.limit) + " (tools.Tool.MaxOutputBytes). Return less (page or summarize) or raise the tool's MaxOutputBytes."
		if o.Error == nil || o.Error.Code != protocol.CodeToolOutputTooLarge || o.Error.Message != want {
			t.Fatalf("%s(%d): error %+v\nwant message %q", c.tool, c.n, o.Error, want)
		}
		// The model sees the error as the call's result.
		var res map[string]string
		if err := json.Unmarshal(o.Output, &res); err != nil || res["code"] != "TOOL_OUTPUT_TOO_LARGE" || res["error"] != want {
			t.Fatalf("%s(%d): output %s", c.tool, c.n, o.Output)
		}
		var rec map[string]any
		if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
			t.Fatalf("%s(%d): log %q: %v", c.tool, c.n, logs.String(), err)
		}
		if rec["tool"] != c.tool || rec["call"] != "call_"+c.tool || rec["size"] != float64(c.n) || rec["limit"] != float64(c.limit) || logs.Len() > 1000 {
			t.Fatalf("%s(%d): log %s", c.tool, c.n, logs.String())
		}
	}
}

func TestPlanCarriesOutputLimit(t *testing.T) {
	def, big := sized("a", 0, ""), sized("b", 3<<20, "")
	tools.NewRegistry().MustRegister(def, big)
	if p := work.PlanCall(def, model.ToolCall{ID: "c", Name: "a", Input: json.RawMessage(`{}`)}); p.MaxOutputBytes != tools.DefaultMaxOutputBytes {
		t.Fatalf("default plan limit %d", p.MaxOutputBytes)
	}
	if p := work.PlanCall(big, model.ToolCall{ID: "c", Name: "b", Input: json.RawMessage(`{}`)}); p.MaxOutputBytes != 3<<20 {
		t.Fatalf("override plan limit %d", p.MaxOutputBytes)
	}
}

func TestCheckOutputSize(t *testing.T) {
	if work.CheckOutputSize("t", make([]byte, 10), 10) != nil || work.CheckOutputSize("t", make([]byte, 11), 0) != nil {
		t.Fatal("at the limit, or an unknown limit, must pass")
	}
	err := work.CheckOutputSize("run_report", make([]byte, 11), 10)
	if err == nil || !strings.Contains(err.Error(), "output is 11 bytes; tool run_report accepts at most 10") {
		t.Fatalf("err = %v", err)
	}
}
