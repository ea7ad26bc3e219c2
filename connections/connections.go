// Package connections turns remote servers into tools: the tools of an MCP
// server (streamable HTTP or stdio, on the official go-sdk client) and the
// operations of an OpenAPI 3.0/3.1 document. Each remote tool is a tool
// named "<connection>__<tool>" that the agent serves through a
// tools.Resolver: discovery (tools/list, reading the document) runs in the
// resolve activity and its descriptors are recorded in history, and every
// call is an activity with a timeout, the output limit, and retries only
// when the remote side says a repeat is safe. Credentials come from
// Auth.GetToken inside the call's activity and never reach history, events,
// the model or logs. docs/connections.md.
package connections

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/tools"
)

// Connection is one remote server whose tools the agent offers. Set
// exactly one of MCP and OpenAPI.
type Connection struct {
	// Name prefixes every tool ("<Name>__<tool>") and is the tools'
	// toolkit: a lowercase slug such as "linear".
	Name string
	// Description tells the model what the connection is for; it prefixes
	// the description of tools the server leaves undescribed.
	Description string
	MCP         *MCP
	OpenAPI     *OpenAPI
	// Auth supplies a bearer token per call (nil: no auth).
	Auth *Auth
	// Headers are sent on every request (HTTP transports), after Auth's.
	// Keep secrets in Auth: header values are never logged either, but a
	// token from Auth can be refreshed.
	Headers map[string]string
	// InstanceKey is a stable, non-secret identifier of the account or
	// tenant behind the connection (required with Auth in a dynamic set).
	// With the endpoint it is the connection's identity: a call approved
	// for one identity never goes to another.
	InstanceKey string
	// Allow and Block filter the remote tools by their remote name (an
	// operationId for OpenAPI); set at most one.
	Allow, Block []string
	// Approval gates every tool of the connection. Nil: a tool the server
	// marks destructive (MCP destructiveHint, OpenAPI DELETE) asks every
	// time (approval.Always), others are not gated.
	Approval *approval.Policy
	// ToolApproval sets the policy of single tools by remote name; it wins
	// over Approval.
	ToolApproval map[string]approval.Policy
	// Retry says by remote name whether a call may be repeated after a
	// failed or lost attempt, overriding what the server declares (MCP
	// readOnlyHint/idempotentHint; OpenAPI GET, HEAD, PUT, DELETE, OPTIONS).
	Retry map[string]bool
	// Timeout bounds one call (default tools.DefaultTimeout, 60 s).
	Timeout time.Duration
	// TaskTimeout bounds a call that the server runs as a task (MCP
	// Tasks: the tool declares execution.taskSupport): how long the turn
	// waits for the task, across worker restarts (default
	// tools.DefaultDeadline, 24 h).
	TaskTimeout time.Duration
	// MaxOutputBytes bounds one call's result as JSON (default
	// tools.DefaultMaxOutputBytes).
	MaxOutputBytes int
}

// MCP is an MCP server: URL for streamable HTTP, or Command for stdio.
type MCP struct {
	// URL of the streamable HTTP endpoint: https, or http on a loopback
	// host. A new MCP session serves each discovery and each call, so a
	// call carries the token of its own caller.
	URL string
	// Command and Args start a stdio server: a process serves one call at
	// a time (so the server's questions reach that call's person), more
	// start as concurrent calls need them (up to MaxStdioProcesses per
	// worker), and they are kept for later calls until Set.Close. Env is added to the worker's
	// environment; Dir is the working directory. A static set's command
	// also runs where its tools are listed without a session: every API
	// server and eve mcp start it to list its tools, so their hosts need
	// its runtime too (Node.js for an npx server, ...).
	Command string
	Args    []string
	Env     []string
	Dir     string
}

// Owner says whose credential a connection uses.
type Owner string

const (
	// OwnerApp: one credential for every session (GetToken gets a nil principal).
	OwnerApp Owner = "app"
	// OwnerUser: the credential of the session's current caller, who must
	// be a user principal (else the call fails with principal_required).
	OwnerUser Owner = "user"
)

// Auth brokers a connection's credential.
type Auth struct {
	// Owner is OwnerApp (the default) or OwnerUser.
	Owner Owner
	// GetToken returns the bearer token for a principal (nil for an app
	// credential). It runs in the call's activity, before each call whose
	// cached token is missing or within TokenRefreshMargin of ExpiresAt,
	// and again once when the server answers 401.
	GetToken func(ctx context.Context, principal *auth.Principal) (Token, error)
}

// Token is a bearer token.
type Token struct {
	Value string
	// ExpiresAt, when set, has the token refreshed TokenRefreshMargin ahead.
	ExpiresAt time.Time
}

// TokenRefreshMargin is how long before ExpiresAt a token is refreshed.
const TokenRefreshMargin = 30 * time.Second

// ReasonPrincipalRequired is the reason of a PrincipalRequiredError.
const ReasonPrincipalRequired = "principal_required"

// PrincipalRequiredError is a call to a user-scoped connection in a
// session whose caller is not a user.
type PrincipalRequiredError struct{ Connection string }

func (e *PrincipalRequiredError) Error() string {
	return fmt.Sprintf("%s: connection %q uses the caller's own credential (Auth.Owner %q), and this session's caller is not a user principal: authenticate the session as a user, or make the connection app-scoped",
		ReasonPrincipalRequired, e.Connection, OwnerUser)
}

// namePattern is a connection name: a catalog toolkit slug.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$`)

// Validate checks a connection's definition.
func (c *Connection) Validate() error {
	var errs []error
	if !namePattern.MatchString(c.Name) || len(c.Name) > 32 || strings.Contains(c.Name, "__") {
		errs = append(errs, fmt.Errorf("name %q must be a lowercase slug such as \"linear\" (letters and digits, words joined by single _ or -, at most 32)", c.Name))
	}
	switch {
	case (c.MCP == nil) == (c.OpenAPI == nil):
		errs = append(errs, errors.New("set exactly one of MCP and OpenAPI"))
	case c.MCP != nil:
		if (c.MCP.URL == "") == (c.MCP.Command == "") {
			errs = append(errs, errors.New("MCP: set exactly one of URL (streamable HTTP) and Command (stdio)"))
		} else if c.MCP.URL != "" {
			if err := checkURL(c.MCP.URL); err != nil {
				errs = append(errs, fmt.Errorf("MCP URL: %w", err))
			}
		}
	case c.OpenAPI != nil:
		if len(c.OpenAPI.Document) == 0 {
			errs = append(errs, errors.New("OpenAPI: Document is required (the OpenAPI 3.x document, JSON or YAML)"))
		}
		if c.OpenAPI.BaseURL != "" {
			if err := checkURL(c.OpenAPI.BaseURL); err != nil {
				errs = append(errs, fmt.Errorf("OpenAPI BaseURL: %w", err))
			}
		}
	}
	if len(c.Allow) > 0 && len(c.Block) > 0 {
		errs = append(errs, errors.New("set at most one of Allow and Block"))
	}
	if c.Auth != nil {
		if c.Auth.GetToken == nil {
			errs = append(errs, errors.New("Auth.GetToken is required"))
		}
		if c.Auth.Owner != "" && c.Auth.Owner != OwnerApp && c.Auth.Owner != OwnerUser {
			errs = append(errs, fmt.Errorf("Auth.Owner %q: want %q or %q", c.Auth.Owner, OwnerApp, OwnerUser))
		}
		if c.MCP != nil && c.MCP.Command != "" {
			errs = append(errs, errors.New("Auth needs an HTTP transport: a stdio server gets its credentials from MCP.Env"))
		}
	}
	if c.Timeout < 0 || c.TaskTimeout < 0 || c.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("Timeout, TaskTimeout and MaxOutputBytes must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("connection %q: %w", c.Name, err)
	}
	return nil
}

// checkURL requires https, or http on a loopback host: requests carry
// the connection's credentials.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("%q: use https (plain http only for a loopback host such as localhost)", raw)
	}
	return fmt.Errorf("%q: want an https URL", raw)
}

// endpoint is where the connection's calls go.
func (c *Connection) endpoint() string {
	switch {
	case c.MCP != nil && c.MCP.URL != "":
		return "mcp+" + c.MCP.URL
	case c.MCP != nil:
		return "mcp+stdio:" + strings.Join(append([]string{c.MCP.Command}, c.MCP.Args...), " ")
	default:
		return "openapi+" + c.OpenAPI.BaseURL + "#" + digest(string(c.OpenAPI.Document))
	}
}

// identity is the connection's identity as recorded in history: a digest,
// so that no endpoint (which may hold a secret in its query) is recorded.
func (c *Connection) identity() string {
	return "sha256:" + digest(c.Name + "\x00" + c.endpoint() + "\x00" + c.InstanceKey)[:32]
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (c *Connection) allowed(remote string) bool {
	if len(c.Allow) > 0 {
		return contains(c.Allow, remote)
	}
	return !contains(c.Block, remote)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// principal is whose credential a call uses: nil for an app credential.
func (c *Connection) principal(s auth.Session) (*auth.Principal, error) {
	if c.Auth == nil || c.Auth.Owner != OwnerUser {
		return nil, nil
	}
	if p := s.Auth.Current; p != nil && p.Type == auth.TypeUser && p.ID != "" {
		return p, nil
	}
	return nil, &PrincipalRequiredError{Connection: c.Name}
}

// Set serves the tools of a set of connections to an agent: add
// Resolver() to agent.Agent.Resolvers. Close ends its stdio servers: the
// commands eve.Main runs call it (through the resolver's Close) when
// they stop; a process built on eve.NewWorker or eve.NewHandler calls it
// once they have stopped.
type Set struct {
	// Logger gets the set's warnings, such as a remote tool skipped
	// because no valid tool comes of it (default slog.Default()). No
	// credential is ever logged.
	Logger *slog.Logger
	// SearchAbove: a set that offers more tools than this shows the model
	// two tools instead of every descriptor, "<set>__search" (the catalog's
	// search over the tools) and "<set>__call" (call one by name), as
	// eve's eve__search and eve__tool do. 0 means DefaultSearchAbove (40);
	// negative, never. The set's name is "connections" for Static.
	SearchAbove int

	name    string
	scope   tools.Scope
	resolve func(ctx tools.ResolveContext) ([]*Connection, error)
	dynamic bool
	rt      *runtime
}

// Static serves fixed connections. Their tools are discovered once per
// session (in the resolve activity, recorded in history).
func Static(conns ...*Connection) (*Set, error) {
	if err := validateAll(conns, false); err != nil {
		return nil, err
	}
	return &Set{name: "connections", scope: tools.ScopeSession, rt: newRuntime(),
		resolve: func(tools.ResolveContext) ([]*Connection, error) { return conns, nil }}, nil
}

// Dynamic serves connections that depend on the session, such as one set
// per tenant or user: resolve runs at scope (tools.ScopeSession or
// tools.ScopeTurn) with the session's auth. Like any resolver it must
// answer the same for the same context: a worker that runs a call, or an
// approval resumed days later, calls it again, and a connection whose
// identity (endpoint, InstanceKey) changed in between fails the call.
func Dynamic(name string, scope tools.Scope, resolve func(ctx tools.ResolveContext) ([]*Connection, error)) *Set {
	return &Set{name: name, scope: scope, resolve: resolve, dynamic: true, rt: newRuntime()}
}

func validateAll(conns []*Connection, dynamic bool) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range conns {
		if c == nil {
			errs = append(errs, errors.New("nil connection"))
			continue
		}
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("two connections named %q: names must be unique", c.Name))
		}
		seen[c.Name] = true
		if dynamic && c.Auth != nil && c.InstanceKey == "" {
			errs = append(errs, fmt.Errorf("connection %q: a dynamic connection with Auth needs an InstanceKey (a stable, non-secret account or tenant id)", c.Name))
		}
	}
	return errors.Join(errs...)
}

// Resolver is the set as a tools.Resolver.
func (s *Set) Resolver() tools.Resolver {
	r := tools.Resolver{Name: s.name, Scope: s.scope, Close: s.Close, Resolve: func(ctx tools.ResolveContext) ([]*tools.Tool, error) {
		conns, out, err := s.discoverAll(ctx)
		if err != nil {
			return nil, err
		}
		limit := s.SearchAbove
		if limit == 0 {
			limit = DefaultSearchAbove
		}
		if limit > 0 && len(out) > limit {
			return s.searchTools(conns, out)
		}
		return out, nil
	}}
	// The tools API lists every tool (never the search pair) and runs
	// them: static connections are the same for every caller, dynamic ones
	// are listed for each caller.
	if s.dynamic {
		r.CallerCatalog = func(ctx tools.ResolveContext) ([]*tools.Tool, error) {
			_, out, err := s.discoverAll(ctx)
			return out, err
		}
	} else {
		r.Catalog = func(ctx context.Context) ([]*tools.Tool, error) {
			_, out, err := s.discoverAll(tools.ResolveContext{Context: ctx})
			return out, err
		}
	}
	return r
}

// discoverAll resolves the set's connections and discovers their tools.
func (s *Set) discoverAll(ctx tools.ResolveContext) ([]*Connection, []*tools.Tool, error) {
	conns, err := s.resolve(ctx)
	if err != nil {
		return nil, nil, err
	}
	if s.dynamic {
		if err := validateAll(conns, true); err != nil {
			return nil, nil, err
		}
	}
	var out []*tools.Tool
	for _, c := range conns {
		ts, err := s.rt.discover(ctx, c, s.logger())
		if err != nil {
			return nil, nil, fmt.Errorf("connection %q: discover its tools: %w", c.Name, err)
		}
		out = append(out, ts...)
	}
	return conns, out, nil
}

func (s *Set) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Close ends the set's stdio servers. The set stays usable: a later call
// starts a server again. Its Resolver's Close is this, so the commands
// eve.Main runs close the set when they stop.
func (s *Set) Close() error { return s.rt.close() }

// runtime is what a set keeps on a worker: tokens and stdio sessions.
type runtime struct {
	tokens tokenCache
	mu     sync.Mutex
	stdio  map[string]*stdioPool // by identity
	// plain are the HTTP servers that answered a 2025-11-25 session and
	// not the 2026-07-28 tasks extension, by identity: until when
	// discovery skips asking them again (mcp.go).
	plain map[string]time.Time
}

func newRuntime() *runtime {
	return &runtime{stdio: map[string]*stdioPool{}, plain: map[string]time.Time{}}
}

func (r *runtime) discover(ctx tools.ResolveContext, c *Connection, log *slog.Logger) ([]*tools.Tool, error) {
	if c.MCP != nil {
		return r.discoverMCP(ctx, c, log)
	}
	return discoverOpenAPI(c, r)
}

func (r *runtime) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for k, sp := range r.stdio {
		errs = append(errs, sp.close())
		delete(r.stdio, k)
	}
	return errors.Join(errs...)
}

// toolName maps a remote name to "<connection>__<tool>": characters the
// model's tool names do not allow become "_". ok is false when no valid
// name comes of it (too long, or nothing left).
func toolName(conn, remote string) (string, bool) {
	var b strings.Builder
	last := byte('_')
	for i := 0; i < len(remote); i++ {
		ch := remote[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case ch == '-' || ch == '_':
			if last == '_' || last == '-' {
				continue
			}
		default:
			if last == '_' || last == '-' {
				continue
			}
			ch = '_'
		}
		b.WriteByte(ch)
		last = ch
	}
	name := strings.TrimRight(b.String(), "_-")
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
		name = "t_" + name
		name = strings.TrimRight(name, "_-")
	}
	full := conn + "__" + name
	return full, len(full) <= 64 && tools.NamePattern.MatchString(full)
}

// policy is the approval policy of one tool.
func (c *Connection) policy(remote string, destructive bool) approval.Policy {
	if p, ok := c.ToolApproval[remote]; ok {
		return p
	}
	if c.Approval != nil {
		return *c.Approval
	}
	if destructive {
		return approval.Always()
	}
	return approval.Never()
}

// idempotent says whether calls of a remote tool may be repeated.
func (c *Connection) idempotent(remote string, declared bool) bool {
	if v, ok := c.Retry[remote]; ok {
		return v
	}
	return declared
}

func (c *Connection) describe(remote, desc string) string {
	if strings.TrimSpace(desc) != "" {
		return desc
	}
	if c.Description != "" {
		return fmt.Sprintf("%s (connection %s: %s)", remote, c.Name, c.Description)
	}
	return fmt.Sprintf("%s of connection %s", remote, c.Name)
}

// remoteError is an error the remote side answered: the model reads it,
// and a repeat would get the same answer.
func remoteError(format string, args ...any) error {
	return tools.NonRetryable(fmt.Errorf(format, args...))
}
