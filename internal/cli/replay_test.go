package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// savedHistories is e2e's corpus of saved histories.
const savedHistories = "../../e2e/testdata/histories"

// replayArgsEnv, in a child process of this test binary, holds the
// arguments of the eve command it runs through Main.
const replayArgsEnv = "EVE_TEST_REPLAY_ARGS"

// copyHistories copies the saved histories (and their ".id" files) into a
// new directory, passing each through edit. "raced" ones, which replay
// only with their test's interceptor (e2e), stay behind.
func copyHistories(t *testing.T, edit func(name, text string) string) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(savedHistories, "*.json*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no saved histories in %s: %v", savedHistories, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.Contains(name, "raced") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(edit(name, string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// eve replay, the deploy gate, passes the saved histories and fails
// loudly on a history the code no longer issues: exit status 1, and
// stderr names the file and the non-determinism error.
func TestReplayCommand(t *testing.T) {
	if args := os.Getenv(replayArgsEnv); args != "" {
		root := newRootCommand()
		root.SetArgs(strings.Split(args, "\n"))
		Main("eve", root) // exits 1 on an error
		os.Exit(0)
	}
	const altered = "v0.2.0-turn-tools.json"
	good := copyHistories(t, func(_, text string) string { return text })
	// One turn schedules a tool activity the code does not: as if the
	// workflow code changed without a workflow.GetVersion.
	bad := copyHistories(t, func(name, text string) string {
		if name != altered {
			return text
		}
		return strings.Replace(text, `"eve.ExecuteTool"`, `"eve.ExecuteToolRenamed"`, 1)
	})
	for _, c := range []struct {
		name       string
		args       []string
		wantExit   int
		wantOut    []string // in stdout
		wantErr    []string // in stderr
		notWantErr []string
	}{
		{name: "saved histories", args: []string{"replay", good}, wantExit: 0,
			wantOut: []string{"every history in " + good + " replays against this build"}},
		{name: "a history that does not match the code", args: []string{"replay", bad}, wantExit: 1,
			wantErr:    []string{"eve: saved histories do not replay against this build", filepath.Join(bad, altered), "TMPRL1100", "nondeterministic"},
			notWantErr: []string{"v0.2.0-session-tools.json"}},
		{name: "no histories", args: []string{"replay", t.TempDir()}, wantExit: 1, wantErr: []string{"no histories (*.json)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReplayCommand$")
			cmd.Env = append(os.Environ(), replayArgsEnv+"="+strings.Join(append(c.args, "--payload-store", "file:"+t.TempDir()), "\n"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != c.wantExit {
				t.Fatalf("exit status %d, want %d\nstdout: %s\nstderr: %s", exit, c.wantExit, &stdout, &stderr)
			}
			for _, want := range c.wantOut {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout does not say %q:\n%s", want, &stdout)
				}
			}
			for _, want := range c.wantErr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, &stderr)
				}
			}
			for _, not := range c.notWantErr {
				if strings.Contains(stderr.String(), not) {
					t.Errorf("stderr names %s, which replays:\n%s", not, &stderr)
				}
			}
		})
	}
}
