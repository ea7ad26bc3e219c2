package mcpserver

// Task status notifications (notifications/tasks/status) on stdio: the
// tasks a connection created are watched through the notify bus
// (Options.Bus, which the execution workflow tells of every change of an
// execution's state), so the client hears of a change when it happens
// instead of polling tasks/get. Without a bus nothing is sent and clients
// poll at pollInterval, as the spec allows.

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const methodTaskStatus = "notifications/tasks/status"

// statusWatch follows one connection's tasks.
type statusWatch struct {
	s     *Server
	ctx   context.Context
	write func(context.Context, jsonrpc.Message) error
	user  string

	mu     sync.Mutex
	tasks  map[string]*watched
	dirty  map[string]bool
	wake   chan struct{}
	cancel func()
}

type watched struct {
	ext  bool   // a tasks-extension task (else 2025-11-25)
	last string // the status last sent
}

func newStatusWatch(ctx context.Context, s *Server, user string, write func(context.Context, jsonrpc.Message) error) *statusWatch {
	return &statusWatch{s: s, ctx: ctx, user: user, write: write, tasks: map[string]*watched{}, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// watch starts following task id (status as created).
func (w *statusWatch) watch(id, status string, ext bool) {
	if w == nil || w.s.opts.Bus == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tasks[id] = &watched{ext: ext, last: status}
	if w.cancel == nil {
		w.cancel = w.s.opts.Bus.Subscribe(w.heard)
		go w.run()
	}
	// A change may have come before the subscription: look once.
	w.dirty[id] = true
	w.signal()
}

// heard is the bus's callback: it must not block.
func (w *statusWatch) heard(id string, _ int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id == "" { // notifications may have been lost: look at every task
		for t := range w.tasks {
			w.dirty[t] = true
		}
	} else if w.tasks[id] != nil {
		w.dirty[id] = true
	}
	w.signal()
}

func (w *statusWatch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *statusWatch) run() {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		w.mu.Lock()
		ids := make([]string, 0, len(w.dirty))
		for id := range w.dirty {
			ids = append(ids, id)
		}
		clear(w.dirty)
		w.mu.Unlock()
		for _, id := range ids {
			w.push(id)
		}
	}
}

// push sends the task's status if it changed since the last one sent; a
// terminal task is no longer followed.
func (w *statusWatch) push(id string) {
	w.mu.Lock()
	t := w.tasks[id]
	w.mu.Unlock()
	if t == nil {
		return
	}
	var (
		params any
		status string
	)
	if t.ext {
		res, err := w.s.tasksExt(w.ctx, w.user, "tasks/get", nil, modernParams{TaskID: id})
		m, ok := res.(map[string]any)
		if err != nil || !ok {
			return
		}
		delete(m, "resultType")
		params, status = m, m["status"].(string)
	} else {
		b, _ := json.Marshal(map[string]string{"taskId": id})
		res, err := w.s.task(w.ctx, w.user, true, &jsonrpc.Request{Method: "tasks/get", Params: b})
		task, ok := res.(Task)
		if err != nil || !ok {
			return
		}
		params, status = task, task.Status
	}
	terminal := status == TaskCompleted || status == TaskFailed || status == TaskCancelled
	w.mu.Lock()
	changed := status != t.last
	t.last = status
	if terminal {
		delete(w.tasks, id)
	}
	w.mu.Unlock()
	if !changed {
		return
	}
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	if err := w.write(w.ctx, &jsonrpc.Request{Method: methodTaskStatus, Params: b}); err != nil {
		w.s.log.Debug("mcpserver: task status notification", "task", id, "err", err)
	}
}

func (w *statusWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
}
