package main

// The test runs both sides against a real Temporal dev server with two
// namespaces: the handler's worker in "payments" behind an endpoint that
// the test creates through the operator API (as an operator would with
// `temporal operator nexus endpoint create`), and the agent's worker in
// the server's default namespace, which reaches the handler only through
// the endpoint. It drives the agent with eve's own test helpers
// (internal/evetest); the app code under test is agent.go and handler.go.

import (
	"context"
	"strings"
	"testing"
	"time"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

func TestRefundAcrossNamespaces(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{ExtraArgs: []string{"--namespace", HandlerNamespace}})
	env := evetest.NewOn(t, srv)

	// The payments team's worker, in its own namespace.
	hc, err := srv.Dial(client.Options{Namespace: HandlerNamespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	w := worker.New(hc, HandlerTaskQueue, worker.Options{})
	if err := RegisterHandler(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	// The endpoint: the only thing that names the handler's namespace.
	if _, err := env.Client.OperatorService().CreateNexusEndpoint(env.Ctx(30*time.Second), &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: DefaultEndpoint,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: HandlerNamespace, TaskQueue: HandlerTaskQueue,
		}}},
	}}); err != nil {
		t.Fatal(err)
	}

	t.Setenv("PAYMENTS_ENDPOINT", "")
	a, err := Agent()
	if err != nil {
		t.Fatal(err)
	}
	env.StartWorker(a)

	for _, c := range []struct {
		name, message, reply string
		code                 string // the call's error code, if it fails
	}{
		{"refunded", "refund ch_1001", "Refund re_1001 of 4200 EUR for ch_1001", ""},
		{"no such charge", "refund ch_1000", "Refund  of   for ch_1000", protocol.CodeToolExecution},
		{"already refunded", "refund ch_refunded", "Refund  of   for ch_refunded", protocol.CodeToolExecution},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := env.Sessions.CreateAndSend(env.Ctx(30*time.Second), "", nil, signals.SendRequest{Message: c.message})
			if err != nil {
				t.Fatal(err)
			}
			evs := env.WaitIdle(res.SessionID)
			reply := env.Reply(res.SessionID)
			results := evetest.Of(evs, protocol.ActionResult)
			if len(results) != 1 {
				t.Fatalf("%d action.result events: %s", len(results), evetest.Join(evs))
			}
			var ar protocol.ActionResultData
			if err := results[0].Decode(&ar); err != nil {
				t.Fatal(err)
			}
			code := ""
			if ar.Error != nil {
				code = ar.Error.Code
			}
			if code != c.code {
				t.Fatalf("call error %+v, want code %q", ar.Error, c.code)
			}
			if !strings.HasPrefix(reply, c.reply) {
				t.Errorf("reply %q, want it to start with %q", reply, c.reply)
			}
		})
	}

	// The handler's workflows ran in the handler's namespace, one per call.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := hc.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: HandlerNamespace, Query: `WorkflowType = "Refund"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetExecutions()); n != 3 {
		t.Errorf("%d Refund workflows in namespace %s, want 3", n, HandlerNamespace)
	}
}
