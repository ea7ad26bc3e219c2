package eve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eve-temporal/eve"
	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const rules = `
name: lib
rules:
  - match: '^pack'
    steps:
      - calls: [{tool: pack, input: {}}]
      - reply: "packed in {{result.pack.box}}"
  - match: '^refund'
    steps:
      - calls: [{tool: refund, input: {}}]
      - reply: "{{result.refund.status}}"
`

func libAgent(t *testing.T) *agent.Agent {
	m, err := scripted.Parse([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	refund := tools.Func("refund", "Refund.", func(ctx *tools.Context, in struct{}) (map[string]string, error) {
		return map[string]string{"status": "refunded"}, nil
	})
	refund.Approval = approval.Always()
	pack := tools.DefineDelegated("pack", "Pack.", json.RawMessage(`{"type":"object"}`), nil,
		tools.Delegated{Delegate: func(ctx *tools.Context, _ json.RawMessage, a tools.Action) (tools.Pending, error) {
			go actions.Complete(context.Background(), a.Completion, map[string]string{"box": "b7"})
			return a.Pending(), nil
		}})
	reg := tools.NewRegistry()
	if err := reg.Register(refund, pack); err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Name: "lib", Model: m, Tools: reg, LocalModel: true}
}

// NewWorker and NewHandler compose a whole process from the public API:
// approvals, and a delegated tool completed through its completion URL
// (signed by the worker with ActionSecret, verified by the handler).
func TestNewWorkerAndHandler(t *testing.T) {
	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	temporal := eve.Temporal{Address: srv.Addr, Namespace: srv.Namespace, TaskQueue: devtest.TaskQueue(t), PayloadStore: "file:" + t.TempDir()}
	const secret = "a secret of at least 16 bytes"
	c, store, err := eve.Dial(ctx, temporal, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if store == nil {
		t.Fatal("no store")
	}
	h, err := eve.NewHandler(c, libAgent(t), eve.ServerOptions{TaskQueue: temporal.TaskQueue, ActionSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()

	w, err := eve.NewWorker(ctx, libAgent(t), eve.WorkerOptions{Temporal: temporal, Limits: eve.Limits{StopTimeout: time.Second}, ActionSecret: secret, PublicURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	cl := client.New(hs.URL)
	turn, err := cl.SendAndWait(ctx, "", "pack it", nil)
	if err != nil || turn.Status != client.TurnCompleted || turn.Reply != "packed in b7" {
		t.Fatalf("delegated: %+v %v", turn, err)
	}
	turn, err = cl.SendAndWait(ctx, "", "refund it", nil)
	if err != nil || turn.Status != client.TurnWaiting || len(turn.Open) != 1 {
		t.Fatalf("approval: %+v %v", turn, err)
	}
	_, turn, err = cl.RespondAndWait(ctx, turn.SessionID, []protocol.InputResponse{{RequestID: turn.Open[0].RequestID, OptionID: "approve"}}, nil)
	if err != nil || turn.Reply != "refunded" {
		t.Fatalf("approved: %+v %v", turn, err)
	}
	res, err := toolsclient.New(hs.URL, "").Tools.Get(ctx, catalog.GetToolsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.NameMap.CanonicalToWire["lib.pack"]; !ok {
		t.Fatalf("tools API: %v", res.NameMap.CanonicalToWire)
	}

	// Per-session authorization through the public hook: with two keyed
	// users, bob may read alice's session (the hook allows streams) but not
	// write to it.
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte("keys:\n  key-alice: {principalId: alice}\n  key-bob: {principalId: bob}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var asked []string
	hk, err := eve.NewHandler(c, libAgent(t), eve.ServerOptions{TaskQueue: temporal.TaskQueue, KeysFile: keys,
		AuthorizeSession: func(_ context.Context, a eve.SessionAccess) bool {
			asked = append(asked, a.Action+":"+a.Caller.ID+"->"+a.Owner.ID)
			return a.Action == "stream"
		}})
	if err != nil {
		t.Fatal(err)
	}
	hks := httptest.NewServer(hk)
	defer hks.Close()
	alice, bob := client.New(hks.URL, client.WithAPIKey("key-alice")), client.New(hks.URL, client.WithAPIKey("key-bob"))
	turn, err = alice.SendAndWait(ctx, "", "pack it", nil)
	if err != nil || turn.Status != client.TurnCompleted {
		t.Fatalf("alice: %+v %v", turn, err)
	}
	var apiErr *client.Error
	if _, err := bob.Send(ctx, turn.SessionID, "pack it"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("bob's send to alice's session: %v", err)
	}
	if evs, _, err := bob.Events(ctx, turn.SessionID, 0); err != nil || len(evs) == 0 {
		t.Fatalf("bob's stream (allowed by the hook): %d events, %v", len(evs), err)
	}
	if !slices.Equal(asked, []string{"send:bob->alice", "stream:bob->alice"}) {
		t.Fatalf("the hook was asked %v", asked)
	}
	stopWorker()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Main's command tree has every command with today's flags.
func TestCommandTree(t *testing.T) {
	root := eve.Command("shop", func() (*agent.Agent, error) { return libAgent(t), nil })
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"dev", "worker", "serve", "mcp", "doctor", "session", "tools", "action"} {
		if !slices.Contains(names, want) {
			t.Fatalf("commands %v lack %s", names, want)
		}
	}
	worker, _, err := root.Find([]string{"worker"})
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"address", "namespace", "api-key", "tls-cert", "tls-key", "tls-ca", "tls-server-name", "task-queue", "payload-store",
		"max-concurrent-activities", "stop-timeout", "action-secret", "public-url", "metrics-addr", "log-level"} {
		if worker.Flags().Lookup(flag) == nil {
			t.Fatalf("worker lacks --%s", flag)
		}
	}
	if !strings.HasPrefix(root.Use, "shop") {
		t.Fatalf("use %q", root.Use)
	}
}

// WorkerOptionsFromEnv reads EVE_METRICS_ADDR as the worker command does:
// unset is the default address, set but empty turns metrics off.
func TestWorkerOptionsMetricsAddr(t *testing.T) {
	t.Setenv("EVE_METRICS_ADDR", "")
	if got := eve.WorkerOptionsFromEnv().MetricsAddr; got != "" {
		t.Fatalf("EVE_METRICS_ADDR= : MetricsAddr %q, want empty (off)", got)
	}
	os.Unsetenv("EVE_METRICS_ADDR")
	if got := eve.WorkerOptionsFromEnv().MetricsAddr; got != "127.0.0.1:9464" {
		t.Fatalf("EVE_METRICS_ADDR unset: MetricsAddr %q, want 127.0.0.1:9464", got)
	}
}

// An app's default task queue is its agent's name: TemporalFromEnv leaves
// it empty unless EVE_TASK_QUEUE is set, and a handler for an agent
// without a name, given no queue, says what to set.
func TestDefaultTaskQueueIsTheAgentsName(t *testing.T) {
	t.Setenv("EVE_TASK_QUEUE", "")
	if got := eve.TemporalFromEnv().TaskQueue; got != "" {
		t.Fatalf("EVE_TASK_QUEUE unset: TaskQueue %q, want empty (the agent's name)", got)
	}
	t.Setenv("EVE_TASK_QUEUE", "orders")
	if got := eve.TemporalFromEnv().TaskQueue; got != "orders" {
		t.Fatalf("EVE_TASK_QUEUE=orders: TaskQueue %q", got)
	}
	a := libAgent(t)
	a.Name = ""
	if _, err := eve.NewHandler(nil, a, eve.ServerOptions{}); err == nil || !strings.Contains(err.Error(), "ServerOptions.TaskQueue") {
		t.Fatalf("NewHandler for a nameless agent without a queue: %v, want an error naming ServerOptions.TaskQueue", err)
	}
}

// NewHandler applies the body limits it is given, as `serve` does: a body
// over MaxBodyBytes is 413, and one that stalls is 408 after
// BodyReadTimeout.
func TestNewHandlerBodyLimits(t *testing.T) {
	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	temporal := eve.Temporal{Address: srv.Addr, Namespace: srv.Namespace, TaskQueue: devtest.TaskQueue(t), PayloadStore: "file:" + t.TempDir()}
	c, _, err := eve.Dial(ctx, temporal, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := eve.NewHandler(c, libAgent(t), eve.ServerOptions{TaskQueue: temporal.TaskQueue, MaxBodyBytes: 64, BodyReadTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/eve/v1/session", "application/json", strings.NewReader(`{"message":"`+strings.Repeat("x", 100)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over MaxBodyBytes: %d, want 413", resp.StatusCode)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /eve/v1/session HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"message\":", strings.TrimPrefix(hs.URL, "http://"))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, " 408 ") {
		t.Fatalf("a stalled body: %q %v, want 408 after BodyReadTimeout", line, err)
	}
}

// WorkerOptionsFromEnv reads the worker's build as the worker command
// does; without EVE_BUILD_ID the worker is unversioned.
func TestWorkerOptionsDeployment(t *testing.T) {
	if d := eve.WorkerOptionsFromEnv().Deployment; d != (eve.Deployment{}) {
		t.Fatalf("no EVE_BUILD_ID: %+v, want unversioned", d)
	}
	t.Setenv("EVE_BUILD_ID", "v2")
	t.Setenv("EVE_DEPLOYMENT_NAME", "shop")
	t.Setenv("EVE_MAKE_CURRENT", "1")
	if d := eve.WorkerOptionsFromEnv().Deployment; d != (eve.Deployment{Name: "shop", BuildID: "v2", MakeCurrent: true}) {
		t.Fatalf("deployment %+v", d)
	}
}

// An eve.Main app's serve, four-eyes: the keys file grants bob, an approver
// of alice's tenant, review of her sessions; WithAuthorizeSession gives the
// serve command the app's hook, asked for dave, who holds no grant. alice's
// own approval is refused with the policy's reason, dave's is refused by
// the hook, bob's settles, and the refund runs once.
func TestMainAppFourEyes(t *testing.T) {
	srv := devtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store := "file:" + t.TempDir()
	temporal := eve.Temporal{Address: srv.Addr, Namespace: srv.Namespace, TaskQueue: devtest.TaskQueue(t), PayloadStore: store}
	var ran atomic.Int32
	newAgent := func() (*agent.Agent, error) {
		m, err := scripted.Parse([]byte("name: shop\nrules:\n  - match: '^refund'\n    steps:\n      - calls: [{tool: refund, input: {}}]\n      - reply: \"refunded, approved by {{result.refund.approvedBy}}\"\n"))
		if err != nil {
			return nil, err
		}
		refund := tools.Func("refund", "Refund.", func(ctx *tools.Context, in struct{}) (map[string]string, error) {
			ran.Add(1)
			return map[string]string{"approvedBy": ctx.Approver.ID}, nil
		})
		refund.Approval = approval.Always().WithResponse(func(_ context.Context, c approval.ResponseContext) (approval.Verdict, error) {
			if c.Response.Decision == approval.DecisionApprove && approval.SamePrincipal(c.Response.Principal, c.Request.Principal) {
				return approval.Reject("A second person must approve refunds."), nil
			}
			return approval.Allow(), nil
		})
		reg := tools.NewRegistry()
		if err := reg.Register(refund); err != nil {
			return nil, err
		}
		return &agent.Agent{Name: "shop", Model: m, Tools: reg, LocalModel: true}, nil
	}
	a, err := newAgent()
	if err != nil {
		t.Fatal(err)
	}
	w, err := eve.NewWorker(ctx, a, eve.WorkerOptions{Temporal: temporal, Limits: eve.Limits{StopTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, stopWorker := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	defer func() {
		stopWorker()
		if err := <-stopped; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()

	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte(`keys:
  key-alice: {principalId: alice, attributes: {tenantId: acme}}
  key-bob: {principalId: bob, attributes: {tenantId: acme}, reviews: {sameAttributes: [tenantId]}}
  key-dave: {principalId: dave, attributes: {tenantId: acme}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	hook := func(_ context.Context, a eve.SessionAccess) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, a.Action+":"+a.Caller.ID)
		return false
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		root := eve.Command("shop", newAgent, eve.WithAuthorizeSession(hook))
		root.SetArgs([]string{"serve", "--address", srv.Addr, "--namespace", srv.Namespace, "--task-queue", temporal.TaskQueue,
			"--payload-store", store, "--addr", addr, "--keys-file", keys, "--log-level", "warn"})
		served <- root.ExecuteContext(sctx)
	}()
	defer func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("shop serve: %v", err)
		}
	}()
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if h, err := client.New(url).Health(ctx); err == nil && h.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("shop serve did not answer within 60 s")
		}
	}
	alice, bob, dave := client.New(url, client.WithAPIKey("key-alice")), client.New(url, client.WithAPIKey("key-bob")), client.New(url, client.WithAPIKey("key-dave"))
	turn, err := alice.SendAndWait(ctx, "", "refund it", nil)
	if err != nil || turn.Status != client.TurnWaiting || len(turn.Open) != 1 {
		t.Fatalf("parked: %+v %v", turn, err)
	}
	sid, approve := turn.SessionID, protocol.InputResponse{RequestID: turn.Open[0].RequestID, OptionID: "approve"}
	if _, err := alice.Respond(ctx, sid, approve); err != nil && !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("alice's own approval: %v", err)
	}
	reason := ""
	for deadline := time.Now().Add(30 * time.Second); reason == ""; time.Sleep(50 * time.Millisecond) {
		evs, _, err := alice.Events(ctx, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			var c protocol.ApprovalCandidateData
			if e.Type == protocol.ApprovalCandidate && e.Decode(&c) == nil && c.Outcome == protocol.CandidateRejected {
				reason = c.Reason
			}
		}
		if reason == "" && time.Now().After(deadline) {
			t.Fatal("no refused candidate in the stream within 30 s")
		}
	}
	if reason != "A second person must approve refunds." {
		t.Fatalf("the refusal's reason: %q", reason)
	}
	if _, err := dave.Respond(ctx, sid, approve); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("dave's approval: %v, want 403 (the hook refuses)", err)
	}
	_, done, err := bob.RespondAndWait(ctx, sid, []protocol.InputResponse{approve}, nil)
	if err != nil || done.Status != client.TurnCompleted || done.Reply != "refunded, approved by bob" {
		t.Fatalf("bob's approval: %+v %v", done, err)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the refund ran %d times", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"respond:dave"}) {
		t.Fatalf("the hook was asked %v, want only dave's respond (bob holds a grant)", asked)
	}
}
