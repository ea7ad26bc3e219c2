package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/tools"
)

// clientInfo is how eve introduces itself to MCP servers.
var clientInfo = &mcp.Implementation{Name: "eve-temporal", Version: "0.3.0"}

// mcpSession opens a streamable HTTP MCP session for one call, with p's
// credential; release ends it.
func (r *runtime) mcpSession(ctx context.Context, c *Connection, p *auth.Principal, opts *mcp.ClientOptions) (cs *mcp.ClientSession, release func(), err error) {
	t := &mcp.StreamableClientTransport{Endpoint: c.MCP.URL, HTTPClient: r.httpClient(c, p), DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err = mcp.NewClient(clientInfo, opts).Connect(ctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the MCP server: %w", err)
	}
	return cs, func() { _ = cs.Close() }, nil
}

func (r *runtime) discoverMCP(ctx tools.ResolveContext, c *Connection, log *slog.Logger) ([]*tools.Tool, error) {
	// Discovery uses the caller's credential when there is one; without a
	// user principal a user-scoped server is listed anonymously, and its
	// calls fail with principal_required.
	p, perr := c.principal(ctx.Session)
	conn := c
	if perr != nil {
		anon := *c
		anon.Auth = nil
		conn = &anon
	}
	var listed []listedTool
	var err error
	if conn.MCP.URL != "" {
		listed, err = r.listHTTP(ctx, conn, p)
		if err != nil {
			// A server that refuses a 2025-11-25 session (one that speaks
			// only a later revision) is listed by the go-sdk client, which
			// negotiates; its tools then run without tasks.
			if l, gerr := r.listGoSDK(ctx, conn, p); gerr == nil {
				listed, err = l, nil
			}
		}
	} else {
		listed, err = r.listStdio(ctx, conn)
	}
	if err != nil && perr != nil {
		// A server that lists nothing anonymously offers this session
		// nothing; a user's session gets its tools.
		log.Warn("connection not listed: it needs a user principal", "connection", c.Name, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*tools.Tool
	for _, lt := range listed {
		if !c.allowed(lt.Name) {
			continue
		}
		t, err := c.mcpTool(r, lt)
		if err != nil {
			// One tool the model cannot be shown does not hide the others.
			log.Warn("connection tool skipped", "connection", c.Name, "tool", lt.Name, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// listedTool is a remote tool as tools/list describes it, and whether
// eve calls it as a task (the server runs tasks of tools/call, and the
// tool declares execution.taskSupport "optional" or "required").
type listedTool struct {
	*mcp.Tool
	task bool
	// modern: its tasks are the 2026-07-28 extension's.
	modern bool
}

// listHTTP lists a streamable HTTP server's tools with the raw client,
// which sees what the go-sdk's Tool has no field for: taskSupport. A
// server that offers the 2026-07-28 tasks extension is listed (and its
// tasks run) statelessly; any other in a 2025-11-25 session.
func (r *runtime) listHTTP(ctx context.Context, c *Connection, p *auth.Principal) ([]listedTool, error) {
	key := c.identity()
	r.mu.Lock()
	askModern := time.Now().After(r.plain[key])
	r.mu.Unlock()
	if askModern {
		modern := r.rpc(nil, c, p)
		modern.modern = true
		if res, err := modern.call(ctx, "server/discover", map[string]any{}); err == nil && offersTasksExtension(res) {
			if listed, err := modern.listTools(ctx, true); err == nil {
				return listed, nil
			}
		}
	}
	rc := r.rpc(nil, c, p)
	raw, err := rc.initialize(ctx, clientCapabilities())
	if err != nil {
		return nil, fmt.Errorf("connect to the MCP server: %w", err)
	}
	if askModern {
		// It answers 2025-11-25, not the extension: not asked again for a
		// while (a session's discovery should not pay a refused request).
		r.mu.Lock()
		r.plain[key] = time.Now().Add(plainRecheck)
		r.mu.Unlock()
	}
	defer rc.close(context.WithoutCancel(ctx))
	return rc.listTools(ctx, runsToolTasks(raw))
}

// plainRecheck is how long a server that refused the 2026-07-28 tasks
// extension is listed without asking it again.
const plainRecheck = 10 * time.Minute

// offersTasksExtension reads a server/discover result.
func offersTasksExtension(raw json.RawMessage) bool {
	var d struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	return json.Unmarshal(raw, &d) == nil && d.Capabilities.Extensions[tasksExtension] != nil
}

// listTools pages through tools/list; tasks says the server runs tasks.
func (rc *rpcClient) listTools(ctx context.Context, tasks bool) ([]listedTool, error) {
	var out []listedTool
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == maxListPages {
			return nil, fmt.Errorf("tools/list: more than %d pages", maxListPages)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := rc.call(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, b := range page.Tools {
			var t mcp.Tool
			var ex struct {
				Execution struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			}
			if err := json.Unmarshal(b, &t); err != nil {
				return nil, fmt.Errorf("tools/list: a tool that is not a Tool: %w", err)
			}
			_ = json.Unmarshal(b, &ex)
			ts := ex.Execution.TaskSupport
			task := tasks && (ts == taskOptional || ts == taskRequired)
			out = append(out, listedTool{Tool: &t, task: task, modern: task && rc.modern})
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// maxListPages bounds tools/list paging (a server that pages forever).
const maxListPages = 100

// listStdio lists a stdio server's tools on a process of its pool.
func (r *runtime) listStdio(ctx context.Context, c *Connection) ([]listedTool, error) {
	proc, release, err := r.stdioSession(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	listed, err := listSession(ctx, proc.cs)
	for i := range listed {
		listed[i].task = proc.mux.runsTask(listed[i].Name)
	}
	return listed, err
}

// listGoSDK lists a streamable HTTP server's tools with the go-sdk client.
func (r *runtime) listGoSDK(ctx context.Context, c *Connection, p *auth.Principal) ([]listedTool, error) {
	cs, release, err := r.mcpSession(ctx, c, p, &mcp.ClientOptions{Capabilities: callCapabilities(), ElicitationHandler: declineElicitation})
	if err != nil {
		return nil, err
	}
	defer release()
	return listSession(ctx, cs)
}

func listSession(ctx context.Context, cs *mcp.ClientSession) ([]listedTool, error) {
	var out []listedTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, listedTool{Tool: t})
	}
	return out, nil
}

func (c *Connection) mcpTool(r *runtime, lt listedTool) (*tools.Tool, error) {
	rt := lt.Tool
	name, ok := toolName(c.Name, rt.Name)
	if !ok {
		return nil, fmt.Errorf("no valid tool name comes of %q (at most 64 characters with the prefix %s__)", rt.Name, c.Name)
	}
	in, err := inputSchema(rt.InputSchema)
	if err != nil {
		return nil, err
	}
	var ann tools.Annotations
	if a := rt.Annotations; a != nil {
		ann.ReadOnly = a.ReadOnlyHint
		// MCP: destructiveHint defaults to true, and means something only
		// for a tool that is not read-only.
		ann.Destructive = !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
		ann.Idempotent = a.IdempotentHint
		ann.OpenWorld = a.OpenWorldHint == nil || *a.OpenWorldHint
	}
	remote := rt.Name
	title := rt.Title
	if title == "" && rt.Annotations != nil {
		title = rt.Annotations.Title
	}
	t := &tools.Tool{
		Name:           name,
		Description:    c.describe(remote, rt.Description),
		InputSchema:    in,
		Title:          title,
		Timeout:        c.Timeout,
		MaxOutputBytes: c.MaxOutputBytes,
		Idempotent:     c.idempotent(remote, ann.ReadOnly || ann.Idempotent),
		Approval:       c.policy(remote, ann.Destructive),
		Toolkit:        c.Name,
		Annotations:    ann,
		Remote:         &tools.Remote{Connection: c.Name, Tool: remote, Identity: c.identity()},
	}
	t.Execute = func(ctx *tools.Context, input json.RawMessage) (any, error) {
		return r.callMCP(ctx, c, remote, input)
	}
	if lt.task {
		// The call waits for the server's task, across worker restarts
		// (mcptask.go): as long as TaskTimeout, alive by heartbeats.
		t.Timeout = c.TaskTimeout
		if t.Timeout == 0 {
			t.Timeout = tools.DefaultDeadline
		}
		t.HeartbeatTimeout = TaskHeartbeatTimeout
		retry := taskRetry
		t.Retry = &retry
		idempotent, modern := t.Idempotent, lt.modern
		t.Execute = func(ctx *tools.Context, input json.RawMessage) (any, error) {
			return r.callMCPTask(ctx, c, remote, idempotent, modern, input)
		}
	}
	return t, nil
}

func (r *runtime) callMCP(ctx *tools.Context, c *Connection, remote string, input json.RawMessage) (any, error) {
	p, err := c.principal(ctx.Session)
	if err != nil {
		return nil, tools.NonRetryable(err)
	}
	var cs *mcp.ClientSession
	var release func()
	if c.MCP.URL != "" {
		// Progress from a long tool keeps the call's activity alive; an
		// elicitation asks the session's person.
		cs, release, err = r.mcpSession(ctx, c, p, &mcp.ClientOptions{
			Capabilities:                callCapabilities(),
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { ctx.Heartbeat() },
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return elicit(ctx, c, req)
			},
		})
	} else {
		// A process of its own for the call, so that the server's
		// requests reach this call's person (stdio.go).
		var proc *stdioProc
		proc, release, err = r.stdioSession(ctx, c, ctx)
		if err == nil {
			cs = proc.cs
		}
	}
	if err != nil {
		return nil, err
	}
	defer release()
	params := &mcp.CallToolParams{Name: remote, Arguments: input}
	params.SetProgressToken(ctx.IdempotencyKey)
	res, err := cs.CallTool(ctx, params)
	for round := 0; err != nil && round < maxURLRounds; round++ {
		// The server needs the person to open a page first (-32042):
		// ask them, then call again.
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != codeURLElicitationRequired {
			break
		}
		if err = elicitRequired(ctx, c, we); err != nil {
			return nil, err
		}
		res, err = cs.CallTool(ctx, params)
	}
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", remote, err)
	}
	if res.IsError {
		return nil, remoteError("the server answered with an error: %s", textOf(res.Content))
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode the result of %s: %w", remote, err)
	}
	return json.RawMessage(b), nil
}

func textOf(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	s := strings.Join(parts, "\n")
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	if s == "" {
		s = "(no text)"
	}
	return s
}

// inputSchema is a remote input schema as the model and eve's validator
// take it: an object at the root, without a "$schema" of another draft
// (the remaining keywords of draft-07 schemas mean the same in 2020-12).
func inputSchema(raw any) (json.RawMessage, error) {
	var m map[string]any
	switch v := raw.(type) {
	case nil:
		m = map[string]any{}
	case map[string]any:
		m = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("input schema is not an object: %w", err)
		}
	}
	cp := make(map[string]any, len(m)+1)
	for k, v := range m {
		cp[k] = v
	}
	delete(cp, "$schema")
	if cp["type"] == nil {
		cp["type"] = "object"
	}
	if cp["type"] != "object" {
		return nil, fmt.Errorf("input schema type %v: tool input must be an object", cp["type"])
	}
	return json.Marshal(cp)
}
