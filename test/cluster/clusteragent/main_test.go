package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/tools"
)

// The agent keeps the demo's rules and tools and adds slow_step's.
func TestAgent(t *testing.T) {
	ag, err := Agent()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"get_weather", "run_report", "slow_step"} {
		if _, ok := ag.Tools.Get(name); !ok {
			t.Errorf("no tool %s", name)
		}
	}
	step := func(msgs ...model.Message) model.Response {
		t.Helper()
		r, err := ag.Model.Step(context.Background(), model.Request{Messages: msgs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	user := model.Message{Role: model.RoleUser, Text: "slow step b1"}
	r := step(user)
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "slow_step" || string(r.ToolCalls[0].Input) != `{"tag":"b1"}` {
		t.Fatalf("slow step: %+v", r)
	}
	out := json.RawMessage(`{"tag":"b1","worker":"worker-2","attempt":2}`)
	r = step(user, model.Message{Role: model.RoleAssistant, ToolCalls: r.ToolCalls},
		model.Message{Role: model.RoleTool, ToolResults: []model.ToolResult{{CallID: r.ToolCalls[0].ID, Name: "slow_step", Output: out}}})
	if want := "slow step b1 finished by worker-2 on attempt 2"; r.Text != want {
		t.Errorf("reply %q, want %q", r.Text, want)
	}
	if r := step(model.Message{Role: model.RoleUser, Text: "what's the weather in Paris"}); len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "get_weather" {
		t.Errorf("demo rule: %+v", r)
	}
}

func TestSlowStepMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 s")
	}
	dir := t.TempDir()
	t.Setenv(MarkersEnv, dir)
	t.Setenv(WorkerNameEnv, "w1")
	tool := SlowStep()
	ctx := tools.NewContext(context.Background(), auth.Session{ID: "s"}, "t", "c", "slow_step", 2, nil)
	res, err := tool.Execute(ctx, json.RawMessage(`{"tag":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(SlowResult); r.Worker != "w1" || r.Attempt != 2 || r.Phase != "done" {
		t.Errorf("result %+v", r)
	}
	for _, p := range []string{"start", "done"} {
		b, err := os.ReadFile(filepath.Join(dir, "x.2."+p+".json"))
		if err != nil || !strings.Contains(string(b), `"worker":"w1"`) {
			t.Errorf("marker %s: %s %v", p, b, err)
		}
	}
}
