package connections

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/tools"
)

// MaxStdioProcesses bounds the processes of one stdio connection on a
// worker: calls beyond it wait for a process to be free.
const MaxStdioProcesses = 8

// A stdio server serves one call at a time: a server's requests
// (elicitation/create) carry nothing that names the call they belong to,
// so the process a call holds is the only way to route them to the
// call's person. Processes are started as concurrent calls need them, up
// to MaxStdioProcesses, and kept for the worker's later calls until
// Set.Close.

// stdioPool is one stdio connection's processes on this worker.
type stdioPool struct {
	c    *Connection
	mu   sync.Mutex
	idle []*stdioProc
	all  map[*stdioProc]bool
	free chan struct{} // a process was returned or ended
}

// stdioProc is one server process and the call that holds it.
type stdioProc struct {
	cs  *mcp.ClientSession
	mux *muxConn
	mu  sync.Mutex
	// call holds the process (nil during discovery): its progress keeps
	// it alive, its elicitations ask its person.
	call *tools.Context
}

func (p *stdioProc) holder() *tools.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.call
}

func newStdioPool(c *Connection) *stdioPool {
	return &stdioPool{c: c, all: map[*stdioProc]bool{}, free: make(chan struct{}, 1)}
}

// take returns a free process for call (nil: discovery), starting one
// when none is free and fewer than MaxStdioProcesses run.
func (sp *stdioPool) take(ctx context.Context, call *tools.Context) (*stdioProc, error) {
	for {
		sp.mu.Lock()
		if n := len(sp.idle); n > 0 {
			p := sp.idle[n-1]
			sp.idle = sp.idle[:n-1]
			sp.mu.Unlock()
			p.mu.Lock()
			p.call = call
			p.mu.Unlock()
			return p, nil
		}
		if len(sp.all) < MaxStdioProcesses {
			p := &stdioProc{call: call}
			sp.all[p] = true
			sp.mu.Unlock()
			if err := sp.start(ctx, p); err != nil {
				sp.mu.Lock()
				delete(sp.all, p)
				sp.mu.Unlock()
				return nil, err
			}
			return p, nil
		}
		sp.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("all %d processes of the MCP server %q are busy: %w", MaxStdioProcesses, sp.c.MCP.Command, ctx.Err())
		case <-sp.free:
		}
	}
}

// put returns a process to the pool.
func (sp *stdioPool) put(p *stdioProc) {
	p.mu.Lock()
	p.call = nil
	p.mu.Unlock()
	sp.mu.Lock()
	if sp.all[p] {
		sp.idle = append(sp.idle, p)
	}
	sp.mu.Unlock()
	sp.signal()
}

func (sp *stdioPool) signal() {
	select {
	case sp.free <- struct{}{}:
	default:
	}
}

func (sp *stdioPool) start(ctx context.Context, p *stdioProc) error {
	c := sp.c
	cmd := exec.Command(c.MCP.Command, c.MCP.Args...)
	cmd.Env = append(os.Environ(), c.MCP.Env...)
	cmd.Dir = c.MCP.Dir
	opts := &mcp.ClientOptions{
		Capabilities: callCapabilities(),
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			if call := p.holder(); call != nil {
				call.Heartbeat()
			}
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			call := p.holder()
			if call == nil {
				return declineElicitation(context.Background(), req)
			}
			return elicit(call, c, req)
		},
	}
	// The process outlives the activity that started it.
	t := &muxTransport{inner: &mcp.CommandTransport{Command: cmd}}
	cs, err := mcp.NewClient(clientInfo, opts).Connect(context.WithoutCancel(ctx), t, nil)
	if err != nil {
		return fmt.Errorf("start the MCP server %q: %w", c.MCP.Command, err)
	}
	p.cs, p.mux = cs, t.conn
	go func() {
		_ = cs.Wait()
		sp.mu.Lock()
		delete(sp.all, p)
		for i, q := range sp.idle {
			if q == p {
				sp.idle = append(sp.idle[:i], sp.idle[i+1:]...)
				break
			}
		}
		sp.mu.Unlock()
		sp.signal()
	}()
	return nil
}

func (sp *stdioPool) close() error {
	sp.mu.Lock()
	procs := make([]*stdioProc, 0, len(sp.all))
	for p := range sp.all {
		procs = append(procs, p)
	}
	sp.all, sp.idle = map[*stdioProc]bool{}, nil
	sp.mu.Unlock()
	var first error
	for _, p := range procs {
		if p.cs != nil {
			if err := p.cs.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// stdioSession takes a process of c's pool for call (nil: discovery);
// release returns it.
func (r *runtime) stdioSession(ctx context.Context, c *Connection, call *tools.Context) (*stdioProc, func(), error) {
	key := c.identity()
	r.mu.Lock()
	sp := r.stdio[key]
	if sp == nil {
		sp = newStdioPool(c)
		r.stdio[key] = sp
	}
	r.mu.Unlock()
	p, err := sp.take(ctx, call)
	if err != nil {
		return nil, nil, err
	}
	return p, func() { sp.put(p) }, nil
}

// callCapabilities is what eve declares to a server for its calls: it
// answers elicitations in form and URL mode (asking the session's person).
func callCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
}
