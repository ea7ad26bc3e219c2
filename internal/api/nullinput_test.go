package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// answerTemporal is one session whose running turn takes every answer:
// it records the respond Updates it receives.
type answerTemporal struct {
	client.Client
	sid string

	mu   sync.Mutex
	sent []signals.RespondRequest
}

func (f *answerTemporal) QueryWorkflowWithOptions(_ context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	if req.WorkflowID != f.sid || req.QueryType != signals.QueryState {
		return nil, fmt.Errorf("unexpected query %s of %s", req.QueryType, req.WorkflowID)
	}
	active := &signals.ActiveTurn{WorkflowID: f.sid + "/turn_1", TurnID: "turn_1"}
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: value{signals.SessionSummary{SessionID: f.sid, ActiveTurn: active}}}, nil
}

func (f *answerTemporal) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	req := opts.Args[0].(signals.RespondRequest)
	f.mu.Lock()
	f.sent = append(f.sent, req)
	f.mu.Unlock()
	var res signals.RespondResult
	for _, r := range req.Responses {
		res.Resolutions = append(res.Resolutions, protocol.InputResolution{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeApproved, RequestID: r.RequestID, Response: &r})
	}
	return updateHandle{res: res}, nil
}

// An answer's "input": null is no input: a plain approval, with nothing
// edited and no "input" sent to the turn (so none is recorded), on both
// answer routes; an input object is passed on as the edit.
func TestNullInputIsAbsent(t *testing.T) {
	sid := sessions.NewID("ses")
	tests := []struct {
		name, path, body, wantInput string
	}{
		{name: "inputResponses null", path: "/eve/v1/session/" + sid,
			body: `{"inputResponses":[{"requestId":"apr_1","optionId":"approve","input":null}]}`},
		{name: "inputResponses null with spaces", path: "/eve/v1/session/" + sid,
			body: `{"inputResponses":[{"requestId":"apr_1","optionId":"approve","input": null }]}`},
		{name: "inputResponses edit", path: "/eve/v1/session/" + sid,
			body: `{"inputResponses":[{"requestId":"apr_1","optionId":"approve","input":{"amount":5}}]}`, wantInput: `{"amount":5}`},
		{name: "inbox null", path: "/eve/v1/inbox/" + protocol.InboxID(sid, "apr_1"),
			body: `{"optionId":"approve","input":null}`},
		{name: "inbox edit", path: "/eve/v1/inbox/" + protocol.InboxID(sid, "apr_1"),
			body: `{"optionId":"approve","input":{"amount":5}}`, wantInput: `{"amount":5}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &answerTemporal{sid: sid}
			s := newTestServer(t, func(o *Options) { o.Sessions = &sessions.Service{Client: f} })
			w := serve(s, "POST", tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			if w.Code != 202 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if len(f.sent) != 1 || len(f.sent[0].Responses) != 1 {
				t.Fatalf("the turn got %+v, want one answer", f.sent)
			}
			r := f.sent[0].Responses[0]
			if string(r.Input) != tc.wantInput || r.OptionID != "approve" || r.RequestID != "apr_1" {
				t.Fatalf("the turn got %+v with input %q, want input %q", r, r.Input, tc.wantInput)
			}
			if b, _ := json.Marshal(r); tc.wantInput == "" && string(b) != `{"optionId":"approve","requestId":"apr_1"}` {
				t.Fatalf("recorded answer %s, want no input", b)
			}
		})
	}
}
