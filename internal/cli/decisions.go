package cli

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/config"
)

// newDecisionsCommand exports the decision record (GET /eve/v1/decisions)
// as JSON lines on standard output.
func newDecisionsCommand(app App) *cobra.Command {
	f := sessionFlags{bin: app.name()}
	var filter client.DecisionFilter
	var since, until string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "decisions",
		Short: "Export the decision record as JSON lines: one session's, or every session's in a time range",
		Long: app.text(`{bin} decisions reads GET /eve/v1/decisions of an eve API server: every settled approval,
question and session-limit prompt (what was asked, who asked, who decided, when, the outcome, the note,
an edited input, refused candidates, expiry and escalation), a JSON object per line.

  {bin} decisions --session ses_…          one session's record
  {bin} decisions --since 24h --tool refund   every readable session's, decided in the last day

An operator key (principalType operator) reads every session's; other keys read the sessions they may
act on.`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			var err error
			if filter.Since, err = timeFlag("since", since, now); err != nil {
				return err
			}
			if filter.Until, err = timeFlag("until", until, now); err != nil {
				return err
			}
			if filter.SessionID == "" && filter.Since.IsZero() {
				return errors.New("give --session <id> for one session's decisions, or --since (e.g. 24h or 2026-12-01T00:00:00Z) for every session's")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			enc := json.NewEncoder(cmd.OutOrStdout())
			return f.client().Decisions(ctx, filter, func(d client.Decision) error { return enc.Encode(d) })
		},
	}
	cmd.Flags().StringVar(&f.url, "url", config.Env("EVE_URL", client.DefaultURL), "eve API server base URL (env EVE_URL)")
	cmd.Flags().StringVar(&f.apiKey, "api-key", config.Env("EVE_API_KEY", ""), "eve API key, sent as a bearer token (env EVE_API_KEY)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long the export may take")
	cmd.Flags().StringVar(&filter.SessionID, "session", "", "one session's record")
	cmd.Flags().StringVar(&since, "since", "", "decided at or after: an RFC 3339 time, or a duration back from now (24h)")
	cmd.Flags().StringVar(&until, "until", "", "decided at or before: an RFC 3339 time, or a duration back from now")
	cmd.Flags().StringVar(&filter.Tool, "tool", "", "only this tool's")
	cmd.Flags().StringVar(&filter.Principal, "principal", "", "only those this principal id requested or decided")
	cmd.Flags().StringVar(&filter.Outcome, "outcome", "", "approved, denied, answered, expired, cancelled or ignored")
	return cmd
}

// timeFlag reads an RFC 3339 time or a duration back from now ("" is zero).
func timeFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errors.New("--" + name + ": expected an RFC 3339 time such as 2026-12-01T00:00:00Z or a duration such as 24h")
	}
	return t, nil
}
