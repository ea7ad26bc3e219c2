package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// muxTransport starts a stdio server as mcp.CommandTransport does and
// hands the go-sdk client a muxConn.
type muxTransport struct {
	inner *mcp.CommandTransport
	conn  *muxConn
}

func (t *muxTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &muxConn{Connection: c, waiting: map[string]chan *jsonrpc.Response{}, asked: map[any]string{},
		support: map[string]string{}, closed: make(chan struct{})}
	return t.conn, nil
}

// muxConn is a stdio server's connection as the go-sdk client reads it,
// with eve's own requests on the side: tasks/* and task-augmented
// tools/call, which the client has no API for, are answered here and
// never reach the client. The client's initialize and tools/list answers
// are read on the way for what its types drop: the tasks capability and
// each tool's execution.taskSupport. The server's requests (an
// elicitation of a task's) still go to the client, and so to the call
// that holds the process.
type muxConn struct {
	mcp.Connection
	next    atomic.Int64
	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response
	asked   map[any]string // the client's initialize and tools/list, by id
	tasks   bool
	support map[string]string
	closed  chan struct{}
	once    sync.Once
}

func (c *muxConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() && (req.Method == "initialize" || req.Method == "tools/list") {
		c.mu.Lock()
		c.asked[req.ID.Raw()] = req.Method
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *muxConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.once.Do(func() { close(c.closed) })
			return nil, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		if id, ok := resp.ID.Raw().(string); ok && strings.HasPrefix(id, "eve-") {
			c.mu.Lock()
			ch := c.waiting[id]
			delete(c.waiting, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- resp
			}
			continue
		}
		c.observe(resp)
		return msg, nil
	}
}

// observe reads the client's initialize and tools/list answers.
func (c *muxConn) observe(resp *jsonrpc.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	method := c.asked[resp.ID.Raw()]
	delete(c.asked, resp.ID.Raw())
	switch method {
	case "initialize":
		var init struct {
			Capabilities json.RawMessage `json:"capabilities"`
		}
		if json.Unmarshal(resp.Result, &init) == nil {
			c.tasks = runsToolTasks(init.Capabilities)
		}
	case "tools/list":
		var page struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		}
		if json.Unmarshal(resp.Result, &page) == nil {
			for _, t := range page.Tools {
				c.support[t.Name] = t.Execution.TaskSupport
			}
		}
	}
}

// runsTask reports whether the server runs name as a task.
func (c *muxConn) runsTask(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.support[name]
	return c.tasks && (ts == taskOptional || ts == taskRequired)
}

// errProcessEnded is a stdio server that exited during a request.
var errProcessEnded = errors.New("the stdio MCP server's process ended")

// call sends eve's own request and waits for its answer.
func (c *muxConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := fmt.Sprintf("eve-%d", c.next.Add(1))
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	rid, err := jsonrpc.MakeID(id)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
	}()
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: raw}); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			var we *jsonrpc.Error
			if errors.As(resp.Error, &we) {
				return nil, fmt.Errorf("%s: %w", method, &rpcError{Code: we.Code, Message: we.Message, Data: we.Data})
			}
			return nil, fmt.Errorf("%s: %w", method, resp.Error)
		}
		return resp.Result, nil
	case <-c.closed:
		return nil, fmt.Errorf("%s: %w", method, errProcessEnded)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runsToolTasks reads a server's capabilities: does it run tools/call as
// tasks (tasks.requests.tools.call)?
func runsToolTasks(caps json.RawMessage) bool {
	var c struct {
		Tasks *struct {
			Requests *struct {
				Tools *struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	_ = json.Unmarshal(caps, &c)
	return c.Tasks != nil && c.Tasks.Requests != nil && c.Tasks.Requests.Tools != nil && len(c.Tasks.Requests.Tools.Call) > 0
}
