package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// An attempt of test_tool_with_progress that follows one lost to a
// heartbeat timeout (a loaded machine) goes on from the last report the
// lost one recorded, never back to 0: the suite wants the values in order.
func TestProgressResumesFromItsLastReport(t *testing.T) {
	var progress *tools.Tool
	for _, f := range fixtures() {
		if f.Name == "test_tool_with_progress" {
			progress = f
		}
	}
	if progress == nil || !progress.Idempotent {
		t.Fatalf("test_tool_with_progress: %+v, want an idempotent tool (its next attempt goes on)", progress)
	}
	var reported []float64
	heartbeat := func(d ...any) {
		if p, ok := d[0].(protocol.Progress); ok {
			reported = append(reported, p.Progress)
		}
	}
	ctx := tools.NewContext(context.Background(), auth.Session{ID: "s"}, "t", "c", progress.Name, 2, heartbeat)
	ctx.SetLastHeartbeat(func(v any) error {
		b, _ := json.Marshal(protocol.Progress{Progress: 50})
		return json.Unmarshal(b, v)
	})
	if _, err := progress.Execute(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if want := []float64{50, 100}; !slices.Equal(reported, want) {
		t.Fatalf("reported %v after a lost attempt at 50, want %v", reported, want)
	}
}
