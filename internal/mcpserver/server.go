// Package mcpserver serves an agent's tool catalog over the Model Context
// Protocol with the official Go SDK (github.com/modelcontextprotocol/go-sdk),
// on stdio and on streamable HTTP. tools/call runs through the same
// execution workflows as the tools API (internal/toolsapi), so an MCP call
// is durable (retried only if the tool is idempotent) and visible by
// execution id like any other.
//
// Async tools (delegated tools: their result arrives later) are offered
// only to clients that negotiate MCP Tasks, with execution.taskSupport
// "required", and hidden from the others. The Go SDK does not implement
// Tasks (2025-11-25) yet, so this package adds them beside it: task-augmented
// tools/call, tasks/get, tasks/result, tasks/list and tasks/cancel are
// answered at the transport, each task being an execution (task id =
// execution id), and the tasks capability is added to the server's
// initialize (and server/discover) result. See docs/tools-api.md.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/signals"
)

// TasksExtension is the extension key under which a client may also
// announce Tasks support (clients whose SDK cannot send capabilities.tasks,
// like the Go SDK's, can use capabilities.experimental.tasks or this).
const TasksExtension = "io.modelcontextprotocol/tasks"

// Defaults of Options.
const (
	DefaultCallTimeout    = 10 * time.Minute
	DefaultTaskTTL        = 24 * time.Hour
	DefaultPollInterval   = time.Second
	DefaultSessionTimeout = 30 * time.Minute
)

// Options configures a Server.
type Options struct {
	// Tools is the catalog and executor (required).
	Tools *toolsapi.Service
	// Name and Version identify the server (default "eve", signals.Version).
	Name    string
	Version string
	// UserID is the user tool calls run for (default: the service's
	// default user). UserFromHeader, when set, decides it per HTTP request
	// instead (an error refuses the call).
	UserID         string
	UserFromHeader func(h http.Header) (string, error)
	// WireNames names tools by their provider-safe wire names
	// ("demo_get_weather") instead of canonical names ("demo.get_weather"),
	// for hosts that hold MCP tool names to ^[a-zA-Z0-9_-]{1,64}$.
	WireNames bool
	// BareNames names tools by the agent's own tool names ("get_weather"),
	// unique within one agent, for hosts and test suites that expect the
	// names a tool was defined with. It wins over WireNames.
	BareNames bool
	// CallTimeout bounds how long a plain tools/call waits for its
	// execution (default 10 min); after it the call answers an error naming
	// the execution, which goes on.
	CallTimeout time.Duration
	// TaskTTL and PollInterval are what tasks advertise (defaults 24 h, 1 s).
	TaskTTL      time.Duration
	PollInterval time.Duration
	// TaskTools names tools (by MCP name) that run as tasks for clients
	// that negotiate Tasks: "optional" (a client without Tasks gets a plain
	// call) or "required" (it gets MissingRequiredClientCapability). Async
	// tools are always "required".
	TaskTools map[string]string
	// SessionTimeout closes streamable HTTP sessions idle this long
	// (default 30 min; negative: never), forgetting their tasks (the
	// executions go on). A client whose session expired gets 404 and
	// starts a new one.
	SessionTimeout time.Duration
	// TrustedOrigins are browser origins ("https://app.example.com") whose
	// cross-origin requests the HTTP handler accepts; by default a
	// browser's cross-origin request is refused (403).
	TrustedOrigins []string
	// StateKey signs the requestState of client input rounds
	// (tools.Tool.ClientInput); instances that continue each other's
	// rounds need the same key (EVE_MCP_STATE_KEY). Default: a random key
	// of this process.
	StateKey []byte
	// Bus, when set, carries the execution workflows' state changes
	// (EVE_NOTIFY, as session streams use it): tasks created on stdio get
	// notifications/tasks/status as their status changes. Without it
	// clients poll tasks/get.
	Bus    notify.Bus
	Logger *slog.Logger
}

// Server is an MCP server over a toolsapi.Service.
type Server struct {
	opts    Options
	svc     *toolsapi.Service
	log     *slog.Logger
	srv     *mcp.Server
	entries map[string]*entry // by MCP tool name
}

// entry is one tool as MCP clients see it.
type entry struct {
	canonical string
	async     bool
	// asks: its approval policy asks a person (see callAsking, tasksExt).
	asks bool
	// clientInput: it may ask the MCP client for input (callRound).
	clientInput bool
	// taskSupport is "required" (async tools, and TaskTools so marked),
	// "optional", or "" (never a task).
	taskSupport string
	desc        json.RawMessage // the catalog's MCP descriptor
}

// New builds the server: every tool the tools API can execute is listed
// (client tools, which a person answers inside a session, and tools whose
// approval policy always asks are left out).
func New(opts Options) (*Server, error) {
	if opts.Tools == nil {
		return nil, errors.New("mcpserver: Options.Tools is required")
	}
	if opts.Name == "" {
		opts.Name = "eve"
	}
	if opts.Version == "" {
		opts.Version = signals.Version
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.TaskTTL <= 0 {
		opts.TaskTTL = DefaultTaskTTL
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if len(opts.StateKey) == 0 {
		opts.StateKey = newStateKey()
	}
	s := &Server{opts: opts, svc: opts.Tools, log: opts.Logger, entries: map[string]*entry{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Title: "eve tools", Version: opts.Version}, &mcp.ServerOptions{
		Logger:       s.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: map[string]any{TasksExtension: map[string]any{}}},
		Instructions: "Tools of an eve agent. Every call runs as a durable execution; async tools are offered to clients that support MCP Tasks.",
	})
	res, err := s.svc.Get(catalog.GetToolsOptions{Format: catalog.FormatMCP, IncludeAsync: true, MCPWireNames: opts.WireNames})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	for i, t := range res.MCP() {
		def := res.Raw[i]
		// Tools whose approval policy asks a person are offered too: as
		// tasks they wait for the caller's answer (input_required); a plain
		// call is refused, saying why.
		asks := false
		if s.svc.Executable(def.Name) != nil {
			if s.svc.ExecutableAsking(def.Name) != nil {
				continue
			}
			asks = true
		}
		if opts.BareNames {
			if rt, ok := s.svc.Tool(def.Name); ok {
				t.Name = rt.Name
			}
		}
		support := opts.TaskTools[t.Name]
		if asks && support == "" {
			support = "optional"
		}
		switch {
		case def.Annotations.Async:
			support = "required"
		case support == "", support == "optional", support == "required":
		default:
			return nil, fmt.Errorf("mcpserver: task tool %s: task support %q: want optional or required", t.Name, support)
		}
		desc, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		if support != "" && !def.Annotations.Async {
			if desc, err = withTaskSupport(desc, support); err != nil {
				return nil, err
			}
		}
		s.entries[t.Name] = &entry{canonical: def.Name, async: def.Annotations.Async, asks: asks, clientInput: s.svc.ClientInput(def.Name), taskSupport: support, desc: desc}
		tool := &mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{
				ReadOnlyHint:    t.Annotations.ReadOnlyHint,
				DestructiveHint: &t.Annotations.DestructiveHint,
				IdempotentHint:  t.Annotations.IdempotentHint,
				OpenWorldHint:   &t.Annotations.OpenWorldHint,
			},
		}
		if len(t.OutputSchema) > 0 {
			tool.OutputSchema = t.OutputSchema
		}
		s.srv.AddTool(tool, s.callTool)
	}
	for name := range opts.TaskTools {
		if s.entries[name] == nil {
			return nil, fmt.Errorf("mcpserver: task tool %q: no tool of this server has that MCP name", name)
		}
	}
	s.srv.AddReceivingMiddleware(s.listMiddleware)
	return s, nil
}

// withTaskSupport sets a tool descriptor's execution.taskSupport.
func withTaskSupport(desc json.RawMessage, support string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(desc, &m); err != nil {
		return nil, err
	}
	m["execution"] = map[string]any{"taskSupport": support}
	return json.Marshal(m)
}

// MCP returns the underlying SDK server (without the Tasks layer: serve it
// through Serve or HTTPHandler to keep Tasks).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Tools lists the MCP names of the tools served.
func (s *Server) Tools() []string {
	out := make([]string, 0, len(s.entries))
	for n := range s.entries {
		out = append(out, n)
	}
	return out
}

// listMiddleware shows async tools only to sessions that negotiated
// Tasks, and gives every tool the catalog's descriptor (which states all
// four hints and, for async tools, execution.taskSupport).
func (s *Server) listMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if unoffered[method] {
			// The SDK answers these with empty lists even when the server
			// declares no prompts or resources; a tools server has none.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not offered: this server serves tools only (its capabilities declare tools)", method)}
		}
		if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil && s.entries[cr.Params.Name] == nil {
			// A tool listed for this caller only (callers.go); the SDK
			// answers the names nobody's catalog has.
			if user, err := s.requestUser(cr.Extra); err == nil {
				if e := s.callerEntries(user).byName[cr.Params.Name]; e != nil {
					return s.callOwn(ctx, e, user, cr)
				}
			}
		}
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" {
			return res, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok {
			return res, nil
		}
		l := &toolList{ListToolsResult: lr, s: s, tasks: tasksNegotiated(req)}
		if lr.NextCursor == "" {
			// The caller's own tools come on the last page.
			if user, err := s.requestUser(req.GetExtra()); err == nil {
				l.own = s.callerEntries(user).list
			}
		}
		return l, nil
	}
}

// unoffered are the methods of features the server does not declare.
var unoffered = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true,
}

// toolList is tools/list's answer, encoded with the catalog's descriptors.
type toolList struct {
	*mcp.ListToolsResult
	s     *Server
	tasks bool
	own   []*entry // the caller's own tools
}

func (l *toolList) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	tools := make([]json.RawMessage, 0, len(l.Tools))
	var taskOnly []json.RawMessage
	for _, t := range l.Tools {
		e := l.s.entries[t.Name]
		if e == nil || (e.async && !l.tasks) {
			continue
		}
		if e.taskSupport == "required" {
			// Listed last: a client that probes the first tool gets one it
			// can call without Tasks.
			taskOnly = append(taskOnly, e.desc)
			continue
		}
		tools = append(tools, e.desc)
	}
	for _, e := range l.own {
		tools = append(tools, e.desc)
	}
	tools = append(tools, taskOnly...)
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// tasksNegotiated reports whether the client announced Tasks support: in
// the session's initialize (capabilities.tasks is carried over into
// experimental by the transport layer) or in the request's own
// capabilities (protocol 2026-07-28).
func tasksNegotiated(req mcp.Request) bool {
	if lr, ok := req.(*mcp.ListToolsRequest); ok {
		if lr.Params != nil {
			if caps, ok := lr.Params.Meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any); ok && capsHaveTasks(caps) {
				return true
			}
		}
		if c := lr.ClientCapabilities(); c != nil && (c.Experimental["tasks"] != nil || c.Extensions[TasksExtension] != nil) {
			return true
		}
	}
	return false
}

// capsHaveTasks checks a raw client capabilities object.
func capsHaveTasks(caps map[string]any) bool {
	if caps["tasks"] != nil {
		return true
	}
	if ex, ok := caps["experimental"].(map[string]any); ok && ex["tasks"] != nil {
		return true
	}
	if ext, ok := caps["extensions"].(map[string]any); ok && ext[TasksExtension] != nil {
		return true
	}
	return false
}

// user is who a request's calls run for: the subject of its verified
// OAuth token (OAuth), else UserFromHeader's answer, else Options.UserID.
func (s *Server) user(h http.Header, ti *auth.TokenInfo) (string, error) {
	if ti != nil && ti.UserID != "" {
		return ti.UserID, nil
	}
	if s.opts.UserFromHeader != nil && h != nil {
		u, err := s.opts.UserFromHeader(h)
		if err != nil {
			return "", err
		}
		if u != "" {
			return u, nil
		}
	}
	return s.opts.UserID, nil
}

// callTool runs a plain (not task-augmented) tools/call: it waits for the
// execution up to CallTimeout.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e := s.entries[req.Params.Name]
	if e == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", req.Params.Name)}
	}
	user, err := s.requestUser(req.Extra)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	return s.callEntry(ctx, e, user, req)
}

// requestUser is user for a request's HTTP header and token (none on stdio).
func (s *Server) requestUser(x *mcp.RequestExtra) (string, error) {
	if x == nil {
		return s.user(nil, nil)
	}
	return s.user(x.Header, x.TokenInfo)
}

// callEntry runs a plain tools/call of e for user.
func (s *Server) callEntry(ctx context.Context, e *entry, user string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if e.async {
		// taskSupport "required": a call without a task is refused (MCP
		// 2025-11-25 asks for -32601); clients without Tasks never see it.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %s is asynchronous: call it as a task (MCP Tasks), which this client did not negotiate", req.Params.Name)}
	}
	if e.asks && multiRoundTrip(req) {
		return s.callAsking(ctx, e, user, req)
	}
	if e.clientInput {
		return s.callRound(ctx, e, user, req)
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil && !e.asks {
		return s.callWithProgress(ctx, e, user, req, tok)
	}
	res, err := s.svc.RunResult(ctx, e.canonical, req.Params.Arguments, toolsapi.RunOptions{UserID: user, Timeout: s.opts.CallTimeout})
	return callResult(res, err)
}

// callResult turns an execution (or why it did not run) into a tool
// result: refusals the model can fix (bad input) and failed executions are
// isError results; server trouble is a protocol error.
func callResult(res catalog.ExecutionResult, err error) (*mcp.CallToolResult, error) {
	var (
		apiErr *toolsapi.Error
		rt     *toolsapi.RunTimeoutError
		failed *toolsapi.ExecutionFailedError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.Status < 500:
		msg := apiErr.Code + ": " + apiErr.Message
		if len(apiErr.Violations) > 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: input for %s does not match its schema:", apiErr.Code, apiErr.Tool)
			for _, v := range apiErr.Violations {
				loc := v.InstanceLocation
				if loc == "" {
					loc = "/"
				}
				fmt.Fprintf(&b, "\n- %s: %s", loc, v.Message)
			}
			msg = b.String()
		}
		return errorResult(msg), nil
	case errors.As(err, &rt):
		return errorResult(rt.Error()), nil
	case errors.As(err, &failed):
		res = failed.Result
	case err != nil:
		return nil, err
	}
	if res.Status != catalog.StatusSucceeded {
		msg := fmt.Sprintf("tool %s %s", res.Tool, res.Status)
		if res.Error != nil {
			msg = res.Error.Error()
		}
		return errorResult(msg), nil
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: outputText(res.Output)}}}
	if t := strings.TrimSpace(string(res.Output)); strings.HasPrefix(t, "{") {
		out.StructuredContent = json.RawMessage(t)
	}
	return out, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// outputText is the text the model reads: a JSON string's text, else the
// compact JSON.
func outputText(out json.RawMessage) string {
	t := strings.TrimSpace(string(out))
	if t == "" {
		return "null"
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal([]byte(t), &s) == nil {
			return s
		}
	}
	return t
}
