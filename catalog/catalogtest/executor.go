package catalogtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/eve-temporal/eve/catalog"
)

// Handler runs one fake tool.
type Handler func(ctx context.Context, opts catalog.ExecuteToolOptions) (json.RawMessage, error)

// Executor is an in-memory catalog.Executor. Tools without a handler echo
// their input back as {"tool": name, "input": input}.
type Executor struct {
	Handlers map[string]Handler

	mu    sync.Mutex
	calls []Call
	n     int
}

// Call records one Execute.
type Call struct {
	Tool string
	Opts catalog.ExecuteToolOptions
}

// Execute implements catalog.Executor.
func (e *Executor) Execute(ctx context.Context, name string, opts catalog.ExecuteToolOptions) (catalog.ExecutionResult, error) {
	e.mu.Lock()
	e.n++
	id := fmt.Sprintf("exec_%d", e.n)
	e.calls = append(e.calls, Call{Tool: name, Opts: opts})
	h := e.Handlers[name]
	e.mu.Unlock()
	if h == nil {
		out, _ := json.Marshal(map[string]any{"tool": name, "input": opts.Input})
		return catalog.ExecutionResult{ID: id, Tool: name, Status: catalog.StatusSucceeded, Output: out}, nil
	}
	out, err := h(ctx, opts)
	if err != nil {
		return catalog.ExecutionResult{ID: id, Tool: name, Status: catalog.StatusFailed, Error: &catalog.ExecutionError{Message: err.Error(), Code: "tool_error"}}, nil
	}
	return catalog.ExecutionResult{ID: id, Tool: name, Status: catalog.StatusSucceeded, Output: out}, nil
}

// Calls returns the calls made so far.
func (e *Executor) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}
