package e2e

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/workerhost"
)

// Without the inbox's search attributes on the namespace, the inbox says
// so (503 inbox_unavailable, how to register them), rather than an empty
// list.
func TestInboxWithoutSearchAttributes(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(60 * time.Second)
	const ns = "eve-inbox-noattrs"
	_, err := env.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		t.Fatal(err)
	}
	c, err := env.Server.Dial(client.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	svc := &sessions.Service{Client: c, TaskQueue: env.TaskQueue}
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, _, err = svc.Inbox(ctx, sessions.InboxQuery{})
		var nf *serviceerror.NamespaceNotFound
		if !errors.As(err, &nf) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the new namespace reaches the frontend's cache
	}
	if !errors.Is(err, sessions.ErrInboxUnavailable) {
		t.Fatalf("inbox without attributes: %v", err)
	}
	e := newAPIEnv(t, env, func(o *api.Options) { o.Sessions = svc })
	wantError(t, e.do(t, "GET", "/eve/v1/inbox", nil, nil), http.StatusServiceUnavailable, "inbox_unavailable", "eve doctor")
}

// A namespace registered before the inbox (the three status attributes,
// none of the inbox's): a worker still records session status there, and
// only the inbox is off.
func TestWorkerOnANamespaceWithoutTheInboxAttributes(t *testing.T) {
	env := evetest.New(t)
	ctx := env.Ctx(60 * time.Second)
	const ns = "eve-status-only"
	_, err := env.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		t.Fatal(err)
	}
	status := map[string]enumspb.IndexedValueType{
		"EveStatus": enumspb.INDEXED_VALUE_TYPE_KEYWORD, "EveSessionId": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		"EveTools": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err = env.Client.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: status})
		var nf *serviceerror.NamespaceNotFound
		if !errors.As(err, &nf) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the new namespace reaches the frontend's cache
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.Server.Dial(client.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	w, err := workerhost.New(c, ns, env.TaskQueue, a, agent.Host{Store: env.Server.PayloadStore()}, workerhost.LimitsFromEnv(), workerhost.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	// Status attributes only: status on, inbox off.
	type attrs struct{ SearchAttributes, InboxAttributes bool }
	h := w.Host()
	if diff := cmp.Diff(attrs{SearchAttributes: true}, attrs{h.SearchAttributes, h.InboxAttributes}); diff != "" {
		t.Fatalf("the worker's search attributes (-want +got):\n%s", diff)
	}
}
