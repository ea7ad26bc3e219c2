package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// savedHistories is e2e's corpus of saved histories.
const savedHistories = "../e2e/testdata/histories"

// copyHistory copies a saved history (and its ".id" file, if any) into
// dir, passing its text through edit.
func copyHistory(t *testing.T, dir, name string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(savedHistories, name))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, []byte(edit(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err := os.ReadFile(filepath.Join(savedHistories, name+".id")); err == nil {
		if err := os.WriteFile(dst+".id", id, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func same(s string) string { return s }

// isNonDeterminism reports whether err is the SDK's non-determinism error.
func isNonDeterminism(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "nondetermin") || strings.Contains(msg, "tmprl1100")
}

// Replay, the deploy gate behind `eve replay`, passes histories the code
// still issues, and fails loudly on one it does not: the error names the
// file and says non-determinism.
func TestReplay(t *testing.T) {
	good := t.TempDir()
	for _, name := range []string{"v0.2.0-session-tools.json", "v0.2.0-turn-tools.json", "v0.4.0-execution-client-round-asks.json"} {
		copyHistory(t, good, name, same)
	}
	// The turn's history schedules a tool activity the code does not: as
	// if the code changed without a workflow.GetVersion.
	bad := t.TempDir()
	altered := copyHistory(t, bad, "v0.2.0-turn-tools.json", func(s string) string {
		return strings.Replace(s, `"eve.ExecuteTool"`, `"eve.ExecuteToolRenamed"`, 1)
	})
	empty := t.TempDir()
	for _, c := range []struct {
		name        string
		paths       []string
		wantErr     []string // substrings of the error; none: it replays
		nonDetermin bool
	}{
		{name: "directory of histories", paths: []string{good}},
		{name: "files", paths: []string{filepath.Join(good, "v0.2.0-turn-tools.json"), filepath.Join(good, "v0.2.0-session-tools.json")}},
		{name: "altered history", paths: []string{good, bad}, wantErr: []string{altered}, nonDetermin: true},
		{name: "no histories", paths: []string{empty}, wantErr: []string{"no histories", empty}},
		{name: "missing path", paths: []string{filepath.Join(empty, "nope")}, wantErr: []string{"nope"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Replay(worker.WorkflowReplayerOptions{}, c.paths...)
			if len(c.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Replay(%v) = %v, want nil", c.paths, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Replay(%v) = nil, want an error naming %q", c.paths, c.wantErr)
			}
			for _, want := range c.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Replay(%v) = %q, want it to name %q", c.paths, err, want)
				}
			}
			if got := isNonDeterminism(err); got != c.nonDetermin {
				t.Errorf("Replay(%v) = %q: non-determinism %v, want %v", c.paths, err, got, c.nonDetermin)
			}
			for _, f := range []string{"v0.2.0-session-tools.json", "v0.4.0-execution-client-round-asks.json"} {
				if strings.Contains(err.Error(), f) {
					t.Errorf("Replay(%v) = %q: it names %s, which replays", c.paths, err, f)
				}
			}
		})
	}
}

// A deliberately non-deterministic change to the code fails the saved
// histories: the turn below starts a timer the recorded histories never
// saw.
func TestReplayCatchesNonDeterministicChange(t *testing.T) {
	rt := &runtime{}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(rt.Session, workflow.RegisterOptions{Name: signals.SessionWorkflow})
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in turnInput) (turnOutput, error) {
		_ = workflow.Sleep(ctx, time.Millisecond) // the "harmless" change
		return rt.Turn(ctx, in)
	}, workflow.RegisterOptions{Name: signals.TurnWorkflow})
	files, err := filepath.Glob(filepath.Join(savedHistories, "*turn-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no saved turn histories in %s: %v", savedHistories, err)
	}
	failed := 0
	for _, f := range files {
		if err := replayFile(r, f); err != nil {
			failed++
			if !isNonDeterminism(err) {
				t.Errorf("replay %s failed, but not for non-determinism: %v", f, err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("the saved histories accepted a non-deterministic change to the turn workflow")
	}
}
