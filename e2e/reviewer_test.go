package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/visibility"
	"github.com/eve-temporal/eve/protocol"
)

// reviewerKeys: alice and bob work for acme, mallory for globex; bob and
// mallory are approvers who review their own tenant's sessions (a keys-file
// reviews grant), carol is an approver without one.
const reviewerKeys = `keys:
  key-alice: {principalId: alice, attributes: {tenantId: acme}}
  key-bob:
    principalId: bob
    attributes: {tenantId: acme, role: approver}
    reviews: {sameAttributes: [tenantId]}
  key-mallory:
    principalId: mallory
    attributes: {tenantId: globex, role: approver}
    reviews: {sameAttributes: [tenantId]}
  key-carol: {principalId: carol, attributes: {tenantId: acme, role: approver}}
`

// Four-eyes with the stock binary: `eve serve --keys-file` in its own
// process, the demo's transfer_funds (response policy demo.FourEyes). The
// requester's own approval is refused with the policy's reason; an approver
// of another tenant, and one without a reviews grant, may not touch the
// session; the reviewer of alice's tenant sees the request in its inbox,
// follows the session, approves, and the transfer runs once.
func TestFourEyesStockServe(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(3 * time.Minute)
	if err := visibility.Register(ctx, env.Client, "default"); err != nil {
		t.Fatal(err)
	}
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorkerHost(a, agent.Host{SearchAttributes: true, InboxAttributes: true})
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte(reviewerKeys), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startServe(t, env, eveBinary(t), "--keys-file", keys)
	fourEyes(t, ctx, url)
}

// startServe runs `eve serve` (bin) against env's server and task queue
// until the test ends, and returns its URL once it answers.
func startServe(t *testing.T, env *evetest.Env, bin string, args ...string) string {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	sctx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(sctx, bin, append([]string{"serve", "--address", env.Server.Addr, "--namespace", env.Server.Namespace,
		"--task-queue", env.TaskQueue, "--addr", addr, "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env.Server.PayloadStoreEnv(), "EVE_API_KEY=", "EVE_API_KEYS_FILE=", "EVE_NOTIFY=")
	var logs bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &logs}, lockedWriter{&mu, &logs}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stop()
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("eve serve output:\n%s", logs.String())
			mu.Unlock()
		}
	})
	url := "http://" + addr
	c := client.New(url)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if h, err := c.Health(env.Ctx(5 * time.Second)); err == nil && h.OK {
			return url
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("eve serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("eve serve did not answer /eve/v1/health within 60 s")
		}
	}
}

// fourEyes drives the four-eyes transfer against an API server with
// reviewerKeys.
func fourEyes(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	as := func(key string) *client.Client { return client.New(url, client.WithAPIKey(key)) }
	alice, bob, mallory, carol := as("key-alice"), as("key-bob"), as("key-mallory"), as("key-carol")
	turn := parkOver(t, ctx, alice, "", "transfer 20 to bob")
	sid, req := turn.SessionID, turn.Open[0]
	approve := protocol.InputResponse{RequestID: req.RequestID, OptionID: "approve"}

	// alice approves her own transfer: the policy refuses, and says why.
	if _, err := alice.Respond(ctx, sid, approve); err != nil && !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("alice's own approval: %v", err)
	}
	var refused protocol.ApprovalCandidateData
	waitUntil(t, "alice's refused candidate in the stream", func() bool {
		evs, _, err := alice.Events(ctx, sid, 0)
		for _, c := range candidates(t, evs) {
			if err == nil && c.Outcome == protocol.CandidateRejected {
				refused = c
				return true
			}
		}
		return false
	})
	if refused.Reason != "A second person must approve transfers." || refused.ResponderPrincipalID != "alice" {
		t.Fatalf("alice's candidate = %+v", refused)
	}

	// Another tenant's reviewer, and an approver without a grant: 403 on
	// every route a reviewer has, and the request is not in their inbox.
	for name, c := range map[string]*client.Client{"mallory": mallory, "carol": carol} {
		if _, err := c.Respond(ctx, sid, approve); !client.IsStatus(err, http.StatusForbidden) {
			t.Fatalf("%s's approval: %v, want 403", name, err)
		}
		if _, _, err := c.Events(ctx, sid, 0); !client.IsStatus(err, http.StatusForbidden) {
			t.Fatalf("%s's stream: %v, want 403", name, err)
		}
		if p, err := c.Inbox(ctx, client.InboxFilter{SessionID: sid}); err != nil || len(p.Items) != 0 || p.NextCursor != "" {
			t.Fatalf("%s's inbox: %+v %v", name, p, err)
		}
	}
	// The reviewer may follow the session, but not write to it.
	if _, _, err := bob.Events(ctx, sid, 0); err != nil {
		t.Fatalf("bob's stream: %v", err)
	}
	if _, err := bob.Send(ctx, sid, "transfer 500 to bob"); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob's message: %v, want 403", err)
	}
	if _, err := bob.Cancel(ctx, sid, ""); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob's cancel: %v, want 403", err)
	}
	inbox := waitListed(t, "bob's inbox", func() (client.InboxPage, error) { return bob.Inbox(ctx, client.InboxFilter{SessionID: sid}) },
		func(p client.InboxPage) bool { return len(p.Items) == 1 })
	if it := inbox.Items[0]; it.Request.RequestID != req.RequestID || it.RequesterPrincipalID != "alice" {
		t.Fatalf("bob's inbox item = %+v", it)
	}

	// bob approves from the inbox: the policy allows, the transfer runs once.
	tail, err := alice.Tail(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.AnswerInbox(ctx, inbox.Items[0].ID, protocol.InboxAnswer{OptionID: "approve"}); err != nil {
		t.Fatalf("bob's approval: %v", err)
	}
	done, err := alice.WaitTurn(ctx, sid, "", tail+1, nil)
	if err != nil || done.Status != client.TurnCompleted {
		t.Fatalf("the turn after bob's approval: %+v %v", done, err)
	}
	evs, _, err := alice.Events(ctx, sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	results := evetest.Of(evs, protocol.ActionResult)
	if len(results) != 1 {
		t.Fatalf("%d action results, want 1: %s", len(results), evetest.Join(evs))
	}
	var ar protocol.ActionResultData
	results[0].Decode(&ar)
	if out := string(ar.Result.Output); !bytes.Contains(ar.Result.Output, []byte(`"requestedBy":"alice"`)) || !bytes.Contains(ar.Result.Output, []byte(`"approvedBy":"bob"`)) {
		t.Fatalf("action.result = %s", out)
	}

	// The reviewer reads the session's decision record: bob decided, after
	// alice's refused candidate.
	var ds []client.Decision
	if err := bob.Decisions(ctx, client.DecisionFilter{SessionID: sid}, func(d client.Decision) error { ds = append(ds, d); return nil }); err != nil {
		t.Fatalf("bob's decisions: %v", err)
	}
	if len(ds) != 1 || ds[0].Decider == nil || ds[0].Decider.ID != "bob" || len(ds[0].Candidates) != 1 ||
		ds[0].Candidates[0].Reason != "A second person must approve transfers." {
		t.Fatalf("decisions = %+v", ds)
	}
	var forbidden *client.Error
	if err := mallory.Decisions(ctx, client.DecisionFilter{SessionID: sid}, func(client.Decision) error { return nil }); !errors.As(err, &forbidden) || forbidden.Status != http.StatusForbidden {
		t.Fatalf("mallory's decisions: %v, want 403", err)
	}
}
