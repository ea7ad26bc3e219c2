package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Decisions reads a session's decision record: its decision.recorded
// events, in the order they were recorded, each marked with the stub that
// settled its call, if one did. A closed session (ended,
// terminated) is read from its last run's history, for as long as the
// namespace retains it.
func (s *Service) Decisions(ctx context.Context, id string) ([]protocol.Decision, error) {
	evs, err := s.History(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []protocol.Decision
	stubbed := map[string]*protocol.ActionStub{}
	for _, e := range evs {
		switch e.Type {
		case protocol.DecisionRecorded:
			var d protocol.Decision
			if err := e.Decode(&d); err != nil {
				return nil, fmt.Errorf("decode %s %s of session %s: %w", e.Type, e.Meta.ID, id, err)
			}
			out = append(out, d)
		case protocol.ActionResult:
			var r protocol.ActionResultData
			if err := e.Decode(&r); err == nil && r.Stub != nil {
				stubbed[r.Result.CallID] = r.Stub
			}
		}
	}
	// A call a tool stub settled after its person approved it: the
	// decision was real, the tool did not run. decision.recorded is
	// recorded before the call runs, so the mark comes from its
	// action.result.
	for i, d := range out {
		if st, ok := stubbed[d.CallID]; ok && d.CallID != "" {
			out[i].Stub = st
		}
	}
	return out, nil
}

// History reads every event of a session, open or closed (ended,
// terminated: what it recorded, ReadEnded, for as long as the namespace
// retains its history).
func (s *Service) History(ctx context.Context, id string) ([]protocol.Event, error) {
	evs, err := s.Events(ctx, id, 0)
	if errors.Is(err, ErrEnded) {
		evs, err = s.events(ctx, id, 0, true)
	}
	return evs, err
}

// DecisionSession is a session an export across sessions reads, with its
// initiator from its memo (nil when it has none), so authorizing it costs
// no state query.
type DecisionSession struct {
	ID        string
	Initiator *auth.Principal
}

// DecisionSessions lists, a Visibility page at a time, the sessions of
// this service's task queue (its agent) and of its subagents' queues
// (signals.SubagentTaskQueue: the queue, "/", the name) that may hold
// decisions made in [since, until]: every run (continued-as-new runs too) open at some time
// in the range. Ids may repeat across runs and pages; the caller
// de-duplicates. A Visibility store that refuses STARTS_WITH (older
// servers) lists the agent's own queue only.
func (s *Service) DecisionSessions(ctx context.Context, since, until time.Time, cursor []byte) ([]DecisionSession, []byte, error) {
	rest := ` AND (ExecutionStatus = "Running" OR CloseTime >= ` + quote(since.UTC().Format(time.RFC3339Nano)) + `)`
	if !until.IsZero() {
		rest += ` AND StartTime <= ` + quote(until.UTC().Format(time.RFC3339Nano))
	}
	own := `WorkflowType = ` + quote(signals.SessionWorkflow) + ` AND TaskQueue = ` + quote(s.TaskQueue)
	withSubagents := `WorkflowType = ` + quote(signals.SessionWorkflow) +
		` AND (TaskQueue = ` + quote(s.TaskQueue) + ` OR TaskQueue STARTS_WITH ` + quote(signals.SubagentTaskQueue(s.TaskQueue, "")) + `)`
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: withSubagents + rest, PageSize: 500, NextPageToken: cursor})
	var inv *serviceerror.InvalidArgument
	if errors.As(err, &inv) {
		resp, err = s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: own + rest, PageSize: 500, NextPageToken: cursor})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions from Visibility: %w", err)
	}
	out := make([]DecisionSession, 0, len(resp.GetExecutions()))
	for _, e := range resp.GetExecutions() {
		out = append(out, DecisionSession{ID: e.GetExecution().GetWorkflowId(), Initiator: initiatorOf(e)})
	}
	return out, resp.GetNextPageToken(), nil
}
