// Package evetest runs eve against a real Temporal dev server in tests: a
// worker serving an agent on a private task queue, and a sessions service
// to drive it.
package evetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/internal/actionsvc"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Env is one test's eve: a client, a task queue and a sessions service.
type Env struct {
	T         testing.TB
	Server    *devserver.Server
	Client    client.Client
	TaskQueue string
	Sessions  *sessions.Service
	// Bus carries the workers' change notifications in process: workers
	// started by StartWorker tell it, API servers may listen (api.Options.Notify).
	Bus *notify.Local
}

// New uses the package's shared dev server (see devtest.Main).
func New(t testing.TB) *Env {
	return NewOn(t, devtest.Shared(t))
}

// NewOn uses the given dev server.
func NewOn(t testing.TB, srv *devserver.Server) *Env {
	t.Helper()
	c := devtest.Client(t, srv)
	tq := devtest.TaskQueue(t)
	t.Cleanup(func() { dumpOnFailure(t, c, srv.Namespace, tq) })
	return &Env{T: t, Server: srv, Client: c, TaskQueue: tq, Sessions: &sessions.Service{Client: c, TaskQueue: tq, StartWithMessage: true}, Bus: notify.NewLocal()}
}

// Agent builds an agent from scripted rules (YAML) and tools.
func Agent(t testing.TB, rules string, ts ...*tools.Tool) *agent.Agent {
	t.Helper()
	m, err := scripted.Parse([]byte(rules))
	if err != nil {
		t.Fatalf("scripted rules: %v", err)
	}
	reg := tools.NewRegistry()
	if err := reg.Register(ts...); err != nil {
		t.Fatalf("register tools: %v", err)
	}
	return &agent.Agent{Name: "test", Model: m, Tools: reg, LocalModel: true}
}

// StartWorker runs a worker for a on the env's task queue until the test ends
// (or until the returned stop is called), with the server's payload store,
// the env's bus and client.
func (e *Env) StartWorker(a *agent.Agent) (stop func()) {
	e.T.Helper()
	return e.StartWorkerWith(a, worker.Options{})
}

// StartWorkerWith is StartWorker with the worker's options (interceptors,
// the deadlock detector's settings).
func (e *Env) StartWorkerWith(a *agent.Agent, opts worker.Options) (stop func()) {
	e.T.Helper()
	return e.StartWorkerHostWith(a, agent.Host{}, opts)
}

// StartWorkerHost is StartWorker with what the worker wires in (completion
// URLs, search attributes): h's empty Store, Notifier and Client take the
// env's payload store, bus and client.
func (e *Env) StartWorkerHost(a *agent.Agent, h agent.Host) (stop func()) {
	e.T.Helper()
	return e.StartWorkerHostWith(a, h, worker.Options{})
}

// StartWorkerHostWith is StartWorkerHost with the worker's options.
func (e *Env) StartWorkerHostWith(a *agent.Agent, h agent.Host, opts worker.Options) (stop func()) {
	e.T.Helper()
	return e.StartWorkerAnd(a, h, opts, nil)
}

// StartWorkerAnd is StartWorkerHostWith that registers the app's own
// workflows and activities (extra) on the worker too, as an app whose
// tools are its workflows does.
func (e *Env) StartWorkerAnd(a *agent.Agent, h agent.Host, opts worker.Options, extra func(worker.Registry)) (stop func()) {
	e.T.Helper()
	if h.Store == nil {
		h.Store = e.Server.PayloadStore() // the store e.Client offloads to
	}
	if h.Notifier == nil {
		h.Notifier = e.Bus
	}
	if h.Client == nil {
		h.Client = e.Client // as eve's workers have (internal/workerhost)
	}
	if opts.MaxHeartbeatThrottleInterval == 0 {
		opts.MaxHeartbeatThrottleInterval = HeartbeatThrottle
	}
	w := worker.New(e.Client, e.TaskQueue, opts)
	if err := agent.Register(w, a, h); err != nil {
		e.T.Fatalf("register agent: %v", err)
	}
	if extra != nil {
		extra(w)
	}
	// Each subagent runs on a worker of its own, on its task queue.
	for _, q := range agent.Queues(a, e.TaskQueue)[1:] {
		sw := worker.New(e.Client, q.TaskQueue, opts)
		if err := agent.Register(sw, q.Agent, h); err != nil {
			e.T.Fatalf("register subagent %s: %v", q.Agent.Name, err)
		}
		if err := sw.Start(); err != nil {
			e.T.Fatalf("start subagent %s's worker: %v", q.Agent.Name, err)
		}
		e.T.Cleanup(sw.Stop)
	}
	// worker.Start asks the server for the namespace with no deadline of its
	// own: a server that stopped answering must fail this test, not hang the
	// package until go test's timeout.
	started := make(chan error, 1)
	go func() { started <- w.Start() }()
	select {
	case err := <-started:
		if err != nil {
			e.T.Fatalf("start worker: %v%s", err, e.Server.LogTail(3000))
		}
	case <-time.After(workerStartTimeout):
		e.T.Fatalf("start worker: the Temporal server at %s did not answer within %s%s", e.Server.Addr, workerStartTimeout, e.Server.LogTail(3000))
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	e.T.Cleanup(stop)
	return stop
}

// HeartbeatThrottle is how long a test worker holds a tool's heartbeat at
// most before sending it. The SDK's default holds it up to 80% of the
// tool's HeartbeatTimeout, which leaves a loaded machine 20% of it before
// the attempt times out; tests' tools heartbeat every few hundred
// milliseconds, and their heartbeats then reach the server with most of
// the timeout to spare (and progress reports promptly).
const HeartbeatThrottle = 200 * time.Millisecond

// workerStartTimeout bounds worker.Start (see StartWorkerWith); a loaded
// machine starts a worker in well under a second.
const workerStartTimeout = 60 * time.Second

// Ctx returns a context that ends with the test or after d.
func (e *Env) Ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.T.Cleanup(cancel)
	return ctx
}

// SendAndWait delivers a message and waits for its turn to end.
func (e *Env) SendAndWait(ctx context.Context, sessionID, message string) signals.SendResult {
	e.T.Helper()
	res, err := e.Sessions.Send(ctx, sessionID, signals.SendRequest{Message: message, Wait: true})
	if err != nil {
		e.T.Fatalf("send %q: %v", message, err)
	}
	return res
}

// Events returns all of a session's events.
func (e *Env) Events(ctx context.Context, sessionID string) []protocol.Event {
	e.T.Helper()
	evs, err := e.Sessions.Events(ctx, sessionID, 0)
	if err != nil {
		e.T.Fatalf("events of %s: %v", sessionID, err)
	}
	return evs
}

// WaitIdle polls a session's events until its last is session.waiting (the
// session is idle again) and returns them; it fails the test after 20 s.
func (e *Env) WaitIdle(sessionID string) []protocol.Event {
	e.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Each read gets the time left (at least 10 s): a read waits for
		// a workflow task that holds a local activity.
		evs := e.Events(e.Ctx(max(10*time.Second, time.Until(deadline))), sessionID)
		if len(evs) > 0 && evs[len(evs)-1].Type == protocol.SessionWaiting {
			return evs
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("session %s did not become idle; events: %s", sessionID, Join(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Reply waits for the session to be idle and returns its last assistant message.
func (e *Env) Reply(sessionID string) string {
	e.T.Helper()
	mc := Of(e.WaitIdle(sessionID), protocol.MessageCompleted)
	if len(mc) == 0 {
		e.T.Fatalf("session %s has no message.completed", sessionID)
	}
	var m protocol.MessageCompletedData
	if err := mc[len(mc)-1].Decode(&m); err != nil {
		e.T.Fatalf("decode message.completed: %v", err)
	}
	return m.Message
}

// Types lists event types.
func Types(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// Of returns the events of one type.
func Of(evs []protocol.Event, typ string) []protocol.Event {
	var out []protocol.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Join is Types joined with spaces, for readable assertions.
func Join(evs []protocol.Event) string { return strings.Join(Types(evs), " ") }

// Actions serves completion URLs for delegated tools on a local HTTP
// server and returns the config a worker needs.
func (e *Env) Actions() (*agent.Actions, *actionsvc.Service, string) {
	e.T.Helper()
	secret := []byte("test secret, 16+ bytes long")
	signer, err := capability.NewSigner(secret)
	if err != nil {
		e.T.Fatal(err)
	}
	svc := &actionsvc.Service{Client: e.Client, Signer: signer}
	mux := http.NewServeMux()
	mux.Handle(signals.ActionsPath, svc)
	srv := httptest.NewServer(mux)
	e.T.Cleanup(srv.Close)
	return &agent.Actions{Secret: secret, PublicURL: srv.URL}, svc, srv.URL
}
