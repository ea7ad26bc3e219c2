package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/protocol"
)

// newInboxCommand lists and settles open requests across sessions
// (GET/POST /eve/v1/inbox).
func newInboxCommand(app App) *cobra.Command {
	f := sessionFlags{bin: app.name()}
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Every open request you may settle, across sessions: list, approve, deny, answer, edit",
		Long: app.text(`{bin} inbox reads GET /eve/v1/inbox of an eve API server: the approvals, questions and
session-limit prompts of every parked turn that the key's principal may settle.`),
	}
	cmd.PersistentFlags().StringVar(&f.url, "url", config.Env("EVE_URL", client.DefaultURL), "eve API server base URL (env EVE_URL)")
	cmd.PersistentFlags().StringVar(&f.apiKey, "api-key", config.Env("EVE_API_KEY", ""), "eve API key, sent as a bearer token (env EVE_API_KEY)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the server")

	var filter client.InboxFilter
	var asJSON bool
	var dueWithin time.Duration
	list := &cobra.Command{
		Use:   "list",
		Short: "List open requests (nearest deadline, then oldest, first); every page",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			fl := filter
			if dueWithin > 0 {
				fl.DueBefore = time.Now().Add(dueWithin)
			}
			for {
				p, err := f.client().Inbox(ctx, fl)
				if err != nil {
					return err
				}
				for _, it := range p.Items {
					if asJSON {
						b, _ := json.Marshal(it)
						fmt.Fprintln(out, string(b))
						continue
					}
					due := ""
					if it.Deadline != nil {
						due = " due " + it.Deadline.Format(time.RFC3339)
					}
					if it.EscalatedAt != nil {
						due += " escalated to " + it.EscalatedTo
					}
					if it.RootSessionID != "" {
						// A subagent's request: where it sits under its root.
						var names []string
						for _, h := range it.Path {
							names = append(names, h.Agent)
						}
						due += fmt.Sprintf(" in subagent %s (depth %d) of %s", strings.Join(names, " → "), it.Depth, it.RootSessionID)
					}
					fmt.Fprintf(out, "%s  %s %s by %s, open %s%s: %s\n", it.ID, it.Kind, it.ToolName, it.RequesterPrincipalID,
						time.Since(it.OpenedAt).Round(time.Second), due, it.Request.Prompt)
				}
				if p.NextCursor == "" {
					return nil
				}
				fl.Cursor = p.NextCursor
			}
		},
	}
	list.Flags().StringVar(&filter.Tool, "tool", "", "only this tool's requests")
	list.Flags().StringVar(&filter.SessionID, "session", "", "only this session's requests")
	list.Flags().StringVar(&filter.Requester, "requester", "", "only requests of this principal id")
	list.Flags().StringVar(&filter.Kind, "kind", "", "tool-approval, question or session-limit")
	list.Flags().DurationVar(&filter.MinAge, "min-age", 0, "only requests open at least this long")
	list.Flags().StringVar(&filter.Tenant, "tenant", "", "only requests whose requester has this tenantId")
	list.Flags().StringVar(&filter.Root, "root", "", "only this root session's requests and its subagents' at any depth")
	list.Flags().BoolVar(&filter.Escalated, "escalated", false, "only escalated approvals")
	list.Flags().DurationVar(&dueWithin, "due-within", 0, "only requests whose deadline is within this long (e.g. 1h)")
	list.Flags().BoolVar(&asJSON, "json", false, "JSON lines")

	show := &cobra.Command{
		Use:   "show <inbox-id>",
		Short: "Show one open request in full (its tool input, options and prompt)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			sid, _, ok := protocol.SplitInboxID(args[0])
			if !ok {
				return fmt.Errorf("%q is no inbox id: pass one from %s inbox list (<sessionId>:<requestId>)", args[0], f.bin)
			}
			fl := client.InboxFilter{SessionID: sid}
			for {
				p, err := f.client().Inbox(ctx, fl)
				if err != nil {
					return err
				}
				for _, it := range p.Items {
					if it.ID == args[0] {
						b, _ := json.MarshalIndent(it, "", "  ")
						fmt.Fprintln(cmd.OutOrStdout(), string(b))
						return nil
					}
				}
				if p.NextCursor == "" {
					return fmt.Errorf("%s is not open, or not yours to settle (see: %s inbox list)", args[0], f.bin)
				}
				fl.Cursor = p.NextCursor
			}
		},
	}

	settle := func(use, short, option string, withReason bool) *cobra.Command {
		var reason, opt, text string
		c := &cobra.Command{
			Use:   use + " <inbox-id>",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				a := protocol.InboxAnswer{OptionID: option, Text: reason}
				if option == "" {
					a = protocol.InboxAnswer{OptionID: opt, Text: text}
				}
				acc, err := f.client().AnswerInbox(ctx, args[0], a)
				if err != nil {
					return refusedError(err)
				}
				for _, r := range acc.Resolutions {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", r.RequestID, r.Outcome)
				}
				if len(acc.Resolutions) == 0 && len(acc.Duplicates) == 0 {
					// A server older than the refusals in its answers.
					fmt.Fprintln(cmd.OutOrStdout(), "sent: the tool's response policy judged it; see the session's approval.candidate events for the outcome")
				}
				return nil
			},
		}
		if withReason {
			c.Flags().StringVar(&reason, "reason", "", "why (sent with the denial)")
		}
		if option == "" {
			c.Flags().StringVar(&opt, "option", "", "an option id")
			c.Flags().StringVar(&text, "text", "", "free text, or an option's label or number")
		}
		return c
	}
	cmd.AddCommand(list, show,
		settle("approve", "Approve a tool call", "approve", false),
		settle("deny", "Deny a tool call", "cancel", true),
		settle("answer", "Answer a question (--option or --text)", "", false),
		newInboxEditCommand(&f, &timeout),
	)
	return cmd
}

// newInboxEditCommand approves a tool call with an edited input (an
// editable approval: approval.Policy.Editable).
func newInboxEditCommand(f *sessionFlags, timeout *time.Duration) *cobra.Command {
	var input, file string
	c := &cobra.Command{
		Use:   "edit <inbox-id> (--input '{...}' | --file input.json)",
		Short: "Approve a tool call with an edited input (editable approvals)",
		Long: `edit approves the call with the input given instead of the model's. The input must match the
tool's input schema (see inbox show: inputSchema); an invalid one is refused naming the field, and
the request stays open. The approval and response policies judge the edited call again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := []byte(input)
			switch {
			case input != "" && file != "":
				return fmt.Errorf("give --input or --file, not both")
			case file != "":
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read the edited input: %w", err)
				}
				raw = b
			case input == "":
				return fmt.Errorf("give the edited input: --input '{...}' or --file input.json")
			}
			if !json.Valid(raw) {
				return fmt.Errorf("the edited input is not JSON: pass a JSON object such as '{\"amount\": 5}'")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), *timeout)
			defer cancel()
			acc, err := f.client().EditInbox(ctx, args[0], json.RawMessage(raw))
			var ce *client.Error
			if errors.As(err, &ce) && ce.Field != "" {
				return fmt.Errorf("%w (field %s)", err, ce.Field)
			}
			if err != nil {
				return refusedError(err)
			}
			for _, r := range acc.Resolutions {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (edited)\n", r.RequestID, r.Outcome)
			}
			return nil
		},
	}
	c.Flags().StringVar(&input, "input", "", "the edited tool input, a JSON object")
	c.Flags().StringVar(&file, "file", "", "read the edited tool input from this file")
	return c
}

// refusedError says plainly that a policy refused an answer: which
// request, the outcome and the policy's reason, and that it stays open.
// Other errors pass unchanged.
func refusedError(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || len(ce.Refused) == 0 {
		return err
	}
	lines := make([]string, len(ce.Refused))
	for i, r := range ce.Refused {
		lines[i] = fmt.Sprintf("refused: %s (%s): %s; the request stays open", r.RequestID, r.Outcome, r.Reason)
	}
	return errors.New(strings.Join(lines, "\n"))
}
