// Package api serves eve's session protocol (shared/eve-protocol.md: eve
// 0.80.1, stream version 26) over HTTP, so eve's own client (npm
// eve/client, useEveAgent) and the Go client drive sessions that run as
// Temporal workflows.
//
// Every route lives under /eve/v1/ (a named mount /eve/<agent>/v1/ is
// served the same). All routes but health need a bearer key when keys are
// configured. Writes go to sessions.Service (Temporal Updates); streams
// read the workflows' event logs with queries, one reader per session,
// when told the session changed (see docs/events.md).
package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/console"
	"github.com/eve-temporal/eve/internal/httpbody"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/signals"
)

// Defaults of Options.
const (
	DefaultLeaseDuration     = 60 * time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultPollInterval      = 10 * time.Millisecond
	DefaultIdlePollInterval  = 250 * time.Millisecond
	DefaultMaxBodyBytes      = 1 << 20
	// DefaultMaxStreamsPerPrincipal bounds one principal's open streams.
	DefaultMaxStreamsPerPrincipal = 100
	// DefaultStreamWriteTimeout bounds one write to a stream: a client
	// that stops reading frees the stream's goroutine after it.
	DefaultStreamWriteTimeout = 15 * time.Second
	// DefaultMaxTailEvents bounds a negative startIndex: at most this many
	// events back from the tail.
	DefaultMaxTailEvents = 1000
)

// ServerOptions are the settings of eve's HTTP handler, declared once:
// eve.ServerOptions is this type, the serve and dev commands bind their
// flags onto it, and Options embeds it. New reads the HTTP settings; the
// assembly (internal/assemble) reads TaskQueue, ActionSecret, MaxToolCalls
// and Notify, which need a Temporal client or the agent.
type ServerOptions struct {
	// TaskQueue of the agent's workers (default the agent's name, as
	// NewWorker's and the commands').
	TaskQueue string
	// APIKey is a bearer key callers must send (EVE_API_KEY); KeysFile maps
	// keys to principals (EVE_API_KEYS_FILE, docs/http-api.md). With
	// neither the server is open: it answers loopback Host headers only,
	// unless InsecureOpen.
	APIKey   string
	KeysFile string
	// InsecureOpen lets an open server listen beyond loopback and accept
	// any Host header. Without it, an open server answers only requests
	// whose Host is localhost, 127.0.0.0/8 or [::1] (DNS rebinding).
	InsecureOpen bool
	// Addr is where the handler is served (host:port), when known, for the
	// open-server check: an open server beyond loopback is refused unless
	// InsecureOpen.
	Addr string
	// ActionSecret verifies completion URLs (EVE_ACTION_SECRET, the
	// workers' secret); empty: completion URLs answer 404.
	ActionSecret string
	// CORSOrigins lists the origins browsers may call from, besides the
	// server's own; empty means any ("*") when keys are configured, and
	// pages served from this machine (loopback origins, reflected) on an
	// open server, which never sends a wildcard. A request from any other
	// origin is refused with 403 before anything runs (a cross-site page's
	// "simple" request needs no preflight, so CORS alone would not stop
	// it). Credentials (cookies) are never needed: auth is a bearer key.
	CORSOrigins []string
	// MaxStreamsPerPrincipal bounds the open streams of one principal
	// (default 100; negative: no bound). Beyond it a stream answers 429.
	MaxStreamsPerPrincipal int
	// MaxToolCalls bounds the calls of one executeToolCalls request of the
	// tools API (default 32; negative: no bound): a request with more is
	// refused (400 too_many_calls) before any starts.
	MaxToolCalls int
	// AgentName reported by /eve/v1/info (default the agent's name).
	AgentName string
	// MaxBodyBytes bounds request bodies (default 1 MiB, as `serve`'s
	// --max-body-bytes); BodyReadTimeout how long a body may take to
	// arrive (default 10 s, httpbody.DefaultReadTimeout): past it the
	// answer is 408 and the connection closes. Streams, which have no
	// body, keep their own write deadlines.
	MaxBodyBytes    int64
	BodyReadTimeout time.Duration
	// LeaseDuration ends each stream response (with the stream.lease-ended
	// line) for clients that asked for stream control (default 60 s);
	// HeartbeatInterval is how often an idle stream writes a blank line
	// (default 10 s; the client gives up after 15 s without bytes);
	// PollInterval how often a session's reader polls a running turn's
	// events without a Notify bus (default 10 ms).
	LeaseDuration     time.Duration
	HeartbeatInterval time.Duration
	PollInterval      time.Duration
	// Notify names the bus the workers announce new events on (EVE_NOTIFY,
	// postgres://user@host:port/db, set alike on the workers): streams are
	// then pushed instead of polling. Empty: they poll.
	Notify string
	// Logger receives request errors (default slog.Default()).
	Logger *slog.Logger
	// AuthorizeSession lets a caller other than a session's owner (its
	// initiator, a service whose keys-file canActFor names the owner, or a
	// reviewer whose keys-file reviews grant covers it) act on it — send,
	// respond, stream, cancel, clear, compact or reset, or read its
	// decision record (SessionAccess.Action): return true to allow. Nil:
	// nobody else may. It runs in the request, before anything reaches the
	// workflow, so it must not block for long; a refusal answers 403 and
	// records nothing. The listings ask it too, per item: the inbox
	// (respond, with the request), the sessions list (stream), the jobs
	// list (cancel) and the decisions export (decisions). eve.Main takes
	// it as WithAuthorizeSession.
	AuthorizeSession func(ctx context.Context, a SessionAccess) bool
	// AllowToolStubs grants eve's tool stubs (evals) to a caller the keys
	// file does not (its allowToolStubs): creating a session with "stubs"
	// and reading GET /eve/v1/session/{id}/stubs. Nil: only the keys
	// file grants, and an open server on loopback (eve dev) grants every
	// caller, as eve's own dev server does.
	AllowToolStubs func(ctx context.Context, p *auth.Principal) bool
	// TemporalUIURL is the Temporal Web UI's base URL (EVE_TEMPORAL_UI_URL,
	// e.g. http://localhost:8233) and TemporalNamespace the workers'
	// namespace (default "default"): the console at /console/ links each
	// turn to its workflow there. Empty: no links.
	TemporalUIURL     string
	TemporalNamespace string
}

// Options configures the server: the settings, and what the assembly
// built from them.
type Options struct {
	ServerOptions
	// Sessions drives the session workflows (required).
	Sessions *sessions.Service
	// Keys maps bearer keys to principals. Nil: LoadKeys(APIKey,
	// KeysFile). Empty: the server is open and every caller is the
	// anonymous principal (Anonymous).
	Keys map[string]*auth.Principal
	// Bus delivers "session X changed" from the workers (internal/notify):
	// streams read a session only when it changes, so idle streams cost no
	// query. Nil: each session with open streams is polled by one reader
	// (PollInterval, IdlePollInterval).
	Bus notify.Bus
	// Info describes the agent at GET /eve/v1/info (AgentName, when set,
	// replaces its name).
	Info Info
	// Actions serves delegated actions' completion URLs (under
	// /eve/v1/actions/). They carry their own signed capability, so no
	// bearer key is required. Nil: those URLs answer 404.
	Actions http.Handler
	// Tools serves the tools API under /v1/ (bearer keys apply). Nil: 404.
	Tools http.Handler
	// CursorSecret keys the listings' cursors (sealed: opaque, and
	// refused when changed or used for another listing). Nil: the
	// ActionSecret, which every API server of a deployment shares, so any
	// of them continues another's listing; without either, a random key
	// per process, so a cursor works only on the server that issued it,
	// until it restarts.
	CursorSecret []byte
	// Tracing puts each accepted message in its turn's trace (an eve.send
	// span under the turn's invoke_agent, docs/observability.md); Close
	// shuts it down. Nil: no spans.
	Tracing *tracing.Provider

	// Tuning eve's commands leave at their defaults.

	// StreamWriteTimeout bounds each write to a stream (default 15 s).
	StreamWriteTimeout time.Duration
	// MaxTailEvents bounds a negative startIndex (default 1000 events).
	MaxTailEvents int
	// OwnerCacheSize bounds the session owners remembered (default 50000).
	OwnerCacheSize int
	// IdlePollInterval is how often a session's reader looks at an idle
	// session without Bus (default 250 ms). A write through this server
	// wakes the session's reader at once.
	IdlePollInterval time.Duration
	// DecisionsSessionTimeout bounds reading one session's decision record
	// in an export across sessions (default DecisionsSessionTimeout).
	DecisionsSessionTimeout time.Duration
	// RequestTimeout bounds a write's Temporal calls (default 20 s, under
	// the 30 s most HTTP clients wait): past it the answer is 503 with
	// Retry-After.
	RequestTimeout time.Duration
}

// TemporalUIWorkflowURL is the workflows page of namespace in the Temporal
// Web UI at base (http://localhost:8233), or "" without a base.
func TemporalUIWorkflowURL(base, namespace string) string {
	if base = strings.TrimRight(strings.TrimSpace(base), "/"); base == "" {
		return ""
	}
	return base + "/namespaces/" + url.PathEscape(cmp.Or(namespace, "default")) + "/workflows"
}

// Anonymous is the caller when no keys are configured.
var Anonymous = &auth.Principal{ID: "anonymous", Type: "anonymous"}

// Server is the HTTP handler of the session protocol.
type Server struct {
	opts    Options
	log     *slog.Logger
	keys    keyIndex
	mux     *http.ServeMux
	hub     *hub
	owners  *ownerCache
	streams *streamCounter
	cursors *cursorSealer
}

// New returns the server; it is an http.Handler.
func New(opts Options) (*Server, error) {
	if opts.Sessions == nil {
		return nil, errors.New("api: Options.Sessions is required")
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.IdlePollInterval <= 0 {
		opts.IdlePollInterval = DefaultIdlePollInterval
	}
	if opts.IdlePollInterval < opts.PollInterval {
		opts.IdlePollInterval = opts.PollInterval
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = httpbody.DefaultReadTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxStreamsPerPrincipal == 0 {
		opts.MaxStreamsPerPrincipal = DefaultMaxStreamsPerPrincipal
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if opts.MaxTailEvents <= 0 {
		opts.MaxTailEvents = DefaultMaxTailEvents
	}
	if opts.OwnerCacheSize <= 0 {
		opts.OwnerCacheSize = DefaultOwnerCacheSize
	}
	if opts.Keys == nil {
		k, err := LoadKeys(opts.APIKey, opts.KeysFile)
		if err != nil {
			return nil, err
		}
		opts.Keys = k
	}
	if opts.AgentName != "" {
		opts.Info.AgentName = opts.AgentName
	}
	keys, err := newKeyIndex(opts.Keys)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 && opts.Addr != "" && !isLoopbackAddr(opts.Addr) && !opts.InsecureOpen {
		return nil, fmt.Errorf("api: %w (%s): without keys every caller could drive every session. "+
			"Set EVE_API_KEY (--eve-api-key) or EVE_API_KEYS_FILE (--keys-file), listen on a loopback address "+
			"(EVE_ADDR=127.0.0.1:4111), or accept the risk with --insecure-open (EVE_INSECURE_OPEN=1)", ErrInsecureOpen, opts.Addr)
	}
	if opts.CursorSecret == nil && opts.ActionSecret != "" {
		opts.CursorSecret = []byte(opts.ActionSecret)
	}
	cursors, err := newCursorSealer(opts.CursorSecret)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, keys: keys, mux: http.NewServeMux(),
		owners: newOwnerCache(opts.OwnerCacheSize), streams: &streamCounter{open: map[string]int{}}, cursors: cursors}
	s.hub = newHub(opts.Sessions, opts.Bus, opts.PollInterval, opts.IdlePollInterval, opts.Logger)
	s.routes()
	return s, nil
}

// Close stops listening to Options.Bus (open streams end with their
// requests).
func (s *Server) Close() {
	s.hub.close()
	if s.opts.Tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.opts.Tracing.Shutdown(ctx)
	}
}

// Open reports whether the server runs without keys (every caller anonymous).
func (s *Server) Open() bool { return len(s.keys) == 0 }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /eve/v1/health", s.health)
	m.HandleFunc("HEAD /eve/v1/health", s.health)
	m.HandleFunc("GET /eve/v1/info", s.authed(s.info))
	m.HandleFunc("POST /eve/v1/session", s.authed(s.create))
	m.HandleFunc("POST /eve/v1/session/{id}", s.authed(s.session(s.message)))
	m.HandleFunc("POST /eve/v1/session/{id}/cancel", s.authed(s.session(s.cancel)))
	m.HandleFunc("POST /eve/v1/session/{id}/clear", s.authed(s.session(s.clear)))
	m.HandleFunc("POST /eve/v1/session/{id}/compact", s.authed(s.session(s.compact)))
	m.HandleFunc("POST /eve/v1/session/{id}/reset", s.authed(s.session(s.reset)))
	m.HandleFunc("GET /eve/v1/session/{id}/stream", s.authed(s.session(s.stream)))
	m.HandleFunc("GET /eve/v1/session/{id}/tasks", s.authed(s.session(s.sessionTasks)))
	m.HandleFunc("POST /eve/v1/session/{id}/tasks/{taskId}/cancel", s.authed(s.session(s.cancelTask)))
	m.HandleFunc("GET /eve/v1/session/{id}/stubs", s.authed(s.session(s.stubs)))
	m.HandleFunc("GET /eve/v1/session/{id}/export-stubs", s.authed(s.session(s.exportStubs)))
	m.HandleFunc("GET /eve/v1/inbox", s.authed(s.inbox))
	m.HandleFunc("POST /eve/v1/inbox/{id}", s.authed(s.inboxAnswer))
	m.HandleFunc("GET /eve/v1/decisions", s.authed(s.decisions))
	m.HandleFunc("GET /eve/v1/inbox/events", s.authed(s.inboxEvents))
	m.HandleFunc("GET /eve/v1/sessions", s.authed(s.sessionList))
	m.HandleFunc("GET /eve/v1/jobs", s.authed(s.jobList))
	// The console's static files need no key: the page signs in itself.
	m.Handle("GET "+console.Prefix, console.Handler(console.Config{TemporalUIWorkflowURL: TemporalUIWorkflowURL(s.opts.TemporalUIURL, s.opts.TemporalNamespace), Open: s.Open()}))
	m.Handle("GET /console", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently))
	if s.opts.Actions != nil {
		m.Handle("/eve/v1/actions/", s.opts.Actions)
	}
	if s.opts.Tools != nil {
		m.HandleFunc("/v1/", s.authed(s.opts.Tools.ServeHTTP))
	}
	m.HandleFunc("/", s.notFound)
}

// session checks the {id} of a session route against the session id
// format before anything else runs: a malformed id is 400, a well-formed
// id of another kind 404 like any unknown session.
func (s *Server) session(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch err := signals.CheckSessionID(r.PathValue("id")); {
		case errors.Is(err, signals.ErrMalformedID):
			httpbody.Refusing(w, r)
			writeError(w, http.StatusBadRequest, CodeInvalidID, "the session id in the URL is malformed: a session id is ses_ followed by letters, digits, '_' or '-' (at most 120)")
		case err != nil:
			httpbody.Refusing(w, r)
			writeError(w, http.StatusNotFound, CodeSessionNotFound, "session "+r.PathValue("id")+" not found")
		default:
			h(w, r)
		}
	}
}

// namedMount matches /eve/<agent>/v1/..., which eve's client uses for
// useEveAgent({agent}); it is served like /eve/v1/....
var namedMount = regexp.MustCompile(`^/eve/[a-z0-9][a-z0-9_-]*/v1(/|$)`)

// ServeHTTP applies CORS, the named-mount rewrite and panic recovery.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api: panic serving request", "method", r.Method, "path", actionsvc.RedactPath(r.URL.Path), "panic", v) // no capability token in logs
			writeError(w, http.StatusInternalServerError, "internal_error", "the server failed to handle the request")
		}
	}()
	if s.Open() && !s.opts.InsecureOpen && !isLoopbackHost(r.Host) {
		httpbody.Refusing(w, r)
		// An open server answers only this machine's names: a web page
		// cannot reach it through a DNS name rebound to 127.0.0.1.
		writeError(w, http.StatusForbidden, CodeForbiddenHost, "Host "+strconv.Quote(r.Host)+" is refused: this eve API server runs without API keys and answers only loopback hosts (localhost, 127.0.0.1, [::1]). "+
			"Set EVE_API_KEY or EVE_API_KEYS_FILE to serve other hosts (or --insecure-open, EVE_INSECURE_OPEN=1, to accept the risk)")
		return
	}
	allow, ok := s.originGrant(r)
	if !ok {
		httpbody.Refusing(w, r)
		writeError(w, http.StatusForbidden, CodeForbiddenOrigin, "Origin "+strconv.Quote(r.Header.Get("Origin"))+" may not call this eve API server: a page may call it only from the server's own origin or one in its allow-list "+
			"(EVE_CORS_ORIGINS, api.Options.CORSOrigins; on a server without API keys also pages of this machine)")
		return
	}
	if s.cors(w, r, allow) {
		return
	}
	r = httpbody.Deadline(w, r, s.opts.BodyReadTimeout)
	if loc := namedMount.FindStringIndex(r.URL.Path); loc != nil && !strings.HasPrefix(r.URL.Path, "/eve/v1/") {
		end := loc[1]
		if strings.HasSuffix(r.URL.Path[:end], "/") {
			end--
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/eve/v1" + r.URL.Path[end:]
		r2.URL.RawPath = ""
		r = r2
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path+": the session protocol lives under /eve/v1/ (see docs/http-api.md)")
}

// originGrant decides a browser page's request, for the origin check and
// for CORS at once. ok: the page may call at all — no Origin (not a
// browser, or a same-origin navigation) unless the browser marks the
// request cross-site (Sec-Fetch-Site), a listed origin, what an empty list
// (or "*") allows (any origin with keys, this machine's pages on an open
// server), or the server's own origin. allow is the
// Access-Control-Allow-Origin to send: "*" (keys, no list), the origin
// itself, or "" (none needed).
func (s *Server) originGrant(r *http.Request) (allow string, ok bool) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "", r.Header.Get("Sec-Fetch-Site") != "cross-site"
	}
	anyOrigin, listed := len(s.opts.CORSOrigins) == 0, false
	for _, o := range s.opts.CORSOrigins {
		if o == "*" {
			anyOrigin = true
		} else if strings.EqualFold(o, origin) {
			listed = true
		}
	}
	switch {
	case listed:
		return origin, true
	case anyOrigin && !s.Open():
		return "*", true
	case anyOrigin && isLoopbackOrigin(origin):
		return origin, true
	}
	_, host, _ := strings.Cut(origin, "://")
	return "", strings.EqualFold(host, r.Host)
}

// cors answers preflights and decorates cross-origin responses with allow
// (originGrant). It returns true when the request was a preflight it
// answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request, allow string) bool {
	if r.Header.Get("Origin") == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if allow == "" {
		return false
	}
	h.Set("Access-Control-Allow-Origin", allow)
	h.Set("Access-Control-Expose-Headers", exposedHeaders)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS")
		allowHeaders := "authorization, content-type, idempotency-key, x-vercel-trusted-oidc-idp-token"
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			allowHeaders = req
		}
		h.Set("Access-Control-Allow-Headers", allowHeaders)
		h.Set("Access-Control-Max-Age", "600")
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

const exposedHeaders = "x-eve-session-id, x-eve-stream-version, x-eve-stream-tail-index, x-eve-stream-format, www-authenticate, retry-after"

// streamCounter counts each principal's open streams.
type streamCounter struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a slot for p (false when p holds max already; max < 0:
// no bound). release gives it back.
func (c *streamCounter) acquire(p *auth.Principal, max int) (release func(), ok bool) {
	k := p.Type + "\x00" + p.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if max >= 0 && c.open[k] >= max {
		return nil, false
	}
	c.open[k]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.open[k]--; c.open[k] <= 0 {
			delete(c.open, k)
		}
	}, true
}
