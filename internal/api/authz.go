package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Session actions, as SessionAccess.Action names them.
const (
	ActionSend    = "send"
	ActionRespond = "respond"
	ActionStream  = "stream"
	ActionCancel  = "cancel"
	ActionClear   = "clear"
	ActionCompact = "compact"
	ActionReset   = "reset"
)

// SessionAccess is what ServerOptions.AuthorizeSession decides on: a caller who
// is not the session's owner (its initiator) and holds no keys-file grant
// for it (canActFor, reviews) wants to act on it.
type SessionAccess struct {
	SessionID string
	// Action is one of the Action* constants: send, respond, stream,
	// cancel, clear, compact, reset, or decisions (read the session's
	// decision record). Listings ask too: the inbox asks respond for each
	// request it would list, the sessions list stream, the jobs list
	// cancel, and the decisions export decisions.
	Action string
	// Owner is the session's initiator (nil for a session started without
	// one); Caller the authenticated principal of the request.
	Owner  *auth.Principal
	Caller *auth.Principal
	// Message is the text of a send (which may answer an open prompt).
	Message string
	// Requests are the open requests a respond answers (those the session
	// asked), Responses the answers.
	Requests  []protocol.InputRequest
	Responses []protocol.InputResponse
}

// DefaultOwnerCacheSize bounds the owners the server remembers (a
// session's owner never changes, so a cached one is never stale).
const DefaultOwnerCacheSize = 50_000

// ownerCache maps session ids to their owners. An entry is forgotten only
// to make room; forgetting costs one state query on the next request.
// Lookups of one id at once share one query (inflight): N inbox streams
// hearing of the same session ask Temporal once, not N times.
type ownerCache struct {
	mu       sync.Mutex
	m        map[string]*auth.Principal
	max      int
	inflight map[string]*ownerLookup
}

// ownerLookup is one state query of a session's owner, shared by those
// who asked meanwhile; done closes when it has answered.
type ownerLookup struct {
	done chan struct{}
	sum  signals.SessionSummary
	err  error
}

func newOwnerCache(max int) *ownerCache {
	return &ownerCache{m: map[string]*auth.Principal{}, max: max, inflight: map[string]*ownerLookup{}}
}

func (c *ownerCache) get(id string) (*auth.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[id]
	return p, ok
}

func (c *ownerCache) put(id string, p *auth.Principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(id, p)
}

func (c *ownerCache) putLocked(id string, p *auth.Principal) {
	if _, ok := c.m[id]; !ok && len(c.m) >= c.max {
		for k := range c.m { // an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[id] = p
}

// join returns the lookup of id under way, or starts one with fetch (in
// a goroutine of its own, so it outlives a caller that gives up).
func (c *ownerCache) join(id string, fetch func() (signals.SessionSummary, error)) *ownerLookup {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.inflight[id]; ok {
		return l
	}
	l := &ownerLookup{done: make(chan struct{})}
	c.inflight[id] = l
	go func() {
		l.sum, l.err = fetch()
		c.mu.Lock()
		delete(c.inflight, id)
		if l.err == nil {
			c.putLocked(id, l.sum.Initiator)
		}
		c.mu.Unlock()
		close(l.done)
	}()
	return l
}

// ownerLookupTimeout bounds one shared owner lookup.
const ownerLookupTimeout = 10 * time.Second

// owner returns the session's owner: remembered, or read from its state
// query (then the summary is returned too). Errors are those of
// sessions.Service.Summary: ErrNotFound, *EndedError, or a failure.
func (s *Server) owner(ctx context.Context, id string) (*auth.Principal, *signals.SessionSummary, error) {
	if p, ok := s.owners.get(id); ok {
		return p, nil, nil
	}
	l := s.owners.join(id, func() (signals.SessionSummary, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ownerLookupTimeout)
		defer cancel()
		return s.opts.Sessions.Summary(lctx, id)
	})
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	sum := l.sum
	return sum.Initiator, &sum, nil
}

// ownerAllows reports whether caller may act on a session of owner without
// asking the app's hook: it is the owner, or a service whose keys-file
// grant names the owner. On an open server everyone is Anonymous, the
// owner of every session it started.
func (s *Server) ownerAllows(caller, owner *auth.Principal) bool {
	if owner == nil {
		return s.Open()
	}
	return caller.ActsFor(owner)
}

// allows applies ownerAllows, then the caller's review grant, then the
// app's hook.
func (s *Server) allows(ctx context.Context, a SessionAccess) bool {
	if s.ownerAllows(a.Caller, a.Owner) || reviewerAllows(a) {
		return true
	}
	return s.opts.AuthorizeSession != nil && s.opts.AuthorizeSession(ctx, a)
}

// reviewerAllows applies the caller's keys-file review grant
// (auth.ReviewGrant): on a session of an owner it covers, a reviewer may
// stream, read the decision record and answer approvals — only approvals,
// so Requests must hold the requests answered, each one an approval. Who
// may settle an approval is then its response policy's business (or, for
// a tool without one, its requester's only).
func reviewerAllows(a SessionAccess) bool {
	switch a.Action {
	case ActionStream, ActionDecisions:
	case ActionRespond:
		if len(a.Requests) == 0 {
			return false
		}
		for _, r := range a.Requests {
			if r.Kind != protocol.KindToolApproval {
				return false
			}
		}
	default:
		return false
	}
	return a.Caller.MayReview(a.Owner)
}

// forbidden is the refusal of a session route: 403 forbidden. (Not 404:
// see docs/http-api.md, "Authorization".)
func (s *Server) forbidden(a SessionAccess) error {
	s.log.Info("api: session access refused", "session", a.SessionID, "action", a.Action, "caller", a.Caller.ID, "callerType", a.Caller.Type)
	return errorf(http.StatusForbidden, CodeForbidden, "principal %q may not %s session %s: it belongs to another principal", a.Caller.ID, a.Action, a.SessionID)
}

// authorize checks the caller of a session route before anything reaches
// the session's workflow. It returns the session's summary when it had to
// read it (nil when the owner was remembered).
func (s *Server) authorize(ctx context.Context, id, action string, a SessionAccess) (*signals.SessionSummary, error) {
	sum, ended, err := s.authorizeEnded(ctx, id, action, a)
	if ended != nil {
		return nil, ended
	}
	return sum, err
}

// authorizeEnded is authorize that tells a closed session apart: ended is
// set (and err nil) when the session's workflow has closed and the caller
// may act on it, as its memo names its owner. A closed session whose owner
// is unknown is refused with its 410, its reason left out.
func (s *Server) authorizeEnded(ctx context.Context, id, action string, a SessionAccess) (*signals.SessionSummary, *sessions.EndedError, error) {
	a.SessionID, a.Action = id, action
	if a.Caller == nil {
		a.Caller = Caller(ctx)
	}
	owner, sum, err := s.owner(ctx, id)
	var ended *sessions.EndedError
	if errors.As(err, &ended) {
		// A closed session: only those who may act on it learn why it
		// closed (an operator's reason may carry customer data); others
		// are refused as for any session they may not see.
		if owner == nil {
			owner = ended.Initiator
		}
		if owner == nil && !s.Open() {
			e := *ended
			e.Reason = ""
			return nil, nil, &e
		}
		a.Owner = owner
		if !s.allows(ctx, a) {
			return nil, nil, s.forbidden(a)
		}
		return nil, ended, nil
	}
	if err != nil {
		return nil, nil, err
	}
	a.Owner = owner
	if !s.allows(ctx, a) {
		return sum, nil, s.forbidden(a)
	}
	return sum, nil, nil
}

// ---- open mode: loopback only ----

// isLoopbackHost reports whether a Host header (host, host:port, [v6]:port)
// names this machine: localhost, 127.0.0.0/8 or ::1.
func isLoopbackHost(hostport string) bool {
	h := strings.TrimSpace(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackAddr reports whether a listen address (host:port) binds only
// loopback interfaces; ":4111" and "0.0.0.0:4111" bind all of them.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return host != "" && isLoopbackHost(host)
}

// isLoopbackOrigin reports whether a browser Origin is a page served from
// this machine (http(s)://localhost:3000 …).
func isLoopbackOrigin(origin string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	if !ok {
		return false
	}
	return isLoopbackHost(rest)
}

// ErrInsecureOpen is what New answers for an open server on a non-loopback
// address without Options.InsecureOpen.
var ErrInsecureOpen = errors.New("refusing to serve the eve API without API keys on a non-loopback address")

// ---- idempotent sends ----

// MaxIdempotencyKeyLength bounds the Idempotency-Key header.
const MaxIdempotencyKeyLength = 255

// idempotencyKey reads the Idempotency-Key header ("" when absent).
func idempotencyKey(r *http.Request) (string, error) {
	k := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if len(k) > MaxIdempotencyKeyLength {
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "Idempotency-Key is %d bytes; the limit is %d", len(k), MaxIdempotencyKeyLength)
	}
	for _, c := range k {
		if c < 0x20 || c > 0x7e {
			return "", errorf(http.StatusBadRequest, CodeBadRequest, "Idempotency-Key must be printable ASCII")
		}
	}
	return k, nil
}

// derived ids of an idempotent send: the same caller, session and key
// always give the same Update ID and delivery id (and, for a create, the
// same session id), so a retry is deduplicated by Temporal (the Update ID,
// within a run) and by the session workflow (its delivery ids, across
// continue-as-new).
type derived struct {
	updateID, deliveryID, sessionID string
}

func deriveIDs(caller *auth.Principal, sessionID, key string) derived {
	sum := func(what string) [32]byte {
		return sha256.Sum256([]byte("eve.send/v1\x00" + what + "\x00" + caller.Type + "\x00" + caller.ID + "\x00" + sessionID + "\x00" + key))
	}
	asULID := func(b [32]byte) string {
		var u ulid.ULID
		copy(u[:], b[:16])
		return u.String()
	}
	upd := sum("update")
	return derived{
		updateID:   "eve.send." + hex.EncodeToString(upd[:16]),
		deliveryID: "dlv_" + asULID(sum("delivery")),
		sessionID:  "ses_" + asULID(sum("session")),
	}
}
