package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/internal/httpbody"
)

// Serve runs the server on t (for stdio, &mcp.StdioTransport{} or an
// mcp.IOTransport) with the Tasks layer, until the client disconnects or
// ctx ends.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	return s.srv.Run(ctx, s.Transport(t))
}

// Transport wraps t with the Tasks layer, for mcp.Server.Connect.
func (s *Server) Transport(t mcp.Transport) mcp.Transport { return &taskTransport{inner: t, s: s} }

type taskTransport struct {
	inner mcp.Transport
	s     *Server
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tc := &taskConn{Connection: c, s: t.s, ctx: tctx, cancel: cancel, initIDs: map[any]bool{}}
	tc.status = newStatusWatch(tctx, t.s, t.s.opts.UserID, c.Write)
	return tc, nil
}

// SupportsProtocolVersion forwards to the wrapped transport.
func (t *taskTransport) SupportsProtocolVersion(v string) bool {
	if p, ok := t.inner.(mcp.ProtocolVersionSupporter); ok {
		return p.SupportsProtocolVersion(v)
	}
	return true
}

// taskConn answers Tasks requests itself and hands the rest to the SDK.
type taskConn struct {
	mcp.Connection
	s       *Server
	ctx     context.Context
	cancel  context.CancelFunc
	tasks   atomic.Bool // the client announced Tasks in initialize
	mu      sync.Mutex
	initIDs map[any]bool
	status  *statusWatch // pushes the status of the tasks created here
}

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			return msg, nil
		}
		if isInitMethod(req.Method) && req.IsCall() {
			c.mu.Lock()
			c.initIDs[req.ID.Raw()] = true
			c.mu.Unlock()
			if req.Method == "initialize" {
				c.tasks.Store(initAnnouncesTasks(req.Params))
				req.Params = normalizeInit(req.Params)
			}
			return req, nil
		}
		if e, p, ok := c.s.extRoute(req); ok {
			// The tasks extension over stdio: the same answers as over HTTP
			// (no headers to check on this transport).
			go func() {
				resp := &jsonrpc.Response{ID: req.ID}
				res, err := c.s.extAnswer(c.ctx, c.s.opts.UserID, req.Method, e, p)
				if err == nil {
					resp.Result, err = json.Marshal(res)
				}
				if err != nil {
					resp.Result, resp.Error = nil, rpcErrorOf(err)
				}
				if err := c.Connection.Write(c.ctx, resp); err != nil {
					c.s.log.Debug("mcpserver: write task answer", "method", req.Method, "err", err)
				}
				if m, ok := res.(map[string]any); ok && resp.Error == nil && m["resultType"] == "task" {
					c.status.watch(m["taskId"].(string), m["status"].(string), true) // after the answer
				}
			}()
			continue
		}
		if !intercepts(req) {
			return msg, nil
		}
		negotiated := c.tasks.Load() || requestAnnouncesTasks(req.Params)
		go func() {
			resp := c.s.handleTask(c.ctx, c.s.opts.UserID, negotiated, req)
			if err := c.Connection.Write(c.ctx, resp); err != nil {
				c.s.log.Debug("mcpserver: write task answer", "method", req.Method, "err", err)
			}
			var created struct {
				Task *Task `json:"task"`
			}
			if req.Method == "tools/call" && resp.Error == nil && json.Unmarshal(resp.Result, &created) == nil && created.Task != nil {
				c.status.watch(created.Task.TaskID, created.Task.Status, false) // after the answer
			}
		}()
	}
}

func (c *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() && resp.Error == nil {
		c.mu.Lock()
		init := c.initIDs[resp.ID.Raw()]
		delete(c.initIDs, resp.ID.Raw())
		c.mu.Unlock()
		if init {
			cp := *resp
			cp.Result = patchInitResult(resp.Result)
			msg = &cp
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *taskConn) Close() error {
	c.status.close()
	c.cancel()
	return c.Connection.Close()
}

// HTTPHandler serves MCP's streamable HTTP transport with the Tasks layer.
// nil options mean JSON responses (no SSE) and the SDK's defaults.
//
// Every request, the ones the Tasks layer answers itself included, first
// passes the SDK's checks, in the SDK's order and with its answers: the
// DNS-rebinding Host check (on a loopback listener, a Host that is not
// loopback is 403, localhost in any case being loopback;
// opts.DisableLocalhostProtection turns it off), the
// cross-origin check (opts.CrossOriginProtection, or by default
// http.NewCrossOriginProtection with Options.TrustedOrigins: a browser's
// cross-origin POST is 403), and for POST the Content-Type
// (application/json, else 415) and Accept (application/json and
// text/event-stream, else 400) checks. Nothing runs before they pass.
// Then a POST without Mcp-Session-Id is 400 unless it is initialize (or
// the SDK is stateless, or the request speaks the sessionless protocol).
//
// Idle sessions expire after Options.SessionTimeout (opts.SessionTimeout,
// when set, wins); the layer keeps the timer because task requests never
// reach the SDK; like the SDK's, it does not run while a request of the
// session is in flight. An expired session's tasks are forgotten.
func (s *Server) HTTPHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	o := mcp.StreamableHTTPOptions{JSONResponse: true, Logger: s.log}
	if opts != nil {
		o = *opts
	}
	timeout := s.opts.SessionTimeout
	if o.SessionTimeout > 0 {
		timeout = o.SessionTimeout
	}
	origin := o.CrossOriginProtection
	if origin == nil {
		origin = http.NewCrossOriginProtection()
		for _, t := range s.opts.TrustedOrigins {
			if err := origin.AddTrustedOrigin(t); err != nil {
				s.log.Warn("mcpserver: ignoring a trusted origin", "origin", t, "err", err)
			}
		}
	}
	// This layer checks and expires sessions; the SDK's copies would only
	// repeat the checks, and its timer cannot see task requests. Its Host
	// check is the SDK's made case-insensitive (host names are: RFC 4343),
	// which the SDK's own would undo.
	checkHost := !o.DisableLocalhostProtection
	o.SessionTimeout, o.CrossOriginProtection, o.DisableLocalhostProtection = 0, nil, true
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &o)
	// 2026-07-28 is stateless: each request carries its version and the
	// client's capabilities in _meta, and the SDK's stateless handler
	// serves it (server/discover, header validation, input-required
	// results). Requests choose their revision (see modern).
	so := o
	so.Stateless = true
	modern := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &so)
	// A stateless request has no other stream than its own response: one
	// that asks for progress is answered as server-sent events, so its
	// notifications/progress travel before the result.
	sse := so
	sse.JSONResponse = false
	modernSSE := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &sse)
	return &httpTasks{s: s, inner: inner, modern: modern, modernSSE: modernSSE, sessions: map[string]*httpSession{},
		timeout: timeout, origin: origin, checkHost: checkHost, stateless: o.Stateless}
}

const (
	sessionHeader = "Mcp-Session-Id"
	maxBody       = 4 << 20
)

type httpTasks struct {
	s         *Server
	inner     http.Handler  // sessions (2025-11-25 and older)
	modern    http.Handler  // stateless requests (2026-07-28 and newer)
	modernSSE http.Handler  // the same, answering as server-sent events
	timeout   time.Duration // idle sessions expire; <= 0: never
	origin    *http.CrossOriginProtection
	checkHost bool
	stateless bool // the SDK's stateless mode: no session is required
	mu        sync.Mutex
	sessions  map[string]*httpSession // sessions this handler initialized
}

type httpSession struct {
	timer *time.Timer
	refs  int  // requests in flight: the idle timer runs only at 0
	tasks bool // the client announced Tasks in initialize
}

// begin notes a request of session sid: the session's idle timer stops
// until the matching end. It reports whether the session is known
// (initialized here and not expired).
func (h *httpTasks) begin(sid string) bool {
	if sid == "" {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.sessions[sid]
	if ss == nil {
		return false
	}
	if ss.refs == 0 && ss.timer != nil {
		ss.timer.Stop()
	}
	ss.refs++
	return true
}

// end restarts the idle timer once no request of the session is in flight.
func (h *httpTasks) end(sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.sessions[sid]
	if ss == nil || ss.refs == 0 {
		return
	}
	ss.refs--
	if ss.refs == 0 && ss.timer != nil {
		ss.timer.Reset(h.timeout)
	}
}

func (h *httpTasks) addSession(sid string, tasks bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[sid] != nil {
		return
	}
	ss := &httpSession{tasks: tasks}
	if h.timeout > 0 {
		ss.timer = time.AfterFunc(h.timeout, func() { h.expire(sid, ss) })
	}
	h.sessions[sid] = ss
}

// negotiated reports whether session sid announced Tasks.
func (h *httpTasks) negotiated(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.sessions[sid]
	return ss != nil && ss.tasks
}

// forget drops a session and its tasks.
func (h *httpTasks) forget(sid string) {
	h.mu.Lock()
	ss := h.sessions[sid]
	delete(h.sessions, sid)
	h.mu.Unlock()
	if ss != nil && ss.timer != nil {
		ss.timer.Stop()
	}
}

// expire ends an idle session: the SDK closes it (answering later
// requests 404 "session not found", so clients start a new one) and its
// tasks are forgotten. Their executions go on.
func (h *httpTasks) expire(sid string, ss *httpSession) {
	h.mu.Lock()
	if h.sessions[sid] != ss || ss.refs > 0 {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.forget(sid)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil) // the SDK's handler ignores the path
	if err != nil {
		return
	}
	req.Header.Set(sessionHeader, sid)
	h.inner.ServeHTTP(&recorder{header: http.Header{}}, req)
	h.s.log.Debug("mcpserver: idle session expired", "session", sid, "timeout", h.timeout)
}

// refuse runs the SDK's transport checks (see HTTPHandler) and answers a
// request that fails one; nothing else has looked at the request yet.
func (h *httpTasks) refuse(w http.ResponseWriter, r *http.Request) bool {
	if h.checkHost {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if isLoopback(la.String()) && !isLoopback(r.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
				return true
			}
		}
	}
	if err := h.origin.Check(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return true
	}
	if r.Method != http.MethodPost {
		return false
	}
	if baseMediaType(r.Header.Get("Content-Type")) != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return true
	}
	if jsonOK, streamOK := streamableAccepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return true
	}
	return false
}

// isLoopback is the SDK's test (internal/util.IsLoopback), with the name
// compared without case: localhost (LOCALHOST too) or a loopback IP, with
// or without a port.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func baseMediaType(value string) string {
	mt, _, err := mime.ParseMediaType(value)
	if err != nil {
		return ""
	}
	return mt
}

// streamableAccepts is the SDK's Accept test.
func streamableAccepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

func (h *httpTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.refuse(w, r) {
		return
	}
	sid := r.Header.Get(sessionHeader)
	known := h.begin(sid)
	if known {
		defer h.end(sid)
	}
	if r.Method == http.MethodDelete && sid != "" {
		h.forget(sid)
	}
	if r.Method != http.MethodPost {
		if sid == "" && modernHeader(r) {
			h.modern.ServeHTTP(w, r)
			return
		}
		h.inner.ServeHTTP(w, r)
		return
	}
	body, err := httpbody.Read(w, r, maxBody)
	if err != nil {
		// A body that does not arrive within its deadline (the server's
		// httpbody.Deadline) is 408, not a size problem.
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, httpbody.ErrTooLarge):
			status = http.StatusRequestEntityTooLarge
		case errors.Is(err, httpbody.ErrTimeout):
			status = http.StatusRequestTimeout
		}
		http.Error(w, err.Error(), status)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		if sid == "" && modernHeader(r) {
			h.modern.ServeHTTP(w, r)
			return
		}
		h.inner.ServeHTTP(w, r)
		return
	}
	if sid == "" && !h.stateless && (modernHeader(r) || perRequestProtocol(req) || req.Method == "server/discover") {
		if h.serveTasksExt(w, r, req) {
			return
		}
		if wantsProgress(req) {
			h.modernSSE.ServeHTTP(w, r)
			return
		}
		h.modern.ServeHTTP(w, r)
		return
	}
	if sid == "" && !h.stateless && req.Method != "initialize" && !sessionless(r, req) {
		// The SDK (go-sdk v1.8.0, StreamableHTTPHandler.serveStatefulPOST)
		// opens a fresh session for any POST without Mcp-Session-Id and
		// answers a call in it with HTTP 200 and a JSON-RPC error of code 0
		// ("method ... is invalid during session initialization"). The
		// transport spec (2025-11-25, Session Management) asks servers that
		// require a session for HTTP 400 here. Upstream, that POST path
		// could refuse non-initialize messages before creating a session;
		// until it does, this layer answers first.
		http.Error(w, "Bad Request: this server requires a session: send the Mcp-Session-Id header that the initialize response returned, or initialize first", http.StatusBadRequest)
		return
	}
	switch {
	case isInitMethod(req.Method) && req.IsCall():
		tasks := req.Method == "initialize" && initAnnouncesTasks(req.Params)
		if req.Method == "initialize" {
			req.Params = normalizeInit(req.Params)
			if b, err := jsonrpc.EncodeMessage(req); err == nil {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
		}
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		h.inner.ServeHTTP(rec, r)
		if id := rec.header.Get(sessionHeader); id != "" {
			h.addSession(id, tasks)
		}
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		out := patchBody(rec.body.Bytes(), rec.header.Get("Content-Type"))
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.status)
		_, _ = w.Write(out)
	case intercepts(req):
		if (sid != "" && !known) || (sid == "" && !perRequestProtocol(req)) {
			// Unknown, expired or missing session: the SDK answers as it
			// does for any request.
			h.inner.ServeHTTP(w, r)
			return
		}
		user, err := h.s.user(r.Header, auth.TokenInfoFromContext(r.Context()))
		var resp *jsonrpc.Response
		if err != nil {
			resp = &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}}
		} else {
			negotiated := (known && h.negotiated(sid)) || requestAnnouncesTasks(req.Params)
			resp = h.s.handleTask(r.Context(), user, negotiated, req)
		}
		b, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	default:
		h.inner.ServeHTTP(w, r)
	}
}

// sessionless reports a message of the sessionless protocol (2026-07-28),
// which needs no Mcp-Session-Id: a call carries its version in _meta, a
// notification only in the Mcp-Protocol-Version header.
func sessionless(r *http.Request, req *jsonrpc.Request) bool {
	return perRequestProtocol(req) || r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

// modernHeader reports a request whose Mcp-Protocol-Version header names
// the stateless protocol (2026-07-28) or a later one: without a session,
// the version a request states chooses its revision.
func modernHeader(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

// perRequestProtocol reports a request of the sessionless protocol
// (2026-07-28), which carries its protocol version in _meta.
func perRequestProtocol(req *jsonrpc.Request) bool {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	return json.Unmarshal(req.Params, &p) == nil && p.Meta["io.modelcontextprotocol/protocolVersion"] != nil
}

// patchBody adds the tasks capability to an initialize answer, sent as
// JSON or as server-sent events.
func patchBody(body []byte, contentType string) []byte {
	if strings.HasPrefix(contentType, "text/event-stream") {
		var out bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 0, 64<<10), maxBody)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				line = "data: " + string(patchMessage([]byte(data)))
			}
			out.WriteString(line)
			out.WriteByte('\n')
		}
		if sc.Err() != nil {
			return body
		}
		return out.Bytes()
	}
	return patchMessage(body)
}

func patchMessage(b []byte) []byte {
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(b))
	if err != nil {
		return b
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil {
		return b
	}
	resp.Result = patchInitResult(resp.Result)
	out, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return b
	}
	return out
}

// recorder buffers an answer so it can be patched.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
func (r *recorder) Flush() {}

// wantsProgress reports a request that carries _meta.progressToken.
func wantsProgress(req *jsonrpc.Request) bool {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	return json.Unmarshal(req.Params, &p) == nil && len(p.Meta.Token) > 0 && string(p.Meta.Token) != "null"
}
