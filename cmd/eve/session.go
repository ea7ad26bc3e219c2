package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

func newSessionCommand() *cobra.Command {
	var tc config.Temporal
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Send messages to sessions and read their events",
	}
	tc.Bind(cmd.PersistentFlags())
	connect := func(ctx context.Context) (*sessions.Service, func(), error) {
		c, err := tc.Dial(ctx, nil, nil)
		if err != nil {
			return nil, nil, err
		}
		return &sessions.Service{Client: c, TaskQueue: tc.TaskQueue}, c.Close, nil
	}
	cmd.AddCommand(newSessionSendCommand(connect), newSessionEventsCommand(connect))
	return cmd
}

type connectFunc func(ctx context.Context) (*sessions.Service, func(), error)

func newSessionSendCommand(connect connectFunc) *cobra.Command {
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
			svc, closeFn, err := connect(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			return sendAndPrint(ctx, cmd.OutOrStdout(), svc, sessionID, args[0])
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session id (default: start a new session)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the turn")
	return cmd
}

func sendAndPrint(ctx context.Context, out io.Writer, svc *sessions.Service, sessionID, message string) error {
	req := signals.SendRequest{Message: message, DeliveryID: sessions.NewID("dlv")}
	var (
		res signals.SendResult
		err error
	)
	if sessionID == "" {
		res, err = svc.CreateAndSend(ctx, "", nil, req)
	} else {
		res, err = svc.Send(ctx, sessionID, req)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "session %s  %s\n", res.SessionID, res.TurnID)
	seen := false
	return svc.Follow(ctx, res.SessionID, 0, 25*time.Millisecond, func(_ int, e protocol.Event) bool {
		mine := slices.Contains(e.Meta.DeliveryIDs, res.DeliveryID)
		if mine {
			seen = true
			printEvent(out, e)
		}
		// The turn ends at the session.waiting after our events, or when
		// it parks for input.
		if seen && e.Type == protocol.SessionWaiting {
			return false
		}
		if mine && e.Type == protocol.TurnWaiting {
			return false
		}
		return true
	})
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
	case protocol.InputRequested:
		var d protocol.InputRequestedData
		e.Decode(&d)
		for _, r := range d.Requests {
			fmt.Fprintf(out, "? %s [%s] %s\n", r.RequestID, r.Kind, r.Prompt)
			for _, o := range r.Options {
				fmt.Fprintf(out, "    %s: %s\n", o.ID, o.Label)
			}
		}
	case protocol.TurnWaiting:
		var d protocol.TurnWaitingData
		e.Decode(&d)
		fmt.Fprintf(out, "(waiting on %s)\n", d.On)
	}
}

func newSessionEventsCommand(connect connectFunc) *cobra.Command {
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
			svc, closeFn, err := connect(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			enc := json.NewEncoder(cmd.OutOrStdout())
			if !follow {
				evs, err := svc.Events(ctx, args[0], from)
				if err != nil {
					return err
				}
				for _, e := range evs {
					enc.Encode(e)
				}
				return nil
			}
			err = svc.Follow(ctx, args[0], from, 50*time.Millisecond, func(_ int, e protocol.Event) bool {
				enc.Encode(e)
				return true
			})
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().IntVar(&from, "from", 0, "first event index")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	return cmd
}
