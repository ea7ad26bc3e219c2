// Package api serves eve's session protocol (shared/eve-protocol.md: eve
// 0.80.1, stream version 26) over HTTP, so eve's own client (npm
// eve/client, useEveAgent) and the Go client drive sessions that run as
// Temporal workflows.
//
// Every route lives under /eve/v1/ (a named mount /eve/<agent>/v1/ is
// served the same). All routes but health need a bearer key when keys are
// configured. Writes go to sessions.Service (Temporal Updates); the stream
// polls the workflows' event logs with queries (see docs/events.md).
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// Defaults of Options.
const (
	DefaultLeaseDuration     = 60 * time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultPollInterval      = 10 * time.Millisecond
	DefaultIdlePollInterval  = 250 * time.Millisecond
	DefaultMaxBodyBytes      = 1 << 20
)

// ResponderCheck is what AuthorizeResponder decides on: someone other than
// the session's initiator answers input requests.
type ResponderCheck struct {
	SessionID string
	Initiator *auth.Principal
	Responder *auth.Principal
	// Requests are the open requests being answered, Responses the answers.
	Requests  []protocol.InputRequest
	Responses []protocol.InputResponse
}

// Options configures the server.
type Options struct {
	// Sessions drives the session workflows (required).
	Sessions *sessions.Service
	// Keys maps bearer keys to principals. Empty: the server is open and
	// every caller is the anonymous principal (Anonymous).
	Keys map[string]*auth.Principal
	// AuthorizeResponder decides whether a responder other than the
	// session's initiator may answer its input requests. Nil: only the
	// initiator may. It must not block for long (it runs in the request).
	AuthorizeResponder func(ctx context.Context, c ResponderCheck) bool
	// LeaseDuration ends each stream response (with the stream.lease-ended
	// line) when the client asked for stream control (default 60 s).
	LeaseDuration time.Duration
	// HeartbeatInterval is how often an idle stream writes a blank line
	// (default 10 s; the client gives up after 15 s without bytes).
	HeartbeatInterval time.Duration
	// PollInterval is how often a stream reads a running turn's events
	// (default 10 ms); IdlePollInterval how often it looks at an idle
	// session (default 250 ms). A write through this server wakes the
	// session's streams at once.
	PollInterval     time.Duration
	IdlePollInterval time.Duration
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// CORSOrigins lists the origins browsers may call from; empty means
	// any ("*"). Credentials (cookies) are never needed: auth is a bearer key.
	CORSOrigins []string
	// Logger receives request errors (default slog.Default()).
	Logger *slog.Logger
	// Info describes the agent at GET /eve/v1/info.
	Info Info
	// Actions serves delegated actions' completion URLs (under
	// /eve/v1/actions/). They carry their own signed capability, so no
	// bearer key is required. Nil: those URLs answer 404.
	Actions http.Handler
	// Tools serves the tools API under /v1/ (bearer keys apply). Nil: 404.
	Tools http.Handler
}

// Anonymous is the caller when no keys are configured.
var Anonymous = &auth.Principal{ID: "anonymous", Type: "anonymous"}

// Server is the HTTP handler of the session protocol.
type Server struct {
	opts  Options
	log   *slog.Logger
	keys  keyIndex
	mux   *http.ServeMux
	wakes *wakeHub
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
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	keys, err := newKeyIndex(opts.Keys)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, keys: keys, mux: http.NewServeMux(), wakes: newWakeHub()}
	s.routes()
	return s, nil
}

// Open reports whether the server runs without keys (every caller anonymous).
func (s *Server) Open() bool { return len(s.keys) == 0 }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /eve/v1/health", s.health)
	m.HandleFunc("HEAD /eve/v1/health", s.health)
	m.HandleFunc("GET /eve/v1/info", s.authed(s.info))
	m.HandleFunc("POST /eve/v1/session", s.authed(s.create))
	m.HandleFunc("POST /eve/v1/session/{id}", s.authed(s.message))
	m.HandleFunc("POST /eve/v1/session/{id}/cancel", s.authed(s.cancel))
	m.HandleFunc("POST /eve/v1/session/{id}/clear", s.authed(s.clear))
	m.HandleFunc("POST /eve/v1/session/{id}/compact", s.authed(s.compact))
	m.HandleFunc("POST /eve/v1/session/{id}/reset", s.authed(s.reset))
	m.HandleFunc("GET /eve/v1/session/{id}/stream", s.authed(s.stream))
	if s.opts.Actions != nil {
		m.Handle("/eve/v1/actions/", s.opts.Actions)
	}
	if s.opts.Tools != nil {
		m.HandleFunc("/v1/", s.authed(s.opts.Tools.ServeHTTP))
	}
	m.HandleFunc("/", s.notFound)
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
			s.log.Error("api: panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusInternalServerError, "internal_error", "the server failed to handle the request")
		}
	}()
	if s.cors(w, r) {
		return
	}
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

// cors answers preflights and decorates cross-origin responses. It returns
// true when the request was a preflight it answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	allowed := len(s.opts.CORSOrigins) == 0
	for _, o := range s.opts.CORSOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			allowed = true
			break
		}
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if !allowed {
		return false
	}
	if len(s.opts.CORSOrigins) == 0 {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	h.Set("Access-Control-Expose-Headers", exposedHeaders)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS")
		allowHeaders := "authorization, content-type, x-vercel-trusted-oidc-idp-token"
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

const exposedHeaders = "x-eve-session-id, x-eve-stream-version, x-eve-stream-tail-index, x-eve-stream-format, www-authenticate"

// wakeHub lets writes through this server wake the streams of a session,
// so their next poll happens at once instead of after the idle interval.
type wakeHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newWakeHub() *wakeHub { return &wakeHub{subs: map[string]map[chan struct{}]struct{}{}} }

func (h *wakeHub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}

func (h *wakeHub) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
