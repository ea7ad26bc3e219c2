package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/toolsclient"
)

// toolsFlags reach the tools API of an eve API server.
type toolsFlags struct {
	url     string
	apiKey  string
	userID  string
	timeout time.Duration
}

func (f *toolsFlags) client() *toolsclient.Client {
	return toolsclient.New(f.url, f.apiKey, toolsclient.WithUserID(f.userID))
}

func (f *toolsFlags) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), f.timeout)
}

func newToolsCommand(app App) *cobra.Command {
	var f toolsFlags
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Use the tools API of an eve API server: list, get, search, exec, run, status, cancel",
		Long: `{bin} tools talks to the tools API (/v1/tools, /v1/executions) of an eve API
server ({bin} serve, or the one {bin} dev starts). Every execution is a Temporal
workflow whose id derives from the user, the tool and the idempotency key:
the same --key joins the same execution. See docs/tools-api.md.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", config.Env("EVE_URL", client.DefaultURL), "eve API server base URL (env EVE_URL)")
	pf.StringVar(&f.apiKey, "api-key", config.Env("EVE_API_KEY", ""), "eve API key, sent as a bearer token (env EVE_API_KEY)")
	pf.StringVar(&f.userID, "user", config.Env("EVE_USER_ID", ""), "user the calls act for (env EVE_USER_ID; default: the server's choice)")
	pf.DurationVar(&f.timeout, "request-timeout", 2*time.Minute, "bound on each command's requests")
	cmd.AddCommand(
		newToolsListCommand(&f),
		newToolsGetCommand(&f),
		newToolsSearchCommand(&f),
		newToolsExecCommand(&f),
		newToolsRunCommand(&f),
		newToolsStatusCommand(&f),
		newToolsCancelCommand(&f),
	)
	return cmd
}

func newToolsListCommand(f *toolsFlags) *cobra.Command {
	var (
		toolkits   []string
		capability string
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the catalog's tools: name, capability, behaviour and description",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			res, err := f.client().Tools.Get(ctx, catalog.GetToolsOptions{Toolkits: toolkits, Capability: capability})
			if err != nil {
				return err
			}
			if asJSON {
				return toolsPrintJSON(cmd.OutOrStdout(), res.Raw)
			}
			return toolsPrintTable(cmd.OutOrStdout(), res.Raw)
		},
	}
	cmd.Flags().StringSliceVar(&toolkits, "toolkit", nil, "only these toolkits (repeat or comma-separate)")
	cmd.Flags().StringVar(&capability, "capability", "", "only tools with this capability")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the canonical definitions as JSON")
	return cmd
}

func toolsFlagsOf(a catalog.Annotations) string {
	var fl []string
	for _, x := range []struct {
		on   bool
		name string
	}{{a.ReadOnly, "read-only"}, {a.Destructive, "destructive"}, {a.Idempotent, "idempotent"}, {a.OpenWorld, "open-world"}, {a.Async, "async"}} {
		if x.on {
			fl = append(fl, x.name)
		}
	}
	if len(fl) == 0 {
		return "-"
	}
	return strings.Join(fl, ",")
}

func toolsPrintTable(w io.Writer, defs []catalog.Definition) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCAPABILITY\tBEHAVIOUR\tDESCRIPTION")
	for _, d := range defs {
		desc := strings.Join(strings.Fields(d.Description), " ")
		if len(desc) > 72 {
			desc = desc[:69] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, d.Capability, toolsFlagsOf(d.Annotations), desc)
	}
	return tw.Flush()
}

func newToolsGetCommand(f *toolsFlags) *cobra.Command {
	var (
		opts     catalog.GetToolsOptions
		format   string
		toolkits []string
	)
	cmd := &cobra.Command{
		Use:   "get [tool]",
		Short: "Print tools in a model-facing format with their name map, or one tool's definition",
		Long: `{bin} tools get prints what GET /v1/tools answers: {format, tools, nameMap, raw}
for --format canonical (default), anthropic, openai, ai-sdk or mcp. Hand the
nameMap to executeToolCalls with the tools. With a tool name it prints that
tool's definition, wire name, and whether the tools API can execute it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			c := f.client()
			if len(args) == 1 {
				info, err := c.Tools.Describe(ctx, args[0])
				if err != nil {
					return err
				}
				return toolsPrintJSON(cmd.OutOrStdout(), info)
			}
			opts.Format = catalog.Format(format)
			opts.Toolkits = toolkits
			res, err := c.Tools.Get(ctx, opts)
			if err != nil {
				return err
			}
			return toolsPrintJSON(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().StringVar(&format, "format", "canonical", "canonical, anthropic, openai, ai-sdk or mcp")
	cmd.Flags().StringSliceVar(&toolkits, "toolkit", nil, "only these toolkits (repeat or comma-separate)")
	cmd.Flags().StringVar(&opts.Capability, "capability", "", "only tools with this capability")
	cmd.Flags().BoolVar(&opts.Strict, "strict", false, "openai: apply the strict-mode transform")
	cmd.Flags().BoolVar(&opts.IncludeAsync, "include-async", false, "mcp: include async tools (for clients with Tasks support)")
	cmd.Flags().BoolVar(&opts.MCPWireNames, "mcp-wire-names", false, "mcp: name tools by their wire names")
	return cmd
}

func newToolsSearchCommand(f *toolsFlags) *cobra.Command {
	var (
		opts   catalog.SearchToolsOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "search <query>...",
		Short: "Rank the catalog's tools for a query",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			opts.Query = strings.Join(args, " ")
			res, err := f.client().Tools.Search(ctx, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return toolsPrintJSON(cmd.OutOrStdout(), res)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCORE\tNAME\tDESCRIPTION")
			for i, d := range res.Tools {
				score := 0.0
				if i < len(res.Scores) {
					score = res.Scores[i]
				}
				desc := strings.Join(strings.Fields(d.Description), " ")
				if len(desc) > 72 {
					desc = desc[:69] + "..."
				}
				fmt.Fprintf(tw, "%.2f\t%s\t%s\n", score, d.Name, desc)
			}
			if len(res.Tools) == 0 {
				fmt.Fprintln(tw, "-\t(no tool matches)\t")
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 10, "most results")
	cmd.Flags().StringSliceVar(&opts.Toolkits, "toolkit", nil, "only these toolkits")
	cmd.Flags().StringVar(&opts.Capability, "capability", "", "only tools with this capability")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// toolsInput reads a tool's input: the argument, --input, @file, or - (stdin).
func toolsInput(cmd *cobra.Command, args []string, flag string) (json.RawMessage, error) {
	src := flag
	if len(args) > 1 {
		if src != "" {
			return nil, errors.New("give the input once: as an argument or with --input")
		}
		src = args[1]
	}
	var data []byte
	switch {
	case src == "":
		return json.RawMessage("{}"), nil
	case src == "-":
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("read input from stdin: %w", err)
		}
		data = b
	case strings.HasPrefix(src, "@"):
		b, err := os.ReadFile(src[1:])
		if err != nil {
			return nil, fmt.Errorf("read input: %w", err)
		}
		data = b
	default:
		data = []byte(src)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(data) || data[0] != '{' {
		return nil, fmt.Errorf(`input must be a JSON object, e.g. '{"city":"Paris"}'`)
	}
	return data, nil
}

// toolsErr renders an API error with its violations, one per line.
func toolsErr(err error) error {
	var ae *toolsclient.APIError
	if errors.As(err, &ae) && len(ae.Violations) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "input for %s does not match its schema:", ae.Tool)
		for _, v := range ae.Violations {
			loc := v.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			fmt.Fprintf(&b, "\n  %s: %s", loc, v.Message)
		}
		return errors.New(b.String())
	}
	return err
}

func newToolsExecCommand(f *toolsFlags) *cobra.Command {
	var (
		input, key, connection string
		async, sync            bool
		wait                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "exec <tool> [input-json | @file | -]",
		Short: "Execute a tool (async tools return at once; --key makes it idempotent) and print the execution",
		Long: `{bin} tools exec starts an execution and prints it: {id, tool, status, output, error}.
Tools annotated async (delegated tools) return while queued or running unless
--sync; follow them with {bin} tools status <id>. The same --key (per user and
tool) joins the same execution instead of running the tool again.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := toolsInput(cmd, args, input)
			if err != nil {
				return err
			}
			if async && sync {
				return errors.New("--async and --sync exclude each other")
			}
			opts := toolsclient.ExecuteToolOptions{Input: in, IdempotencyKey: key, ConnectionID: connection, Wait: wait}
			if async {
				opts.Mode = catalog.ModeAsync
			}
			if sync {
				opts.Mode = catalog.ModeSync
			}
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			res, err := f.client().Tools.Execute(ctx, args[0], opts)
			if err != nil {
				return toolsErr(err)
			}
			if err := toolsPrintJSON(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Status.Terminal() && res.Status != catalog.StatusSucceeded {
				return fmt.Errorf("execution %s %s", res.ID, res.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "input as JSON, @file or - for stdin")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: the same key joins the same execution")
	cmd.Flags().StringVar(&connection, "connection", "", "connection id handed to the tool")
	cmd.Flags().BoolVar(&async, "async", false, "return at once, without waiting")
	cmd.Flags().BoolVar(&sync, "sync", false, "wait even for async tools (up to the server's limit)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long a sync execute waits before returning the running execution (0: the server's default)")
	return cmd
}

func newToolsRunCommand(f *toolsFlags) *cobra.Command {
	var (
		input, key, connection string
		timeout                time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run <tool> [input-json | @file | -]",
		Short: "Execute a tool, wait for it and print its output",
		Long: `{bin} tools run executes a tool and prints its output. When the tool takes
longer than --timeout, the command fails with the execution's id: the
execution goes on ({bin} tools status <id>).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := toolsInput(cmd, args, input)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+f.timeout)
			defer cancel()
			out, err := f.client().Tools.Run(ctx, args[0], in, toolsclient.RunToolOptions{IdempotencyKey: key, ConnectionID: connection, Timeout: timeout})
			if err != nil {
				return toolsErr(err)
			}
			var v any
			if json.Unmarshal(out, &v) == nil {
				if s, ok := v.(string); ok {
					_, err := fmt.Fprintln(cmd.OutOrStdout(), s)
					return err
				}
			}
			return toolsPrintJSON(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "input as JSON, @file or - for stdin")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: the same key joins the same execution")
	cmd.Flags().StringVar(&connection, "connection", "", "connection id handed to the tool")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the output")
	return cmd
}

func newToolsStatusCommand(f *toolsFlags) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "status <execution-id>",
		Short: "Print an execution (--wait: once it has ended)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			c := f.client()
			var (
				res catalog.ExecutionResult
				err error
			)
			if wait {
				res, err = c.Executions.Wait(ctx, args[0], 500*time.Millisecond)
			} else {
				res, err = c.Executions.Get(ctx, args[0])
			}
			if err != nil {
				return err
			}
			return toolsPrintJSON(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the execution ends (up to --request-timeout)")
	return cmd
}

func newToolsCancelCommand(f *toolsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel <execution-id>",
		Short: "Cancel an execution and print its state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.ctx(cmd)
			defer cancel()
			res, err := f.client().Executions.Cancel(ctx, args[0])
			if err != nil {
				return err
			}
			return toolsPrintJSON(cmd.OutOrStdout(), res)
		},
	}
}

func toolsPrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
