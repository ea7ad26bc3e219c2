package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/payloadstore"
)

func TestExpHistoryLimit(t *testing.T) {
	srv := devtest.Start(t, devserver.Options{ExtraArgs: []string{
		"--dynamic-config-value", "limit.historySize.error=400000",
		"--dynamic-config-value", "limit.historySize.warn=100000",
	}})
	env := evetest.NewOn(t, srv)
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	a.Store, _ = payloadstore.Open(context.Background(), "file:"+t.TempDir())
	env.StartWorker(a)
	e := newAPIEnv(t, env, nil)
	r := e.do(t, "POST", "/eve/v1/session", map[string]any{"message": "hello"}, nil)
	t.Logf("create %d %s", r.Status, r.Body)
	acc := r.json(t)
	id := acc["sessionId"].(string)
	big := strings.Repeat("x", 30000)
	for i := 0; i < 25; i++ {
		r := e.do(t, "POST", "/eve/v1/session/"+id, map[string]any{"message": fmt.Sprintf("m%d %s", i, big)}, nil)
		d, err := env.Client.DescribeWorkflowExecution(context.Background(), id, "")
		st := ""
		if err == nil {
			st = d.WorkflowExecutionInfo.Status.String() + fmt.Sprint(" len=", d.WorkflowExecutionInfo.HistoryLength, " size=", d.WorkflowExecutionInfo.HistorySizeBytes)
		}
		t.Logf("send %d: %d %.200s | %s", i, r.Status, r.Body, st)
	}
	time.Sleep(2 * time.Second)
	d, _ := env.Client.DescribeWorkflowExecution(context.Background(), id, "")
	t.Logf("final %v", d.WorkflowExecutionInfo.Status)
	it := env.Client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Log(err)
			break
		}
		t.Logf("close event %v %v", ev.EventType, ev)
	}
}

func TestExpTerminated(t *testing.T) {
	env := evetest.New(t)
	a, _ := demo.Agent()
	a.Store, _ = payloadstore.Open(context.Background(), "file:"+t.TempDir())
	env.StartWorker(a)
	e := newAPIEnv(t, env, nil)
	ctx := e.Ctx(30 * time.Second)
	r := e.do(t, "POST", "/eve/v1/session", map[string]any{"message": "hello"}, nil)
	id := r.json(t)["sessionId"].(string)
	time.Sleep(time.Second)
	if err := e.Client.TerminateWorkflow(ctx, id, "", "too big"); err != nil {
		t.Fatal(err)
	}
	_, err := e.Sessions.Send(ctx, id, signals.SendRequest{Message: "x"})
	t.Logf("send err %T %v", errors.Unwrap(err), err)
	_, err = e.Sessions.CreateAndSend(ctx, id, nil, signals.SendRequest{Message: "x"})
	t.Logf("cas err %v", err)
	for _, p := range []string{"", "/cancel", "/stream?follow=false"} {
		m := "POST"
		var body any = map[string]any{"message": "x"}
		if strings.HasPrefix(p, "/stream") {
			m, body = "GET", nil
		} else if p != "" {
			body = map[string]any{}
		}
		r := e.do(t, m, "/eve/v1/session/"+id+p, body, nil)
		t.Logf("%s %s: %d %.300s", m, p, r.Status, r.Body)
	}
	_ = http.StatusOK
}
