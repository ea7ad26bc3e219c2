package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/workflows"
)

func newReplayCommand(app App) *cobra.Command {
	var store string
	cmd := &cobra.Command{
		Use:   "replay <dir|file>...",
		Short: "Replay saved workflow histories against this build: the gate to pass before rolling it out",
		Long: `{bin} replay replays saved workflow histories (JSON, as "temporal workflow
show --output json" prints them; a directory: every *.json in it) against the
workflow code of this binary, and fails when a change would break a running
session, turn or tool execution: it exits 1 naming every history that does
not replay and why (a non-determinism error says which command the
code no longer issues).

Run it before rolling a new build out while sessions run (docs/deploy.md).
Histories whose large payloads went to the payload store are read from the
store the workers use (--payload-store, EVE_PAYLOAD_STORE).`,
		Example: `  temporal workflow show --workflow-id <session> --output json > histories/session.json
  {bin} replay histories/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := (&config.Temporal{PayloadStore: store}).Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := workflows.Replay(worker.WorkflowReplayerOptions{ExternalStorage: payloadstore.ExternalStorage(s)}, args...); err != nil {
				return fmt.Errorf("saved histories do not replay against this build; do not roll it out while such workflows run:\n%w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "every history in %s replays against this build\n", strings.Join(args, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "payload-store", config.Env(payloadstore.EnvVar, payloadstore.DefaultSpec),
		"the workers' payload store, which holds the histories' large payloads: file:<dir> or s3://bucket/prefix (env "+payloadstore.EnvVar+")")
	return cmd
}
