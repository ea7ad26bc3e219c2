package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Default bounds of one `eve action` command (see --timeout).
const (
	defaultTokenTimeout = 10 * time.Second
	defaultURLTimeout   = time.Minute // room for the helper's retries
)

// actionFlags select the action to settle: a completion URL, or a raw
// Temporal task token plus the flags to reach Temporal.
type actionFlags struct {
	url       string
	taskToken string
	timeout   time.Duration
	tc        config.Temporal
}

func newActionCommand(app App) *cobra.Command {
	f := &actionFlags{}
	cmd := &cobra.Command{
		Use:   "action",
		Short: "Settle a delegated tool call from the shell: complete, fail, heartbeat",
		Long: `{bin} action settles a delegated tool's action, the way an external job does.

Name the action by exactly one of:
  --url <completion url>   the action's completion URL (action.Completion.URL),
                           or $EVE_ACTION_URL. Its capability is sent in an
                           Authorization header and never printed in errors.
                           Needs no other credential; network errors and 5xx
                           are retried; 409/410/422 are reported with the
                           server's code and message.
  --task-token <base64>    the raw Temporal task token (action.TaskToken),
                           completed with a Temporal client (--address,
                           --namespace, TLS and API-key flags, or TEMPORAL_*).
                           The output is not checked against the tool's output
                           schema until the turn sees it.

Results are printed as JSON on stdout; errors go to stderr with exit code 1.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "the action's completion URL (or env EVE_ACTION_URL, which keeps it out of the process list)")
	pf.StringVar(&f.taskToken, "task-token", "", "the action's raw Temporal task token, base64")
	pf.DurationVar(&f.timeout, "timeout", 0, fmt.Sprintf("how long to wait for an answer (default %s with --task-token, %s with --url)", defaultTokenTimeout, defaultURLTimeout))
	f.tc.Bind(pf, app.TaskQueue)
	_ = pf.MarkHidden("task-queue") // a task token names its own activity
	cmd.AddCommand(newActionCompleteCommand(f), newActionFailCommand(f), newActionHeartbeatCommand(f))
	return cmd
}

func newActionCompleteCommand(f *actionFlags) *cobra.Command {
	var output, outputFile string
	cmd := &cobra.Command{
		Use:   "complete (--url URL | --task-token TOKEN) (--output JSON | --output-file FILE)",
		Short: "Complete the action with an output (JSON, checked against the tool's output schema)",
		Example: `  {bin} action complete --url "$URL" --output '{"status":"succeeded","detail":"42 rows"}'
  {bin} action complete --url "$URL" --output-file result.json
  generate-report | {bin} action complete --task-token "$TOKEN" --output -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := readActionOutput(cmd, output, outputFile)
			if err != nil {
				return err
			}
			t, err := f.target()
			if err != nil {
				return err
			}
			reply, err := f.settle(cmd, t, out, nil)
			if err != nil {
				return err
			}
			return printActionJSON(cmd.OutOrStdout(), reply)
		},
	}
	cmd.Flags().StringVar(&output, "output", "", `the output as JSON, or "-" to read it from stdin`)
	cmd.Flags().StringVar(&outputFile, "output-file", "", `a file holding the output as JSON, or "-" for stdin`)
	return cmd
}

func newActionFailCommand(f *actionFlags) *cobra.Command {
	var code, message string
	cmd := &cobra.Command{
		Use:     "fail (--url URL | --task-token TOKEN) --message MESSAGE [--code CODE]",
		Short:   "Fail the action; the model sees the message",
		Example: `  {bin} action fail --url "$URL" --code REPORT_FAILED --message "the warehouse is down"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(message) == "" {
				return errors.New("fail needs --message: the model sees it as the tool's error")
			}
			if code == "" {
				return errors.New("--code is empty: leave it out for " + protocol.CodeToolExecution)
			}
			t, err := f.target()
			if err != nil {
				return err
			}
			reply, err := f.settle(cmd, t, nil, &protocol.ActionError{Code: code, Message: message})
			if err != nil {
				return err
			}
			return printActionJSON(cmd.OutOrStdout(), reply)
		},
	}
	cmd.Flags().StringVar(&code, "code", protocol.CodeToolExecution, "error code the turn records")
	cmd.Flags().StringVar(&message, "message", "", "error message the model sees (required)")
	return cmd
}

func newActionHeartbeatCommand(f *actionFlags) *cobra.Command {
	var details string
	cmd := &cobra.Command{
		Use:   "heartbeat (--url URL | --task-token TOKEN) [--details JSON]",
		Short: `Keep the action's job alive; prints {"cancelRequested": bool} (stop the job when true)`,
		Example: `  {bin} action heartbeat --url "$URL" --details '{"progress": 40}'
  {bin} action heartbeat --url "$URL" | jq -e '.cancelRequested' && exit 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw json.RawMessage
			if details != "" {
				v, err := parseActionJSON("--details", []byte(details))
				if err != nil {
					return err
				}
				raw = v
			}
			t, err := f.target()
			if err != nil {
				return err
			}
			cancelRequested, err := f.heartbeat(cmd, t, raw)
			if err != nil {
				return err
			}
			return printActionJSON(cmd.OutOrStdout(), actionHeartbeatReply{CancelRequested: cancelRequested})
		},
	}
	cmd.Flags().StringVar(&details, "details", "", "progress details as JSON (recorded with the heartbeat)")
	return cmd
}

// actionSettleReply is what complete and fail print.
type actionSettleReply struct {
	OK        bool   `json:"ok"`
	ActionID  string `json:"actionId,omitempty"`
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

type actionHeartbeatReply struct {
	CancelRequested bool `json:"cancelRequested"`
}

// actionTarget is the action named on the command line.
type actionTarget struct {
	completion tools.Completion // --url
	token      []byte           // --task-token
	ref        taskTokenRef     // decoded from the task token
}

func (f *actionFlags) target() (actionTarget, error) {
	if strings.TrimSpace(f.url) == "" && strings.TrimSpace(f.taskToken) == "" {
		f.url = os.Getenv("EVE_ACTION_URL")
	}
	hasURL, hasToken := strings.TrimSpace(f.url) != "", strings.TrimSpace(f.taskToken) != ""
	switch {
	case hasURL && hasToken:
		return actionTarget{}, errors.New("give either --url or --task-token, not both")
	case !hasURL && !hasToken:
		return actionTarget{}, errors.New("name the action with --url <completion url> or --task-token <base64 task token>")
	case f.timeout < 0:
		return actionTarget{}, fmt.Errorf("--timeout %s is negative", f.timeout)
	case hasURL:
		u := strings.TrimSpace(f.url)
		id, err := checkCompletionURL(u)
		if err != nil {
			return actionTarget{}, err
		}
		return actionTarget{completion: tools.Completion{ID: id, URL: u}}, nil
	}
	tok, err := decodeTaskToken(strings.TrimSpace(f.taskToken))
	if err != nil {
		return actionTarget{}, fmt.Errorf("--task-token is not valid base64: %v", err)
	}
	ref, err := parseTaskToken(tok)
	if err != nil {
		return actionTarget{}, fmt.Errorf("--task-token is not a Temporal activity task token: %v", err)
	}
	return actionTarget{token: tok, ref: ref}, nil
}

func (f *actionFlags) timeoutFor(t actionTarget) time.Duration {
	switch {
	case f.timeout > 0:
		return f.timeout
	case t.token != nil:
		return defaultTokenTimeout
	}
	return defaultURLTimeout
}

// settle completes (err == nil) or fails the action.
func (f *actionFlags) settle(cmd *cobra.Command, t actionTarget, output json.RawMessage, fail *protocol.ActionError) (actionSettleReply, error) {
	status := protocol.StatusCompleted
	if fail != nil {
		status = protocol.StatusFailed
	}
	if t.token == nil {
		ctx, cancel := context.WithTimeout(cmd.Context(), f.timeoutFor(t))
		defer cancel()
		var err error
		if fail != nil {
			err = actions.Fail(ctx, t.completion, fail.Code, fail.Message)
		} else {
			err = actions.Complete(ctx, t.completion, output)
		}
		if err != nil {
			return actionSettleReply{}, completionURLError(err, f.timeoutFor(t))
		}
		return actionSettleReply{OK: true, ActionID: t.completion.ID, Status: status}, nil
	}

	c, err := f.client(cmd)
	if err != nil {
		return actionSettleReply{}, err
	}
	defer c.Close()
	result := signals.ActionResult{Kind: signals.ResultKind, Status: status, Output: output, Error: fail}
	d := f.timeoutFor(t)
	ctx, cancel := context.WithTimeout(cmd.Context(), d)
	defer cancel()
	err = c.CompleteActivity(ctx, t.token, result, nil)
	if err == nil {
		id, _ := t.ref.actionID()
		return actionSettleReply{OK: true, ActionID: id, Status: status}, nil
	}
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		return actionSettleReply{}, taskTokenError(ctx, err, d)
	}
	// The activity is no longer pending: tell a repeat of the same
	// completion (fine) from a different one or an action that ended.
	st, qerr := f.actionState(cmd.Context(), c, t.ref)
	if qerr != nil {
		return actionSettleReply{}, fmt.Errorf("the action is no longer pending (it already settled, or its turn ended), and its state could not be read: %v", actionErrLine(qerr))
	}
	if err := st.LateSettle(signals.SettleAction{ActionID: st.ActionID, Output: output, Error: fail}); err != nil {
		var se *signals.SettleError
		if errors.As(err, &se) {
			if _, code, ok := signals.SettleHTTP(se.Type); ok {
				return actionSettleReply{}, fmt.Errorf("%s: %s", code, se.Message)
			}
		}
		return actionSettleReply{}, err
	}
	return actionSettleReply{OK: true, ActionID: st.ActionID, Status: status, Duplicate: true}, nil
}

func (f *actionFlags) heartbeat(cmd *cobra.Command, t actionTarget, details json.RawMessage) (bool, error) {
	d := f.timeoutFor(t)
	if t.token == nil {
		ctx, cancel := context.WithTimeout(cmd.Context(), d)
		defer cancel()
		var v any
		if details != nil {
			v = details
		}
		cancelRequested, err := actions.Heartbeat(ctx, t.completion, v)
		if err != nil {
			return false, completionURLError(err, d)
		}
		return cancelRequested, nil
	}
	c, err := f.client(cmd)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), d)
	defer cancel()
	var args []any
	if details != nil {
		args = append(args, details)
	}
	err = c.RecordActivityHeartbeat(ctx, t.token, args...)
	var canceled *temporal.CanceledError
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &canceled):
		return true, nil
	case errors.Is(err, activity.ErrActivityPaused):
		return false, nil // paused, not cancelled: keep the job, it may resume
	case errors.Is(err, activity.ErrActivityReset):
		return true, nil // the attempt this token names is over
	case errors.As(err, &nf):
		// The turn ended: a cancelled action still says "stop", like the URL does.
		if st, qerr := f.actionState(cmd.Context(), c, t.ref); qerr == nil && st.State == signals.ActionCancelled {
			return true, nil
		} else if qerr == nil {
			return false, fmt.Errorf("action_ended: action %s has ended (%s)", st.ActionID, st.State)
		}
		return false, fmt.Errorf("action_ended: the action is no longer pending (its turn ended): %v", actionErrLine(err))
	}
	return false, taskTokenError(ctx, err, d)
}

// actionState asks the action's turn how it settled.
func (f *actionFlags) actionState(ctx context.Context, c client.Client, ref taskTokenRef) (signals.ActionState, error) {
	var st signals.ActionState
	actionID, ok := ref.actionID()
	if !ok {
		return st, errors.New("the task token names no eve delegated call")
	}
	// A closed turn is queried by replay on a worker: bound it separately.
	qd := 5 * time.Second
	if f.timeout > 0 && f.timeout < qd {
		qd = f.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, qd)
	defer cancel()
	v, err := query.Value(ctx, c, ref.workflowID, ref.runID, signals.QueryAction, actionID)
	if err != nil {
		return st, err
	}
	err = v.Get(&st)
	return st, err
}

func (f *actionFlags) client(cmd *cobra.Command) (client.Client, error) {
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	return f.tc.Dial(cmd.Context(), logger, nil)
}

// taskTokenError explains a failed task-token call.
func taskTokenError(ctx context.Context, err error, d time.Duration) error {
	var ia *serviceerror.InvalidArgument
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("Temporal did not answer within %s (--timeout): a stale or malformed task token can make the server wait until it times out; check the token (and --namespace), or settle by --url", d)
	case errors.As(err, &ia):
		return fmt.Errorf("Temporal rejected the task token: %s (check --namespace and that the token is for this cluster)", ia.Message)
	}
	return fmt.Errorf("settle by task token: %v", actionErrLine(err))
}

// completionURLError explains what the completion endpoint answered.
func completionURLError(err error, d time.Duration) error {
	var se *actions.StatusError
	if errors.As(err, &se) {
		hint := ""
		switch se.Status {
		case http.StatusUnprocessableEntity:
			hint = " (the action stays pending: fix the output and complete again)"
		}
		code := se.Code
		if code == "" {
			code = strings.ToLower(strings.ReplaceAll(http.StatusText(se.Status), " ", "_"))
		}
		return fmt.Errorf("%d %s: %s%s", se.Status, code, se.Message, hint)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer from the completion URL within %s (--timeout): %v", d, err)
	}
	return err
}

// readActionOutput reads --output or --output-file.
func readActionOutput(cmd *cobra.Command, output, file string) (json.RawMessage, error) {
	var (
		raw  []byte
		name string
		err  error
	)
	switch {
	case output != "" && file != "":
		return nil, errors.New("give either --output or --output-file, not both")
	case output == "" && file == "":
		return nil, errors.New(`complete needs the output: --output '{"...": ...}', --output-file result.json, or --output - to read stdin`)
	case output == "-" || file == "-":
		name = "the output on stdin"
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 8<<20))
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
	case file != "":
		name = "--output-file " + file
		raw, err = os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--output-file: %w", err)
		}
	default:
		name = "--output"
		raw = []byte(output)
	}
	return parseActionJSON(name, raw)
}

// parseActionJSON checks raw is one JSON value.
func parseActionJSON(name string, raw []byte) (json.RawMessage, error) {
	if strings.TrimSpace(string(raw)) == "" {
		return nil, fmt.Errorf("%s is empty: want JSON", name)
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s is not valid JSON: more than one value", name)
	}
	return json.RawMessage(strings.TrimSpace(string(raw))), nil
}

func printActionJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// showURL is a --url for error messages: never its capability, nor any
// path that might hold one.
func showURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	if r := actions.RedactURL(raw); strings.Contains(r, "…") {
		return r
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// checkCompletionURL checks the URL's shape and reads the action id from
// its (unverified) capability claims, for the report.
func checkCompletionURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %s is not an http(s) URL: want the action's completion URL (…%s<token>)", showURL(raw), signals.ActionsPath)
	}
	_, token, ok := strings.Cut(u.Path, signals.ActionsPath)
	if !ok || token == "" || strings.Contains(token, "/") {
		if strings.HasSuffix(token, "/heartbeat") {
			return "", fmt.Errorf("--url: give the completion URL itself, without /heartbeat")
		}
		return "", fmt.Errorf("--url %s is not a completion URL: want …%s<token>", showURL(raw), signals.ActionsPath)
	}
	return capability.PeekActionID(token), nil
}

func decodeTaskToken(s string) ([]byte, error) {
	var first error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err == nil && len(b) > 0 {
			return b, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("empty")
	}
	return nil, first
}

// taskTokenRef is what an activity task token names. Temporal's task token is
// the protobuf temporal.server.api.token.v1.Task; its field numbers are
// part of the wire format (old tokens must keep decoding), so reading
// workflow_id (2), run_id (3) and activity_id (6) is stable.
type taskTokenRef struct {
	workflowID, runID, activityID string
}

// actionID is the eve action the token's activity runs (a tool call's).
func (r taskTokenRef) actionID() (string, bool) {
	return signals.ActionIDOfActivity(r.workflowID, r.activityID)
}

func parseTaskToken(b []byte) (taskTokenRef, error) {
	var r taskTokenRef
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == 2 || num == 3 || num == 6) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return r, protowire.ParseError(n)
			}
			switch num {
			case 2:
				r.workflowID = string(v)
			case 3:
				r.runID = string(v)
			case 6:
				r.activityID = string(v)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return r, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if r.workflowID == "" || r.activityID == "" {
		return r, errors.New("it names no workflow and activity")
	}
	return r, nil
}

// actionErrLine keeps the first line of an error.
func actionErrLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
