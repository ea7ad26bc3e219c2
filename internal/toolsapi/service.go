// Package toolsapi is eve's tools API (the executor): the catalog of an
// agent's tools, served in the five model-facing formats and searchable,
// and tool executions outside a session, each a Temporal workflow
// (signals.ExecutionWorkflow) whose ID derives from the caller's user, the
// tool and an idempotency key, so a retried call joins the first execution.
//
// Service implements catalog.Executor and catalog.ExecutionWaiter; Handler
// serves it over HTTP (docs/tools-api.md).
package toolsapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/executions"
	"github.com/eve-temporal/eve/internal/toolcatalog"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Defaults of Options.
const (
	DefaultTaskQueue   = "eve"
	DefaultUserID      = "anonymous"
	DefaultSyncWait    = 60 * time.Second
	DefaultRunTimeout  = 60 * time.Second
	DefaultMaxWait     = 10 * time.Minute
	DefaultCancelWait  = 5 * time.Second
	DefaultMaxBodySize = 4 << 20
	// DefaultMaxToolCalls bounds the calls of one executeToolCalls request:
	// each starts an execution, and they all start at once.
	DefaultMaxToolCalls = 32
	// DefaultMaxCallers bounds the callers' catalogs kept (Options.MaxCallers).
	DefaultMaxCallers = 256
)

// ExecutionIDPrefix starts every execution id.
const ExecutionIDPrefix = signals.ExecutionIDPrefix

// Options configures a Service.
type Options struct {
	// Client runs executions. Without one the service serves the catalog
	// only, and executions fail with 503.
	Client client.Client
	// TaskQueue of the workers that serve the agent (default "eve").
	TaskQueue string
	// Agent supplies the tools: agent.Tools, its registry plus the
	// built-ins it keeps (ask_question unless disabled), exactly what its
	// turns see. Tools adds more (or replaces Agent); they are registered
	// after the agent's, under the same rules.
	Agent *agent.Agent
	Tools []*tools.Tool
	// Toolkit is the toolkit slug of the tools that set no Toolkit of their
	// own, the part before the dot of each canonical name (default: the
	// agent's name as a slug, or "tools"). Each tool's capability, version
	// and annotations are its own (tools.Tool.Definition).
	Toolkit string
	// Extra adds definitions for discovery only (get, search): executing
	// one that no tool backs fails with not_executable.
	Extra []catalog.Definition
	// SkipApprovals runs tools whose approval policy would ask a person.
	// By default a tool with an always/once policy is refused (403
	// approval_required) and a custom policy is evaluated: skip or approve
	// runs; deny or ask refuses, since no session can ask anyone.
	SkipApprovals bool
	// Caller returns the authenticated principal of an HTTP request (the
	// API server's api.Caller). Executions are then scoped to principals,
	// id and type alike (see Owner): a request acts for itself or for a
	// user its keys-file grant names, and reads or cancels only the
	// executions of principals it may act for. Nil: no authentication; a
	// request acts for the user it names (or DefaultUser) and every
	// execution is visible.
	Caller func(ctx context.Context) *auth.Principal
	// DefaultUser is the user of calls that name none (default "anonymous").
	DefaultUser string
	// SyncWait bounds how long a sync execute waits before answering with
	// the running execution (default 60 s).
	SyncWait time.Duration
	// RunTimeout is run's wait when the call sets none (default 60 s);
	// MaxWait caps any wait a caller asks for (default 10 min).
	RunTimeout time.Duration
	MaxWait    time.Duration
	// CancelWait is how long cancel waits for the execution to end before
	// answering (default 5 s).
	CancelWait time.Duration
	// MaxBodyBytes bounds HTTP request bodies (default 4 MiB).
	MaxBodyBytes int64
	// MaxToolCalls bounds the calls of one executeToolCalls HTTP request
	// (default DefaultMaxToolCalls; negative: no bound); a request with
	// more is refused with 400 too_many_calls before any starts.
	MaxToolCalls int
	// MaxCallers bounds the callers whose own catalogs are kept: the tools
	// of resolvers listed per caller (dynamic connections, see
	// tools.Resolver.CallerCatalog), each listed again after ListedTTL.
	// The least recently seen caller goes first (default
	// DefaultMaxCallers); one that comes back is listed again. A caller
	// with tools of its own keeps a catalog extending the shared one, of
	// about its size (bench/toolsbench: 8 MB over 10,000 shared tools);
	// one without shares the shared catalog.
	MaxCallers int
	Logger     *slog.Logger
}

// Service is the tools API over one agent's tools. It is safe for
// concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	reg     *tools.Registry
	toolkit string
	driver  *executions.Driver
	// base is the catalog of the agent's own tools; listed are the
	// resolvers whose tools it lists too (tools.Resolver.Catalog).
	base      catalogView
	listed    []tools.Resolver
	mu        sync.Mutex
	view      *catalogView // base plus the listed resolvers' tools, when read
	relisting bool         // a goroutine lists them again
	// perCaller are the resolvers listed for each caller
	// (tools.Resolver.CallerCatalog); callers keeps their listings.
	perCaller []tools.Resolver
	callers   callerCache
	now       func() time.Time // the callers' listings' clock (tests move it)
}

// catalogView is a catalog and the runtime tools behind its names.
type catalogView struct {
	cat    *catalog.Catalog
	byName map[string]*tools.Tool // canonical name -> tool
	tools  []*tools.Tool          // what it was built of, in order
	stale  time.Time              // when to list the resolvers again
	// A caller's view (callerView) holds its own tools in byName and
	// their toolkits, sorted, in own; base (the shared view) holds the rest.
	base *catalogView
	own  []string
}

// tool is the runtime tool behind a canonical name.
func (v *catalogView) tool(name string) (*tools.Tool, bool) {
	if t, ok := v.byName[name]; ok {
		return t, true
	}
	if v.base != nil {
		return v.base.tool(name)
	}
	return nil, false
}

// New builds the catalog from the agent's tools (the registry's catalog
// view, tools.Registry.Catalog) and returns the service. Registration has
// checked every tool against the catalog's rules, so every tool the agent
// serves to its turns is in the catalog; an invalid Toolkit or Extra
// definition, or tools whose canonical names clash, is an error.
func New(opts Options) (*Service, error) {
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	if opts.DefaultUser == "" {
		opts.DefaultUser = DefaultUserID
	}
	if opts.SyncWait <= 0 {
		opts.SyncWait = DefaultSyncWait
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = DefaultRunTimeout
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = DefaultCancelWait
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodySize
	}
	if opts.MaxToolCalls == 0 {
		opts.MaxToolCalls = DefaultMaxToolCalls
	}
	if opts.MaxCallers <= 0 {
		opts.MaxCallers = DefaultMaxCallers
	}
	s := &Service{opts: opts, log: opts.Logger, callers: callerCache{limit: opts.MaxCallers}, now: time.Now}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.driver = &executions.Driver{Client: opts.Client, TaskQueue: opts.TaskQueue, Logger: s.log}
	all, err := agent.Tools(opts.Agent)
	if err != nil {
		return nil, fmt.Errorf("toolsapi: %w", err)
	}
	// A subagent's tool is not listed: its calls are child sessions of a
	// session's turn (docs/subagents.md), which the tools API has none of.
	reg := tools.NewRegistry()
	for _, t := range all.List() {
		if t.Kind() != tools.KindAgent {
			if err := reg.Register(t); err != nil {
				return nil, fmt.Errorf("toolsapi: %w", err)
			}
		}
	}
	if err := reg.Register(opts.Tools...); err != nil {
		return nil, fmt.Errorf("toolsapi: %w", err)
	}
	s.reg = reg
	s.toolkit = opts.Toolkit
	if s.toolkit == "" {
		name := ""
		if opts.Agent != nil {
			name = opts.Agent.Name
		}
		s.toolkit = ToolkitSlug(name)
	}
	if !catalog.ToolkitPattern.MatchString(s.toolkit) {
		return nil, fmt.Errorf("toolsapi: toolkit %q must match %s", s.toolkit, catalog.ToolkitPattern)
	}
	if s.base, err = s.build(reg.List()); err != nil {
		return nil, fmt.Errorf("toolsapi: %w", err)
	}
	if opts.Agent != nil {
		for _, r := range opts.Agent.Resolvers {
			if r.Catalog != nil {
				s.listed = append(s.listed, r)
			}
			if r.CallerCatalog != nil {
				s.perCaller = append(s.perCaller, r)
			}
		}
	}
	return s, nil
}

// build makes the catalog of ts (and Options.Extra).
func (s *Service) build(ts []*tools.Tool) (catalogView, error) {
	v := catalogView{byName: map[string]*tools.Tool{}, tools: ts}
	defs := make([]catalog.Definition, 0, len(ts)+len(s.opts.Extra))
	for _, t := range ts {
		d := toolcatalog.Definition(t, s.toolkit)
		defs = append(defs, d)
		v.byName[d.Name] = t
	}
	var err error
	v.cat, err = catalog.New(append(defs, s.opts.Extra...)...)
	return v, err
}

// Listed resolvers are listed again after ListedTTL (a remote server's
// tools change rarely), and retried after listedRetry when listing failed.
const (
	ListedTTL     = 5 * time.Minute
	listedRetry   = 30 * time.Second
	listedTimeout = 15 * time.Second
)

// current is the catalog in force: the agent's tools, and those of the
// listed resolvers (static connections). The first read lists them; once
// a view is older than ListedTTL, reads go on with it while one goroutine
// lists again, so no request waits on a remote server after the first. A
// resolver that cannot list leaves the last good view (or the agent's
// tools alone), logged, and is asked again after 30 s.
func (s *Service) current() *catalogView {
	if len(s.listed) == 0 {
		return &s.base
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.view == nil:
		s.view = s.list(s.view)
	case time.Now().After(s.view.stale) && !s.relisting:
		s.relisting = true
		prev := s.view
		go func() {
			v := s.list(prev)
			s.mu.Lock()
			s.view, s.relisting = v, false
			s.mu.Unlock()
		}()
	}
	return s.view
}

// list lists the resolvers' tools into a new view; on failure it keeps
// prev (or the agent's tools alone) and retries sooner.
func (s *Service) list(prev *catalogView) *catalogView {
	ctx, cancel := context.WithTimeout(context.Background(), listedTimeout)
	defer cancel()
	ts := s.reg.List()
	var failed error
	for _, r := range s.listed {
		rts, err := r.Catalog(ctx)
		if err == nil {
			err = tools.Compile(rts...)
		}
		if err != nil {
			failed = fmt.Errorf("resolver %q: %w", r.Name, err)
			break
		}
		ts = append(ts, rts...)
	}
	var v catalogView
	if failed == nil {
		v, failed = s.build(ts)
	}
	if failed != nil {
		s.log.Warn("toolsapi: the connections' tools could not be listed; the catalog keeps what it listed before (at first, the agent's own tools)", "err", failed, "retryIn", listedRetry)
		keep := s.base
		if prev != nil {
			keep = *prev
		}
		keep.stale = time.Now().Add(listedRetry)
		return &keep
	}
	v.stale = time.Now().Add(ListedTTL)
	return &v
}

var slugJunk = regexp.MustCompile(`[^a-z0-9]+`)

// ToolkitSlug turns an agent name into a toolkit slug: lowercase words
// joined by "_", starting with a letter, at most 32 bytes ("tools" when
// nothing is left).
func ToolkitSlug(name string) string {
	s := strings.Trim(slugJunk.ReplaceAllString(strings.ToLower(name), "_"), "_")
	s = strings.TrimLeft(s, "0123456789_")
	if len(s) > catalog.MaxToolkitLen {
		s = strings.TrimRight(s[:catalog.MaxToolkitLen], "_")
	}
	if s == "" {
		return "tools"
	}
	return s
}

// Catalog returns the service's shared catalog: the tools every caller
// sees (the agent's, and those of resolvers listed for all, such as static
// connections). Tools listed per caller are in GetFor's answers only.
func (s *Service) Catalog() *catalog.Catalog { return s.current().cat }

// Toolkit returns the agent's toolkit slug.
func (s *Service) Toolkit() string { return s.toolkit }

// Registry returns the tools the service runs: the agent's (agent.Tools)
// and Options.Tools.
func (s *Service) Registry() *tools.Registry { return s.reg }

// Tool returns the runtime tool behind a canonical name of the shared
// catalog, if any.
func (s *Service) Tool(name string) (*tools.Tool, bool) {
	return s.current().tool(name)
}

// ToolFor is Tool in the catalog of caller (see GetFor).
func (s *Service) ToolFor(caller auth.Principal, name string) (*tools.Tool, bool) {
	return s.viewFor(caller).tool(name)
}

// OwnToolkits lists the toolkits of the tools caller's catalog holds
// beyond the shared one (see GetFor), sorted.
func (s *Service) OwnToolkits(caller auth.Principal) []string {
	return s.viewFor(caller).own
}

// Get selects and shapes the shared catalog's tools (the reference's
// get); opts.UserID is not read (GetFor lists a caller's catalog).
func (s *Service) Get(opts catalog.GetToolsOptions) (catalog.GetToolsResult, error) {
	return s.current().get(opts)
}

// GetFor is Get over the catalog caller sees: the shared tools and those
// the resolvers listed per caller (dynamic connections) list for it.
func (s *Service) GetFor(caller auth.Principal, opts catalog.GetToolsOptions) (catalog.GetToolsResult, error) {
	return s.viewFor(caller).get(opts)
}

func (v *catalogView) get(opts catalog.GetToolsOptions) (catalog.GetToolsResult, error) {
	res, err := v.cat.Get(opts)
	if errors.Is(err, catalog.ErrUnknownToolkit) {
		return res, &Error{Status: http.StatusBadRequest, Code: "unknown_toolkit", Message: err.Error()}
	}
	if err != nil {
		return res, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	}
	return res, nil
}

// Search ranks the shared catalog's tools for a query (the reference's
// search); SearchFor ranks a caller's.
func (s *Service) Search(opts catalog.SearchToolsOptions) (catalog.SearchToolsResult, error) {
	return s.current().search(opts)
}

// SearchFor is Search over the catalog caller sees (see GetFor).
func (s *Service) SearchFor(caller auth.Principal, opts catalog.SearchToolsOptions) (catalog.SearchToolsResult, error) {
	return s.viewFor(caller).search(opts)
}

func (v *catalogView) search(opts catalog.SearchToolsOptions) (catalog.SearchToolsResult, error) {
	res, err := v.cat.Search(opts)
	if errors.Is(err, catalog.ErrUnknownToolkit) {
		return res, &Error{Status: http.StatusBadRequest, Code: "unknown_toolkit", Message: err.Error()}
	}
	if err != nil {
		return res, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	}
	return res, nil
}

// Executable reports whether a canonical name of the shared catalog can
// run through the tools API, and why not. Client tools, tools with only a
// discovery definition, and (unless SkipApprovals) tools whose approval
// policy always asks cannot.
func (s *Service) Executable(name string) error { return s.executable(s.current(), name, false) }

// ExecutableAsking is Executable for a caller that can answer an approval
// (StartAsking): tools whose policy asks a person are executable too.
func (s *Service) ExecutableAsking(name string) error { return s.executable(s.current(), name, true) }

// ExecutableFor is Executable (ask false) or ExecutableAsking (ask true)
// in the catalog of caller (see GetFor).
func (s *Service) ExecutableFor(caller auth.Principal, name string, ask bool) error {
	return s.executable(s.viewFor(caller), name, ask)
}

func (s *Service) executable(v *catalogView, name string, ask bool) error {
	if _, ok := v.cat.Lookup(name); !ok {
		return &Error{Status: http.StatusNotFound, Code: catalog.CodeUnknownTool, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	t, ok := v.tool(name)
	switch {
	case !ok:
		return &Error{Status: http.StatusBadRequest, Code: signals.CodeNotExecutable, Message: fmt.Sprintf("tool %s is listed for discovery only: no tool of this server runs it", name)}
	case !t.Kind().Info().OutsideSession:
		return &Error{Status: http.StatusBadRequest, Code: signals.CodeNotExecutable, Message: fmt.Sprintf("tool %s is a %s tool: a person answers it inside a session (as an input request), so it cannot be executed through the tools API", name, t.Kind())}
	}
	// The built-in policies decide here, before anything starts (no session
	// has approved anything once); a custom policy is evaluated by the
	// execution, so it passes.
	if !s.opts.SkipApprovals && !ask && approval.Decide(t.Approval.Kind(), false, approval.Skip()).Type == approval.UserApproval {
		return &Error{Status: http.StatusForbidden, Code: signals.CodeApprovalRequired, Message: fmt.Sprintf("tool %s asks a person to approve each call (approval policy %q), which only a session can do; it cannot be executed through the tools API", name, t.Approval.Kind())}
	}
	return nil
}

// ExecutionID derives the id of a user's execution (executions.ID).
func ExecutionID(scope, userID, tool, key string) string {
	return executions.ID(scope, userID, tool, key)
}

// OwnerExecutionID derives an execution's id from its owner's full
// identity (executions.OwnerID).
func OwnerExecutionID(scope string, owner auth.Principal, tool, key string) string {
	return executions.OwnerID(scope, owner, tool, key)
}

var (
	samePrincipal = executions.SamePrincipal
	principalType = executions.PrincipalType
)

func inputHash(input json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, input) != nil {
		buf.Reset()
		buf.Write(input)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:16])
}

func freshKey() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "gen:" + hex.EncodeToString(b)
}

// Execute starts (or joins) an execution of a tool by canonical name and,
// in sync mode, waits for it up to SyncWait (and ctx). It implements
// catalog.Executor. Errors are *Error: unknown tool (404), input that
// breaks the schema (400, with the violations), a tool that cannot run
// here (400/403), a key reused with other input (409), Temporal
// unavailable (503).
//
// The execution runs for the user opts.UserID names (or DefaultUser).
func (s *Service) Execute(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
	res, _, err := s.execute(ctx, name, s.user(opts.UserID), opts, s.opts.SyncWait)
	return res, err
}

// StartAsking starts an execution asynchronously for user, one whose call,
// if its approval policy asks a person, waits for the answer
// (AnswerApproval) instead of being refused: for callers that can put the
// question to the person, such as MCP tasks.
func (s *Service) StartAsking(ctx context.Context, name, user string, input json.RawMessage) (catalog.ExecutionResult, error) {
	res, _, err := s.executeAsk(ctx, name, s.user(user), catalog.ExecuteToolOptions{Input: input, Mode: catalog.ModeAsync}, 0, startExtra{ask: true})
	return res, err
}

// StartRound starts, asynchronously for user, one round of a tool that
// asks its MCP client for input (tools.Tool.ClientInput): the round
// reaches the tool as Context.Client. With ask, an approval-gated call
// waits for its approval as with StartAsking; without, it is refused.
func (s *Service) StartRound(ctx context.Context, name, user string, input json.RawMessage, round *protocol.ClientRound, ask bool) (catalog.ExecutionResult, error) {
	res, _, err := s.executeAsk(ctx, name, s.user(user), catalog.ExecuteToolOptions{Input: input, Mode: catalog.ModeAsync}, 0, startExtra{ask: ask, client: round})
	return res, err
}

// ClientInput reports whether the tool (canonical name of the shared
// catalog) asks its MCP client for input.
func (s *Service) ClientInput(name string) bool {
	t, _ := s.current().tool(name)
	return t != nil && t.ClientInput
}

// startExtra is what only some starters set.
type startExtra struct {
	ask    bool                  // a gated call waits for its approval
	client *protocol.ClientRound // the MCP client's round
}

// PendingApproval reads what a running execution waits for: its approval
// request, or nil. It asks the workflow (a query), waiting at most 5 s for
// a worker.
func (s *Service) PendingApproval(ctx context.Context, id, runID string) (*signals.ExecutionApproval, error) {
	out, err := s.Pending(ctx, id, runID)
	if err != nil {
		return nil, err
	}
	return out.Approval, nil
}

// Pending reads what a running execution waits for: its approval request
// and its task's pending client requests (signals.ExecutionOutput's
// Approval and ClientInput). It asks the workflow (a query), waiting at
// most 5 s for a worker.
func (s *Service) Pending(ctx context.Context, id, runID string) (signals.ExecutionOutput, error) {
	if err := s.reachable(id); err != nil {
		return signals.ExecutionOutput{}, err
	}
	out, err := s.driver.Query(ctx, id, runID, 5*time.Second)
	return out, s.driverError(err)
}

// AnswerClientInput delivers answers, by request id, to a task's pending
// client requests, as by.
func (s *Service) AnswerClientInput(ctx context.Context, id, runID string, responses map[string]json.RawMessage, by auth.Principal) error {
	if err := s.reachable(id); err != nil {
		return err
	}
	err := s.driver.AnswerClient(ctx, id, runID, signals.ExecutionClientAnswer{Responses: responses, By: &by})
	var refused *executions.RefusedError
	if errors.As(err, &refused) {
		return &Error{Status: http.StatusConflict, Code: "input_refused", Message: refused.Message}
	}
	return s.driverError(err)
}

// AnswerApproval answers the approval an execution waits for, as by.
func (s *Service) AnswerApproval(ctx context.Context, id, runID string, approved bool, reason string, by auth.Principal) error {
	if err := s.reachable(id); err != nil {
		return err
	}
	err := s.driver.Answer(ctx, id, runID, signals.ExecutionApprovalAnswer{RequestID: signals.ExecutionApprovalRequestID, Approved: approved, Reason: reason, By: &by})
	var refused *executions.RefusedError
	if errors.As(err, &refused) {
		return &Error{Status: http.StatusConflict, Code: "approval_refused", Message: refused.Message}
	}
	return s.driverError(err)
}

// UserOf is the principal a call naming user (or "") runs for.
func (s *Service) UserOf(user string) auth.Principal { return s.user(user) }

// user is the owner of a call that names a user (or none).
func (s *Service) user(id string) auth.Principal {
	if id == "" {
		id = s.opts.DefaultUser
	}
	return auth.Principal{ID: id, Type: auth.TypeUser}
}

// execute starts or joins an execution of owner (opts.UserID is not
// read); sync mode waits up to wait.
func (s *Service) execute(ctx context.Context, name string, owner auth.Principal, opts catalog.ExecuteToolOptions, wait time.Duration) (catalog.ExecutionResult, signals.ExecutionOutput, error) {
	return s.executeAsk(ctx, name, owner, opts, wait, startExtra{})
}

// executeAsk is execute with what only some starters set.
func (s *Service) executeAsk(ctx context.Context, name string, owner auth.Principal, opts catalog.ExecuteToolOptions, wait time.Duration, x startExtra) (catalog.ExecutionResult, signals.ExecutionOutput, error) {
	var none signals.ExecutionOutput
	// The caller's own catalog: a tool listed for another caller is
	// unknown here, and its execution finds it again for this caller.
	owner.Type = principalType(owner.Type)
	v := s.viewFor(owner)
	if err := s.executable(v, name, x.ask); err != nil {
		return catalog.ExecutionResult{}, none, err
	}
	def, _ := v.cat.Lookup(name)
	t, _ := v.tool(name)
	input := opts.Input
	if len(bytes.TrimSpace(input)) == 0 || string(bytes.TrimSpace(input)) == "null" {
		input = json.RawMessage("{}")
	}
	input, err := v.cat.NormalizeInput(name, input)
	if err != nil {
		return catalog.ExecutionResult{}, none, inputError(err)
	}
	if s.opts.Client == nil {
		return catalog.ExecutionResult{}, none, &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "this server has no Temporal client: it serves the catalog only"}
	}
	user := owner.ID
	mode := opts.Mode
	switch mode {
	case "":
		mode = catalog.ModeSync
		if def.Annotations.Async {
			mode = catalog.ModeAsync
		}
	case catalog.ModeSync, catalog.ModeAsync:
	default:
		return catalog.ExecutionResult{}, none, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf("mode %q: want sync or async", mode)}
	}
	key, generated := opts.IdempotencyKey, false
	if key == "" {
		key, generated = freshKey(), true
	}
	id := OwnerExecutionID(s.opts.TaskQueue, owner, name, key)
	hash := inputHash(input)
	caller := &auth.Principal{ID: user, Type: owner.Type}
	if opts.ConnectionID != "" {
		caller.Attributes = map[string]string{"connectionId": opts.ConnectionID}
	}
	planJSON, err := json.Marshal(plan(t, input))
	if err != nil {
		return catalog.ExecutionResult{}, none, fmt.Errorf("toolsapi: encode the plan of %s: %w", name, err)
	}
	in := signals.ExecutionInput{
		ExecutionID: id, Tool: name, UserID: user, ConnectionID: opts.ConnectionID,
		IdempotencyKey: key, InputHash: hash, Caller: caller,
		Plan: planJSON, SkipApproval: s.opts.SkipApprovals, AskApproval: x.ask,
	}
	if t.ClientInput {
		in.Client = x.client
	}
	if generated {
		in.IdempotencyKey = ""
	}
	runID, err := s.driver.Start(ctx, in)
	if err != nil {
		return catalog.ExecutionResult{}, none, s.driverError(err)
	}
	state := catalog.ExecutionResult{ID: id, Tool: name, Status: catalog.StatusQueued}
	if !generated {
		// The key may name an execution that already exists: check it ran
		// the same input, and report its real state.
		st, out, err := s.describe(ctx, id, runID)
		if err != nil {
			return catalog.ExecutionResult{}, none, err
		}
		if !samePrincipal(st.Owner(), owner) {
			// Ids derive from the owner, so only a hash collision gets here:
			// never hand one principal's execution to another.
			return catalog.ExecutionResult{}, none, &Error{Status: http.StatusConflict, Code: "idempotency_conflict",
				Message: fmt.Sprintf("idempotency key %q names execution %s, which runs for another principal; use a new key", key, id)}
		}
		if st.InputHash != "" && st.InputHash != hash {
			return catalog.ExecutionResult{}, none, &Error{Status: http.StatusConflict, Code: "idempotency_conflict",
				Message: fmt.Sprintf("idempotency key %q was used for execution %s of %s with different input; use a new key for new input", key, id, name), ExecutionID: id}
		}
		state = st.Result
		if st.Result.Status.Terminal() {
			return st.Result, out, nil
		}
	}
	if mode == catalog.ModeAsync || wait <= 0 {
		return state, none, nil
	}
	res, out, err := s.await(ctx, id, runID, wait)
	if err != nil {
		return catalog.ExecutionResult{}, none, err
	}
	if !res.Status.Terminal() {
		res.Tool = name
	}
	return res, out, nil
}

// plan is how the execution workflow runs a tool: the turn's plan
// (activities.PlanCall) of a call with the execution's call id.
func plan(t *tools.Tool, input json.RawMessage) work.CallPlan {
	return work.PlanCall(t, model.ToolCall{ID: signals.ExecutionCallID, Name: t.Name, Input: input})
}

// describe reads an execution's state; terminal executions come with their result.
func (s *Service) describe(ctx context.Context, id, runID string) (executions.State, signals.ExecutionOutput, error) {
	if err := s.reachable(id); err != nil {
		return executions.State{}, signals.ExecutionOutput{}, err
	}
	st, out, err := s.driver.Describe(ctx, id, runID)
	return st, out, s.driverError(err)
}

// await waits up to wait (and ctx) for an execution to end. When it does
// not, the result is its current state and no error.
func (s *Service) await(ctx context.Context, id, runID string, wait time.Duration) (catalog.ExecutionResult, signals.ExecutionOutput, error) {
	res, out, err := s.driver.Await(ctx, id, runID, wait)
	return res, out, s.driverError(err)
}

// Execution fetches an execution by id: its state, and its result once it
// ended.
func (s *Service) Execution(ctx context.Context, id string) (catalog.ExecutionResult, error) {
	d, _, err := s.describe(ctx, id, "")
	return d.Result, err
}

// ExecutionOwner returns the principal an execution runs for (for
// authorization): its id and type.
func (s *Service) ExecutionOwner(ctx context.Context, id string) (auth.Principal, error) {
	d, _, err := s.describe(ctx, id, "")
	return d.Owner(), err
}

// Describe reads an execution's state (and its output once it ended) for
// callers that check ownership themselves, such as MCP tasks.
func (s *Service) Describe(ctx context.Context, id string) (executions.State, signals.ExecutionOutput, error) {
	return s.describe(ctx, id, "")
}

// RequestCancel asks an execution to stop without waiting for it to end.
func (s *Service) RequestCancel(ctx context.Context, id, runID string) error {
	if err := s.reachable(id); err != nil {
		return err
	}
	return s.driverError(s.driver.RequestCancel(ctx, id, runID))
}

// Wait blocks until the execution ends or ctx does (it long-polls
// Temporal; poll is not needed). It implements catalog.ExecutionWaiter.
func (s *Service) Wait(ctx context.Context, id string, _ time.Duration) (catalog.ExecutionResult, error) {
	res, err := s.driver.Wait(ctx, id, s.opts.MaxWait)
	return res, s.driverError(err)
}

// Cancel asks an execution to stop and waits up to CancelWait for it to
// end. Cancelling an ended execution changes nothing and returns its result.
func (s *Service) Cancel(ctx context.Context, id string) (catalog.ExecutionResult, error) {
	if err := s.reachable(id); err != nil {
		return catalog.ExecutionResult{}, err
	}
	res, err := s.driver.Cancel(ctx, id, s.opts.CancelWait)
	return res, s.driverError(err)
}

// RunOptions configures Run (RunToolOptions in the reference).
type RunOptions struct {
	UserID         string
	ConnectionID   string
	IdempotencyKey string
	Mode           catalog.ExecutionMode
	// Timeout bounds the wait (default RunTimeout, at most MaxWait).
	Timeout time.Duration
}

// RunTimeoutError says run stopped waiting; the execution goes on.
type RunTimeoutError struct {
	ExecutionID string
	Tool        string
	Status      catalog.ExecutionStatus
	Waited      time.Duration
}

func (e *RunTimeoutError) Error() string {
	return fmt.Sprintf("tool %s did not finish within %s; the execution goes on (status %s): fetch it with GET /v1/executions/%s",
		e.Tool, e.Waited, e.Status, e.ExecutionID)
}

// ExecutionFailedError is run's error for an execution that ended other
// than succeeded.
type ExecutionFailedError struct {
	Result catalog.ExecutionResult
}

func (e *ExecutionFailedError) Error() string {
	msg := fmt.Sprintf("tool %s %s (execution %s)", e.Result.Tool, e.Result.Status, e.Result.ID)
	if e.Result.Error != nil {
		msg += ": " + e.Result.Error.Error()
	}
	return msg
}

// Run executes a tool and waits for its output (the reference's run). On
// timeout the error is a *RunTimeoutError naming the execution, which goes
// on; an execution that fails is an *ExecutionFailedError.
func (s *Service) Run(ctx context.Context, name string, input json.RawMessage, opts RunOptions) (json.RawMessage, error) {
	res, err := s.RunResult(ctx, name, input, opts)
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

// RunResult is Run returning the whole terminal result.
func (s *Service) RunResult(ctx context.Context, name string, input json.RawMessage, opts RunOptions) (catalog.ExecutionResult, error) {
	return s.runResult(ctx, name, input, s.user(opts.UserID), opts)
}

// runResult is RunResult for owner (opts.UserID is not read).
func (s *Service) runResult(ctx context.Context, name string, input json.RawMessage, owner auth.Principal, opts RunOptions) (catalog.ExecutionResult, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = s.opts.RunTimeout
	}
	timeout = min(timeout, s.opts.MaxWait)
	mode := opts.Mode
	if mode == "" {
		mode = catalog.ModeSync // run waits, async tools included
	}
	res, _, err := s.execute(ctx, name, owner, catalog.ExecuteToolOptions{
		Input: input, Mode: mode, IdempotencyKey: opts.IdempotencyKey, ConnectionID: opts.ConnectionID,
	}, timeout)
	if err != nil {
		return res, err
	}
	if mode == catalog.ModeAsync && !res.Status.Terminal() {
		res, _, err = s.await(ctx, res.ID, "", timeout)
		if err != nil {
			return res, err
		}
	}
	switch {
	case !res.Status.Terminal():
		return res, &RunTimeoutError{ExecutionID: res.ID, Tool: name, Status: res.Status, Waited: timeout}
	case res.Status != catalog.StatusSucceeded:
		return res, &ExecutionFailedError{Result: res}
	}
	return res, nil
}

// ToolCallExecutor is the executor behind ExecuteToolCalls: input is
// normalized (OpenAI strict-mode nulls dropped) and validated first, and a
// failure is a failed result the model can read and correct, not an error;
// so are tools that cannot run here. It waits for async executions.
// The calls run for the user their options name.
func (s *Service) ToolCallExecutor() catalog.Executor { return callExecutor{s: s} }

// callExecutor runs calls for owner, or (nil) for the user each names.
type callExecutor struct {
	s     *Service
	owner *auth.Principal
}

func (c callExecutor) Execute(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
	owner := c.s.user(opts.UserID)
	if c.owner != nil {
		owner = *c.owner
	}
	res, _, err := c.s.execute(ctx, name, owner, opts, c.s.opts.SyncWait)
	var e *Error
	if errors.As(err, &e) && e.Status < 500 {
		return catalog.ExecutionResult{ID: e.ExecutionID, Tool: name, Status: catalog.StatusFailed, Error: &catalog.ExecutionError{Code: e.Code, Message: e.Message}}, nil
	}
	return res, err
}

func (c callExecutor) Wait(ctx context.Context, id string, poll time.Duration) (catalog.ExecutionResult, error) {
	return c.s.Wait(ctx, id, poll)
}

// ExecuteAnthropicToolCalls runs Anthropic tool_use blocks through
// executions (see catalog.ExecuteAnthropicToolCalls).
func (s *Service) ExecuteAnthropicToolCalls(ctx context.Context, calls []catalog.AnthropicToolCall, opts catalog.ExecuteToolCallsOptions) []catalog.AnthropicToolResultBlock {
	return catalog.ExecuteAnthropicToolCalls(ctx, s.ToolCallExecutor(), calls, opts)
}

// ExecuteOpenAIToolCalls runs Chat Completions tool calls through
// executions (see catalog.ExecuteOpenAIToolCalls).
func (s *Service) ExecuteOpenAIToolCalls(ctx context.Context, calls []catalog.OpenAIToolCall, opts catalog.ExecuteToolCallsOptions) []catalog.OpenAIToolResultMessage {
	return catalog.ExecuteOpenAIToolCalls(ctx, s.ToolCallExecutor(), calls, opts)
}

// reachable refuses ids that are no execution's, and any id when the
// server has no Temporal client.
func (s *Service) reachable(id string) error {
	if !strings.HasPrefix(id, ExecutionIDPrefix) {
		return notFound(id)
	}
	if s.opts.Client == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "this server has no Temporal client"}
	}
	return nil
}

// driverError maps the driver's errors to the API's.
func (s *Service) driverError(err error) error {
	var (
		nf *executions.NotFoundError
		un *executions.UnavailableError
	)
	switch {
	case errors.As(err, &nf):
		return notFound(nf.ID)
	case errors.As(err, &un):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: un.Error()}
	}
	return err
}

func notFound(id string) error {
	return &Error{Status: http.StatusNotFound, Code: "execution_not_found", Message: fmt.Sprintf("no execution %q", id)}
}
