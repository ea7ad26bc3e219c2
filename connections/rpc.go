package connections

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// rpcVersion is the MCP revision the raw client speaks by default: the one
// whose tasks (SEP-1686) the reference server and eve's own server serve.
// modernVersion is the stateless revision, whose tasks are the extension
// tasksExtension (SEP-2663): no session, and every request carries the
// revision and the client's capabilities in _meta and in headers.
const (
	rpcVersion     = "2025-11-25"
	modernVersion  = "2026-07-28"
	tasksExtension = "io.modelcontextprotocol/tasks"
)

// rpcClient is a small JSON-RPC client for MCP's streamable HTTP
// transport. The go-sdk client serves plain calls; this one serves what
// it has no API for: discovery that sees a tool's execution.taskSupport,
// and task-augmented calls (tasks/get, tasks/result, tasks/cancel),
// including resuming a task in the MCP session a crashed worker left,
// by its session id.
type rpcClient struct {
	url     string
	hc      *http.Client
	session string // Mcp-Session-Id, once initialized
	// modern: requests are stateless 2026-07-28 ones with the tasks
	// extension negotiated.
	modern bool
	next   atomic.Int64
	// serve answers the server's requests that arrive on a response
	// stream (elicitation/create while a task waits for input); nil
	// refuses them.
	serve func(ctx context.Context, method string, params json.RawMessage) (any, error)
	// notified sees the server's notifications (progress, task status).
	notified func(method string, params json.RawMessage)
}

// rpcError is a JSON-RPC error the server answered.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (JSON-RPC error %d)", e.Message, e.Code) }

// errSessionGone is an MCP session the server no longer knows (it
// restarted, or expired the session): a task in it cannot be resumed.
var errSessionGone = errors.New("the MCP server no longer knows the session (it restarted or expired it)")

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// initialize opens an MCP session and returns the server's capabilities.
func (c *rpcClient) initialize(ctx context.Context, capabilities map[string]any) (json.RawMessage, error) {
	res, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": rpcVersion,
		"capabilities":    capabilities,
		"clientInfo":      clientInfo,
	})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := c.notify(ctx, "notifications/initialized", map[string]any{}); err != nil {
		return nil, err
	}
	return init.Capabilities, nil
}

// call sends a request and returns its result.
func (c *rpcClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := "eve-" + strconv.FormatInt(c.next.Add(1), 10)
	var name string
	if c.modern {
		params, name = modernParams(params)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := c.postAs(ctx, body, method, name)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && method == "initialize" {
		c.session = s
	}
	want, _ := json.Marshal(id)
	var found *rpcMessage
	err = c.read(ctx, resp, func(m *rpcMessage) bool {
		if m.Method == "" && bytes.Equal(m.ID, want) {
			found = m
			return true
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if found == nil {
		return nil, fmt.Errorf("%s: the server ended its answer without a response", method)
	}
	if found.Error != nil {
		return nil, fmt.Errorf("%s: %w", method, found.Error)
	}
	return found.Result, nil
}

// notify sends a notification.
func (c *rpcClient) notify(ctx context.Context, method string, params any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, body)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}

// close ends the MCP session (DELETE), best effort.
func (c *rpcClient) close(ctx context.Context) {
	if c.session == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.headers(req)
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (c *rpcClient) headers(req *http.Request) {
	if c.modern {
		req.Header.Set("MCP-Protocol-Version", modernVersion)
		return
	}
	req.Header.Set("MCP-Protocol-Version", rpcVersion)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
}

// modernParams adds to a request's params the _meta of a stateless
// request, and returns the name its Mcp-Name header carries (a tool's, or
// a task's id).
func modernParams(params any) (map[string]any, string) {
	m := map[string]any{}
	if p, ok := params.(map[string]any); ok {
		for k, v := range p {
			m[k] = v
		}
	}
	m["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": modernCapabilities(),
	}
	name, _ := m["name"].(string)
	if id, ok := m["taskId"].(string); ok {
		name = id
	}
	return m, name
}

// modernCapabilities is what eve declares in each stateless request.
func modernCapabilities() map[string]any {
	caps := clientCapabilities()
	caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	return caps
}

func (c *rpcClient) post(ctx context.Context, body []byte) (*http.Response, error) {
	return c.postAs(ctx, body, "", "")
}

// postAs posts a message; a stateless request names its method and name
// in headers too.
func (c *rpcClient) postAs(ctx context.Context, body []byte, method, name string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.headers(req)
	if c.modern && method != "" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && c.session != "":
		resp.Body.Close()
		return nil, errSessionGone
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("the server answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// maxRPCMessage bounds one message the server sends (a tool's result is
// bounded again, smaller, by the call's output limit).
const maxRPCMessage = 32 << 20

// read hands each message of a response (one JSON body, or a stream of
// server-sent events) to done until it returns true. Server requests on
// the stream are answered; notifications are reported.
func (c *rpcClient) read(ctx context.Context, resp *http.Response, done func(*rpcMessage) bool) error {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxRPCMessage))
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		return c.handle(ctx, b, done)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxRPCMessage)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "":
			if data.Len() == 0 {
				continue
			}
			b := bytes.Clone(data.Bytes())
			data.Reset()
			var stop bool
			err := c.handle(ctx, b, func(m *rpcMessage) bool {
				stop = done(m)
				return stop
			})
			if err != nil || stop {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the server's event stream: %w", err)
	}
	return nil
}

func (c *rpcClient) handle(ctx context.Context, b []byte, done func(*rpcMessage) bool) error {
	var msgs []rpcMessage
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		if err := json.Unmarshal(b, &msgs); err != nil {
			return fmt.Errorf("the server sent a message that is not JSON-RPC: %w", err)
		}
	} else {
		var m rpcMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("the server sent a message that is not JSON-RPC: %w", err)
		}
		msgs = append(msgs, m)
	}
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Method != "" && len(m.ID) > 0:
			if err := c.answer(ctx, m); err != nil {
				return err
			}
		case m.Method != "":
			if c.notified != nil {
				c.notified(m.Method, m.Params)
			}
		case done(m):
			return nil
		}
	}
	return nil
}

// answer responds to a request of the server's.
func (c *rpcClient) answer(ctx context.Context, m *rpcMessage) error {
	out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	switch {
	case m.Method == "ping":
		out["result"] = map[string]any{}
	case c.serve != nil:
		res, err := c.serve(ctx, m.Method, m.Params)
		var re *rpcError
		switch {
		case errors.As(err, &re):
			out["error"] = re
		case err != nil:
			return err
		default:
			out["result"] = res
		}
	default:
		out["error"] = &rpcError{Code: -32601, Message: "eve does not answer " + m.Method + " here"}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, body)
	if err != nil {
		return fmt.Errorf("answering the server's %s: %w", m.Method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}
