package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/protocol"
)

// sessionFlags reach an eve API server (serve, or the one dev starts).
type sessionFlags struct {
	bin    string // the binary's name, for hints
	url    string
	apiKey string
}

func (f *sessionFlags) client() *client.Client {
	return client.New(f.url, client.WithAPIKey(f.apiKey))
}

// command is a session command line to suggest: this binary's, with --url
// when a bare command would reach another server (the key is never shown).
func (f *sessionFlags) command(args string) string {
	return f.bin + " session " + args + urlFlag(f.url)
}

// urlFlag is " --url <url>" when url is not where a session command goes
// without the flag (EVE_URL, else the default), else "".
func urlFlag(url string) string {
	if strings.TrimRight(url, "/") == strings.TrimRight(config.Env("EVE_URL", client.DefaultURL), "/") {
		return ""
	}
	return " --url " + url
}

func newSessionCommand(app App) *cobra.Command {
	f := sessionFlags{bin: app.name()}
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Talk to sessions through an eve API server: send, events, pending, respond, approve, deny, cancel, export-stubs, replay-stubs",
		Long: app.text(`{bin} session talks to an eve API server ({bin} serve, or the one {bin} dev starts)
over HTTP, so it works against any deployment by URL and key.`),
	}
	cmd.PersistentFlags().StringVar(&f.url, "url", config.Env("EVE_URL", client.DefaultURL), "eve API server base URL (env EVE_URL)")
	cmd.PersistentFlags().StringVar(&f.apiKey, "api-key", config.Env("EVE_API_KEY", ""), "eve API key, sent as a bearer token (env EVE_API_KEY)")
	cmd.AddCommand(
		newSessionSendCommand(&f),
		newSessionEventsCommand(&f),
		newSessionPendingCommand(&f),
		newSessionRespondCommand(&f),
		newSessionDecideCommand(&f, true),
		newSessionDecideCommand(&f, false),
		newSessionCancelCommand(&f),
		newSessionExportStubsCommand(&f),
		newSessionReplayStubsCommand(&f),
	)
	for _, c := range cmd.Commands() {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return f.sessionError(run(cmd, args)) }
		}
	}
	return cmd
}

// sessionError says what to do about a session that is gone.
func (f *sessionFlags) sessionError(err error) error {
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(err, client.ErrSessionEnded):
		return fmt.Errorf("%s\n(to go on, start a new session: %s without --session)", e.Message, f.command(`send "<message>"`))
	case errors.Is(err, client.ErrSessionNotFound):
		return fmt.Errorf("%s (check the id, and that --url is the server that created it)", e.Message)
	}
	return err
}

func newSessionSendCommand(f *sessionFlags) *cobra.Command {
	var (
		sessionID string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   `send "<message>"`,
		Short: "Send a message (to a new session unless --session is given) and print the turn's tool calls and reply",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return f.sendAndPrint(ctx, cmd.OutOrStdout(), sessionID, args[0])
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session id (default: start a new session)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the turn")
	return cmd
}

func (f *sessionFlags) sendAndPrint(ctx context.Context, out io.Writer, sessionID, message string) error {
	c := f.client()
	var (
		acc  client.Accepted
		err  error
		from int
	)
	if sessionID == "" {
		acc, err = c.CreateAndSend(ctx, message)
	} else {
		if from, err = c.Tail(ctx, sessionID); err != nil {
			return err
		}
		from++
		acc, err = c.Send(ctx, sessionID, message)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "session %s  %s\n", acc.SessionID, acc.TurnID)
	t, err := c.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, from, func(_ int, e protocol.Event) { printEvent(out, e) })
	if err != nil {
		return err
	}
	return f.turnEnd(out, t)
}

// turnEnd adds a hint when the turn parked, and an error when it failed.
func (f *sessionFlags) turnEnd(out io.Writer, t *client.Turn) error {
	switch t.Status {
	case client.TurnWaiting:
		for _, r := range t.Open {
			if r.Kind == protocol.KindToolApproval {
				fmt.Fprintf(out, "answer with: %s   (or deny)\n", f.command("approve "+t.SessionID+" "+r.RequestID))
			} else {
				fmt.Fprintf(out, "answer with: %s --option ID | --text T\n", f.command("respond "+t.SessionID+" "+r.RequestID))
			}
		}
	case client.TurnFailed:
		return fmt.Errorf("the turn failed: %s", t.Error)
	}
	return nil
}

func printEvent(out io.Writer, e protocol.Event) {
	switch e.Type {
	case protocol.ActionsRequested:
		var d protocol.ActionsRequestedData
		e.Decode(&d)
		for _, a := range d.Actions {
			fmt.Fprintf(out, "→ %s %s\n", a.ToolName, a.Input)
		}
	case protocol.ActionResult:
		var d protocol.ActionResultData
		e.Decode(&d)
		mark := "←"
		if d.Status != protocol.StatusCompleted {
			mark = "✗"
		}
		fmt.Fprintf(out, "%s %s %s\n", mark, d.Result.ToolName, d.Result.Output)
	case protocol.MessageCompleted:
		var d protocol.MessageCompletedData
		e.Decode(&d)
		fmt.Fprintln(out, d.Message)
	case protocol.TurnFailed:
		var d protocol.TurnFailedData
		e.Decode(&d)
		fmt.Fprintf(out, "turn failed (%s): %s\n", d.Code, d.Message)
	case protocol.TurnCancelled:
		fmt.Fprintln(out, "turn cancelled")
	case protocol.InputRequested:
		var d protocol.InputRequestedData
		e.Decode(&d)
		for _, r := range d.Requests {
			printRequest(out, r)
		}
	case protocol.InputResolved:
		var d protocol.InputResolvedData
		e.Decode(&d)
		for _, r := range d.Resolutions {
			fmt.Fprintf(out, "✓ %s %s\n", r.RequestID, r.Outcome)
		}
	case protocol.TurnWaiting:
		var d protocol.TurnWaitingData
		e.Decode(&d)
		fmt.Fprintf(out, "(waiting on %s)\n", d.On)
	}
}

func printRequest(out io.Writer, r protocol.InputRequest) {
	fmt.Fprintf(out, "? %s [%s] %s\n", r.RequestID, r.Kind, r.Prompt)
	for _, o := range r.Options {
		fmt.Fprintf(out, "    %s: %s\n", o.ID, o.Label)
	}
}

func newSessionEventsCommand(f *sessionFlags) *cobra.Command {
	var (
		from   int
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "events <session-id>",
		Short: "Print a session's events as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			st := f.client().Stream(ctx, args[0], from, &client.StreamOptions{NoFollow: !follow})
			defer st.Close()
			for st.Next() {
				if err := enc.Encode(st.Event()); err != nil {
					return err
				}
			}
			if err := st.Err(); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&from, "from", 0, "first event index (negative counts back from the last)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	return cmd
}

func newSessionPendingCommand(f *sessionFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pending <session-id>",
		Short: "List the session's open input requests (approvals and questions)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			open, err := f.client().Pending(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				for _, r := range open {
					enc.Encode(r)
				}
				return nil
			}
			if len(open) == 0 {
				fmt.Fprintln(out, "no open input requests")
				return nil
			}
			for _, r := range open {
				fmt.Fprintf(out, "%s  %s  %s\n", r.TurnID, r.Action.ToolName, r.Action.Input)
				printRequest(out, r.InputRequest)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each request as a JSON line")
	return cmd
}

func newSessionRespondCommand(f *sessionFlags) *cobra.Command {
	var (
		option, text string
		timeout      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "respond <session-id> <request-id> --option ID | --text T",
		Short: "Answer an input request and print the rest of the turn",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (option == "") == (text == "") {
				return errors.New("give exactly one of --option ID or --text T")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c := f.client()
			resp := protocol.InputResponse{RequestID: args[1], OptionID: option, Text: text}
			if text != "" {
				// Map typed text onto the request like eve's channels do: an
				// option id or label, a 1-based number, or free text.
				if open, err := c.Pending(ctx, args[0]); err == nil {
					for _, r := range open {
						if r.RequestID == args[1] {
							if mapped, ok := protocol.ResolveText(r.InputRequest, text); ok {
								resp = mapped
							}
						}
					}
				}
			}
			return f.respondAndPrint(ctx, cmd.OutOrStdout(), c, args[0], resp)
		},
	}
	cmd.Flags().StringVar(&option, "option", "", "the id of the option to choose")
	cmd.Flags().StringVar(&text, "text", "", "a typed answer (an option id, label or number, or free text)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the turn")
	return cmd
}

func (f *sessionFlags) respondAndPrint(ctx context.Context, out io.Writer, c *client.Client, sessionID string, resp protocol.InputResponse) error {
	_, t, err := c.RespondAndWait(ctx, sessionID, []protocol.InputResponse{resp}, func(_ int, e protocol.Event) { printEvent(out, e) })
	if err != nil {
		return refusedError(err)
	}
	return f.turnEnd(out, t)
}

// newSessionDecideCommand is approve (approve=true) or deny.
func newSessionDecideCommand(f *sessionFlags, approve bool) *cobra.Command {
	var (
		reason  string
		timeout time.Duration
	)
	verb, short := "deny", "Deny a tool call waiting for approval"
	if approve {
		verb, short = "approve", "Approve a tool call waiting for approval"
	}
	cmd := &cobra.Command{
		Use:   verb + " <session-id> [request-id]",
		Short: short + " (the only open one when no request id is given)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c := f.client()
			open, err := c.Pending(ctx, args[0])
			if err != nil {
				return err
			}
			var approvals []client.PendingRequest
			for _, r := range open {
				if r.Kind == protocol.KindToolApproval {
					approvals = append(approvals, r)
				}
			}
			var req *client.PendingRequest
			if len(args) == 2 {
				for i := range open {
					if open[i].RequestID == args[1] {
						req = &open[i]
					}
				}
				if req == nil {
					return fmt.Errorf("session %s has no open input request %s (see: %s)", args[0], args[1], f.command("pending "+args[0]))
				}
			} else {
				switch len(approvals) {
				case 0:
					return fmt.Errorf("session %s has no tool call waiting for approval", args[0])
				case 1:
					req = &approvals[0]
				default:
					ids := make([]string, len(approvals))
					for i, r := range approvals {
						ids[i] = r.RequestID + " (" + r.Action.ToolName + ")"
					}
					return fmt.Errorf("session %s has %d approvals open: name one of %s", args[0], len(approvals), strings.Join(ids, ", "))
				}
			}
			resp := protocol.InputResponse{RequestID: req.RequestID, OptionID: decisionOption(req.InputRequest, approve), Text: reason}
			return f.respondAndPrint(ctx, cmd.OutOrStdout(), c, args[0], resp)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (sent as the answer's text)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the turn")
	return cmd
}

// decisionOption picks the option id that approves or denies: "approve",
// and "deny" or eve's "cancel" for a denial, whichever the request offers.
func decisionOption(r protocol.InputRequest, approve bool) string {
	want := []string{"deny", "cancel"}
	if approve {
		want = []string{"approve"}
	}
	for _, w := range want {
		for _, o := range r.Options {
			if strings.EqualFold(o.ID, w) {
				return o.ID
			}
		}
	}
	return want[0]
}

func newSessionCancelCommand(f *sessionFlags) *cobra.Command {
	var turnID string
	cmd := &cobra.Command{
		Use:   "cancel <session-id>",
		Short: "Cancel the session's running turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := f.client().Cancel(cmd.Context(), args[0], turnID)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&turnID, "turn", "", "cancel only this turn (e.g. turn_3)")
	return cmd
}
