package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/client"
)

// errReplayDiffers is replay-stubs' failure when the trajectory differs
// (the diff is printed).
var errReplayDiffers = errors.New("the replay's trajectory differs from the recording")

func newSessionExportStubsCommand(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "export-stubs <session-id>",
		Short: "Print a session as a test: eve's tool stubs, the messages and answers that drove it, its trajectory (JSON)",
		Long: `export-stubs turns a session's history into a test (docs/evals.md): a "stubs" array
in eve's shape (one rule per tool and input, its outcomes the results the calls
returned), the messages and answers that drove the session ("messages", "steps"),
and the calls the model made ("calls"). Replay it with replay-stubs, or use its
stubs and messages in an eve eval.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := f.client().ExportStubs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return enc.Encode(rec)
		},
	}
}

func newSessionReplayStubsCommand(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "replay-stubs <file>",
		Short: "Replay a session exported with export-stubs against a server; fail with a diff where the trajectory differs",
		Long: `replay-stubs creates a session with the recording's stubs on the server (--url; its
caller needs the tool-stub grant, docs/evals.md), sends its messages and answers
its requests in order, and compares the calls the model makes (tool, order,
input) with the recorded ones. Same: exit 0. Different: the diff, exit 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var rec client.Recording
			if err := json.Unmarshal(data, &rec); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			res, err := f.client().Replay(cmd.Context(), rec)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.Diff != "" {
				fmt.Fprintf(out, "replayed %s as %s\n%s", rec.SessionID, res.SessionID, res.Diff)
				return errReplayDiffers
			}
			fmt.Fprintf(out, "replayed %s as %s: the same %d calls\n", rec.SessionID, res.SessionID, len(res.Calls))
			return nil
		},
	}
}
