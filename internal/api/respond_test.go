package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// respondTemporal is one session, ses_1, as Temporal answers for it: turn_0
// ended with its request apr_old unanswered; turn_1 runs (workflow
// ses_1/turn_1) and asks apr_new, which only "approve" or "cancel"
// answers. Every call is counted: each is a round trip. Other calls panic
// (the embedded nil interface).
type respondTemporal struct {
	client.Client

	mu    sync.Mutex
	calls []string
}

var (
	respondSession = []protocol.Event{
		ev(protocol.InputRequested, protocol.InputRequestedData{Requests: []protocol.InputRequest{{RequestID: "apr_old", Kind: protocol.KindToolApproval}}, StepRef: protocol.StepRef{TurnID: "turn_0"}}),
		ev(protocol.TurnCompleted, protocol.TurnRef{TurnID: "turn_0"}),
	}
	respondTurn = []protocol.Event{
		ev(protocol.InputRequested, protocol.InputRequestedData{Requests: []protocol.InputRequest{{RequestID: "apr_new", Kind: protocol.KindToolApproval}}, StepRef: protocol.StepRef{TurnID: "turn_1"}}),
	}
	respondActive = &signals.ActiveTurn{WorkflowID: "ses_1/turn_1", TurnID: "turn_1", Base: len(respondSession), Sequence: 1}
)

func ev(typ string, data any) protocol.Event {
	b, _ := json.Marshal(data)
	return protocol.Event{Type: typ, Data: b}
}

func (f *respondTemporal) count(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *respondTemporal) QueryWorkflowWithOptions(_ context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	f.count("query " + req.QueryType)
	if req.WorkflowID != "ses_1" {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + req.WorkflowID)
	}
	switch req.QueryType {
	case signals.QueryState:
		return &client.QueryWorkflowWithOptionsResponse{QueryResult: value{signals.SessionSummary{SessionID: "ses_1", ActiveTurn: respondActive}}}, nil
	case signals.QueryEvents:
		from := req.Args[0].(signals.EventsQuery).From
		page := signals.EventsPage{From: from, Total: len(respondSession), ActiveTurn: respondActive}
		if from < len(respondSession) {
			page.Events = respondSession[from:]
		}
		return &client.QueryWorkflowWithOptionsResponse{QueryResult: value{page}}, nil
	}
	return nil, fmt.Errorf("unexpected query %s", req.QueryType)
}

func (f *respondTemporal) QueryWorkflow(_ context.Context, workflowID, _, queryType string, args ...any) (converter.EncodedValue, error) {
	f.count("query " + queryType)
	from := args[0].(int)
	if workflowID != respondActive.WorkflowID || queryType != signals.QueryTurnEvents {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
	}
	if from > len(respondTurn) {
		return nil, serviceerror.NewQueryFailed(fmt.Sprintf("event index %d out of range [0,%d]", from, len(respondTurn)))
	}
	return value{respondTurn[from:]}, nil
}

func (f *respondTemporal) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.count("describe")
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
}

// UpdateWorkflow is the turn's respond Update: its validator refuses the
// whole batch unless every answer approves or cancels apr_new.
func (f *respondTemporal) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.count("update " + opts.UpdateName)
	if opts.WorkflowID != respondActive.WorkflowID || opts.UpdateName != signals.UpdateRespond {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + opts.WorkflowID)
	}
	req := opts.Args[0].(signals.RespondRequest)
	var res signals.RespondResult
	for i, r := range req.Responses {
		switch {
		case r.RequestID != "apr_new":
			return updateHandle{err: temporal.NewApplicationError(fmt.Sprintf("response %d (requestId %q): unknown request id (open requests: apr_new)", i+1, r.RequestID), "")}, nil
		case r.OptionID != "approve" && r.OptionID != "cancel":
			return updateHandle{err: temporal.NewApplicationError(fmt.Sprintf("response %d (requestId %q): unknown option %q", i+1, r.RequestID, r.OptionID), "")}, nil
		}
		res.Resolutions = append(res.Resolutions, protocol.InputResolution{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeApproved, RequestID: r.RequestID})
	}
	return updateHandle{res: res}, nil
}

type updateHandle struct {
	client.WorkflowUpdateHandle
	res signals.RespondResult
	err error
}

func (h updateHandle) Get(_ context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	return value{h.res}.Get(ptr)
}

type value struct{ v any }

func (v value) HasValue() bool { return v.v != nil }
func (v value) Get(ptr any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// An answer costs two round trips: the session's summary (its owner and
// running turn), then the turn's respond Update, which decides and applies
// the batch; one, the Update, once the server knows the owner and the
// turn. Refusals read the log to say which status applies, as before.
func TestRespondTakesTwoRoundTrips(t *testing.T) {
	f := &respondTemporal{}
	s := newTestServer(t, func(o *Options) { o.Sessions = &sessions.Service{Client: f} })
	answer := func(requestID, option string) string {
		return fmt.Sprintf(`{"inputResponses":[{"requestId":%q,"optionId":%q}]}`, requestID, option)
	}
	js := map[string]string{"Content-Type": "application/json"}

	w := serve(s, "POST", "/eve/v1/session/ses_1", answer("apr_new", "approve"), js)
	if w.Code != 202 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var acc protocol.Accepted
	if err := json.Unmarshal(w.Body.Bytes(), &acc); err != nil || !acc.OK || acc.SessionID != "ses_1" || len(acc.Resolutions) != 1 || acc.Resolutions[0].RequestID != "apr_new" {
		t.Fatalf("accepted %s (%v)", w.Body, err)
	}
	if want := []string{"query " + signals.QueryState, "update " + signals.UpdateRespond}; strings.Join(f.calls, ", ") != strings.Join(want, ", ") {
		t.Fatalf("round trips: %q, want %q", f.calls, want)
	}

	// The server now knows the session's owner and its running turn: the
	// owner's next answer is one round trip, the turn's Update.
	f.calls = nil
	if w := serve(s, "POST", "/eve/v1/session/ses_1", answer("apr_new", "cancel"), js); w.Code != 202 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if want := []string{"update " + signals.UpdateRespond}; strings.Join(f.calls, ", ") != strings.Join(want, ", ") {
		t.Fatalf("round trips with the turn known: %q, want %q", f.calls, want)
	}

	// A batch the known turn refuses asks the session which turn runs, and
	// the refusal's status is decided as before.
	for _, c := range []struct {
		requestID, option string
		status            int
		code, part        string
	}{
		{"apr_nope", "approve", 400, CodeUnknownRequest, `no input request "apr_nope"`},
		{"apr_old", "approve", 409, CodeInputNotPending, "turn_0 ended"},
		{"apr_new", "gold", 400, CodeRejected, `unknown option "gold"`},
	} {
		wantErr(t, serve(s, "POST", "/eve/v1/session/ses_1", answer(c.requestID, c.option), js), c.status, c.code, c.part)
	}
}

// The answer to a respond says what became of every answer: accepted only
// when each settled (or repeated a settled one); partial when a policy
// refused some; 400 rejected, naming each request and reason, when it
// refused all that could settle. A worker older than RespondResult.Refused
// still has its refused edits reported.
func TestRespondAnswerSaysWhatBecameOfEachAnswer(t *testing.T) {
	settled := protocol.InputResolution{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeApproved, RequestID: "apr_a"}
	refused := protocol.Refusal{RequestID: "apr_b", CandidateID: "cnd_apr_b.1", Outcome: protocol.CandidateRejected, Reason: "A second person must approve transfers."}
	edit := protocol.Refusal{RequestID: "apr_c", CandidateID: "cnd_apr_c.1", Outcome: protocol.CandidateRejected, Reason: "approvals stop at 100", Edited: true}
	for _, c := range []struct {
		name   string
		res    signals.RespondResult
		status int
		body   map[string]any
	}{
		{"settled", signals.RespondResult{Resolutions: []protocol.InputResolution{settled}}, 202,
			map[string]any{"ok": true, "sessionId": "ses_1", "status": "accepted", "resolutions": []any{map[string]any{"kind": "tool-approval", "outcome": "approved", "requestId": "apr_a"}}}},
		{"a repeat", signals.RespondResult{Duplicates: []string{"apr_a"}}, 202,
			map[string]any{"ok": true, "sessionId": "ses_1", "status": "accepted", "duplicates": []any{"apr_a"}}},
		{"one settled, one refused", signals.RespondResult{Resolutions: []protocol.InputResolution{settled}, Refused: []protocol.Refusal{refused}}, 200,
			map[string]any{"ok": true, "sessionId": "ses_1", "status": "partial",
				"resolutions": []any{map[string]any{"kind": "tool-approval", "outcome": "approved", "requestId": "apr_a"}},
				"refused":     []any{map[string]any{"requestId": "apr_b", "candidateId": "cnd_apr_b.1", "outcome": "rejected", "reason": "A second person must approve transfers."}}}},
		{"all refused", signals.RespondResult{Refused: []protocol.Refusal{refused, edit}, Duplicates: []string{"apr_a"}, EditRefused: "request apr_c: approvals stop at 100"}, 400,
			map[string]any{"ok": false, "code": "rejected",
				"error": "the answer to request apr_b was refused (rejected) and the request stays open: A second person must approve transfers.; " +
					"the edited approval of request apr_c was refused (rejected) and the request stays open: approvals stop at 100",
				"refused": []any{
					map[string]any{"requestId": "apr_b", "candidateId": "cnd_apr_b.1", "outcome": "rejected", "reason": "A second person must approve transfers."},
					map[string]any{"requestId": "apr_c", "candidateId": "cnd_apr_c.1", "outcome": "rejected", "reason": "approvals stop at 100", "edited": true}}}},
		{"an older worker's refused edit", signals.RespondResult{EditRefused: "request apr_c: approvals stop at 100"}, 400,
			map[string]any{"ok": false, "code": "rejected", "error": "the edited approval was refused and the request stays open: request apr_c: approvals stop at 100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			(&Server{}).respondAccepted(w, "ses_1", c.res)
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			if w.Code != c.status {
				t.Errorf("status %d, want %d", w.Code, c.status)
			}
			if diff := cmp.Diff(c.body, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}
