package workflows

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Replay replays saved workflow histories against this build's workflow
// code: the deploy gate to run before rolling a build out while sessions,
// turns and tools-API executions run (`eve replay <dir>`, docs/deploy.md).
// Each path is a history (JSON, as `temporal workflow show --output json`
// prints it) or a directory of them (*.json). A history with a file
// beside it named like it plus ".id", holding "<workflow id> <run id>",
// replays as that execution, so ids derived from the workflow id (a
// delegated action's) match.
//
// opts carries what the recording workers ran with: the payload store
// their large payloads went to (ExternalStorage,
// payloadstore.ExternalStorage) and their interceptors. Replay returns
// nil when every history replays; otherwise an error naming each file
// that does not and why (a non-determinism error says which command the
// code no longer issues).
func Replay(opts worker.WorkflowReplayerOptions, paths ...string) error {
	files, err := historyFiles(paths)
	if err != nil {
		return err
	}
	r, err := worker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	// The configuration a session recorded is in its history: replay
	// needs none.
	(&runtime{}).Register(r)
	(&runtime{}).RegisterExecutions(r)
	var errs []error
	for _, f := range files {
		if err := replayFile(r, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}

// historyFiles lists the histories paths name, each directory's sorted.
func historyFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		in, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("replay: no histories (*.json) in %s", p)
		}
		sort.Strings(in)
		files = append(files, in...)
	}
	if len(files) == 0 {
		return nil, errors.New("replay: no histories given")
	}
	return files, nil
}

// replayFile replays one history, as the execution its ".id" file names
// when it has one.
func replayFile(r worker.WorkflowReplayer, f string) error {
	// The SDK logs a failed replay; the error returned says the same.
	quiet := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	idLine, err := os.ReadFile(f + ".id")
	if errors.Is(err, os.ErrNotExist) {
		return r.ReplayWorkflowHistoryFromJSONFile(quiet, f)
	}
	if err != nil {
		return err
	}
	wid, run, _ := strings.Cut(strings.TrimSpace(string(idLine)), " ")
	file, err := os.Open(f)
	if err != nil {
		return err
	}
	defer file.Close()
	h, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("read the history: %w", err)
	}
	return r.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: wid, RunID: run}})
}
