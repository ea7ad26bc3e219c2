package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

var connSeq atomic.Int64

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &taskConn{Connection: c, s: t.s, ctx: tctx, cancel: cancel, initIDs: map[any]bool{},
		owner: fmt.Sprintf("conn:%d\x00%s", connSeq.Add(1), t.s.opts.UserID)}, nil
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
	owner   string
	mu      sync.Mutex
	initIDs map[any]bool
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
				req.Params = normalizeInit(req.Params)
			}
			return req, nil
		}
		if !intercepts(req) {
			return msg, nil
		}
		go func() {
			resp := c.s.handleTask(c.ctx, c.owner, c.s.opts.UserID, req)
			if err := c.Connection.Write(c.ctx, resp); err != nil {
				c.s.log.Debug("mcpserver: write task answer", "method", req.Method, "err", err)
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
	c.cancel()
	return c.Connection.Close()
}

// HTTPHandler serves MCP's streamable HTTP transport with the Tasks layer.
// nil options mean JSON responses (no SSE) and the SDK's defaults.
func (s *Server) HTTPHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	if opts == nil {
		opts = &mcp.StreamableHTTPOptions{JSONResponse: true, Logger: s.log}
	}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, opts)
	return &httpTasks{s: s, inner: inner, sessions: map[string]bool{}}
}

const (
	sessionHeader = "Mcp-Session-Id"
	maxBody       = 4 << 20
)

type httpTasks struct {
	s        *Server
	inner    http.Handler
	mu       sync.Mutex
	sessions map[string]bool // sessions this handler initialized
}

func (h *httpTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(sessionHeader)
	if r.Method == http.MethodDelete && sid != "" {
		h.mu.Lock()
		delete(h.sessions, sid)
		h.mu.Unlock()
	}
	if r.Method != http.MethodPost {
		h.inner.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		h.inner.ServeHTTP(w, r)
		return
	}
	switch {
	case isInitMethod(req.Method) && req.IsCall():
		if req.Method == "initialize" {
			req.Params = normalizeInit(req.Params)
			if b, err := jsonrpc.EncodeMessage(req); err == nil {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
		}
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		h.inner.ServeHTTP(rec, r)
		if id := rec.header.Get(sessionHeader); id != "" {
			h.mu.Lock()
			h.sessions[id] = true
			h.mu.Unlock()
		}
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		out := patchBody(rec.body.Bytes(), rec.header.Get("Content-Type"))
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.status)
		_, _ = w.Write(out)
	case intercepts(req):
		h.mu.Lock()
		known := h.sessions[sid]
		h.mu.Unlock()
		if (sid != "" && !known) || (sid == "" && !perRequestProtocol(req)) {
			// Unknown or missing session: the SDK answers as it does for any request.
			h.inner.ServeHTTP(w, r)
			return
		}
		user, err := h.s.user(r.Header)
		var resp *jsonrpc.Response
		if err != nil {
			resp = &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}}
		} else {
			resp = h.s.handleTask(r.Context(), "http:"+sid+"\x00"+user, user, req)
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
