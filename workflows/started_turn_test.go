package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/workflows"
)

// noClient makes an agent's sessions start their turns as workflows of
// their own; the local activities that would use it are mocked.
type noClient struct{ client.Client }

// startedTurns sets up a session recorded at version 1 of "direct-turns",
// which starts its turns through the mocked eve.StartWorkflow, and returns
// the starts it asked for. (New sessions run their turns as children.)
func startedTurns(t *testing.T) (*harness, *[]activities.StartWorkflowInput) {
	h := newHarness(t, func(a *agent.Agent) { a.Client = noClient{} })
	h.OnGetVersion("direct-turns", workflow.DefaultVersion, 2).Return(workflow.Version(1))
	var starts []activities.StartWorkflowInput
	h.OnActivity(activities.StartWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StartWorkflowInput) error {
			starts = append(starts, in)
			return nil
		})
	return h, &starts
}

// reportEnd signals the session the end of a turn, as the turn does.
func (h *harness) reportEnd(turnID string, out workflows.TurnOutput) {
	h.SignalWorkflow(signals.SignalTurnEnded, map[string]any{"turnId": turnID, "output": out})
}

// The session starts the turn through a local activity, waits for the
// turn's report (a report of another turn changes nothing), and then
// records the turn's events and answers the waiting sender.
func TestSessionStartedTurnReportsItsEnd(t *testing.T) {
	h, starts := startedTurns(t)
	var sent *update[signals.SendResult]
	var in workflows.TurnInput
	var during signals.SessionSummary
	h.at(time.Minute, func() {
		sent = h.send(signals.SendRequest{Message: "weather in Oslo", Wait: true})
	})
	h.at(2*time.Minute, func() {
		if len(*starts) != 1 {
			t.Fatalf("%d starts, want 1", len(*starts))
		}
		if err := json.Unmarshal((*starts)[0].Input, &in); err != nil {
			t.Fatal(err)
		}
		h.reportEnd("turn_9", workflows.TurnOutput{Outcome: signals.TurnOutcome{Status: signals.TurnStatusFailed}})
	})
	h.at(3*time.Minute, func() {
		if v, err := h.QueryWorkflow(signals.QueryState); err != nil || v.Get(&during) != nil {
			t.Errorf("state: %v", err)
		}
		if sent.completed {
			t.Errorf("the send completed on another turn's report: %+v", sent.result)
		}
		now := time.Now()
		ev := protocol.NewEvent(protocol.TurnCompleted, protocol.TurnRef{TurnID: in.TurnID, Sequence: in.Sequence},
			protocol.EventID(now, "s1", in.EventBase), now, in.DeliveryIDs)
		h.reportEnd(in.TurnID, workflows.TurnOutput{
			Events:  []protocol.Event{ev},
			Outcome: signals.TurnOutcome{Status: signals.TurnStatusCompleted, Reply: "sunny in Oslo", FirstEvent: in.EventBase, LastEvent: in.EventBase},
		})
	})
	h.at(4*time.Minute, func() { h.CancelWorkflow() })
	if err := h.runSession(s1); !temporal.IsCanceledError(err) {
		t.Fatalf("session ended with %v", err)
	}

	st := (*starts)[0]
	if st.WorkflowID != "s1/turn_0" || st.Workflow != signals.TurnWorkflow || st.TaskQueue == "" {
		t.Fatalf("start %+v", st)
	}
	if in.ReportTo != "s1" || !in.Current || in.Message != "weather in Oslo" || in.TurnID != "turn_0" {
		t.Fatalf("turn input %+v", in)
	}
	if during.ActiveTurn == nil || during.ActiveTurn.WorkflowID != "s1/turn_0" {
		t.Fatalf("while the turn ran: %+v", during)
	}
	if !sent.completed || sent.result.Outcome == nil || sent.result.Outcome.Status != signals.TurnStatusCompleted || sent.result.Outcome.Reply != "sunny in Oslo" {
		t.Fatalf("send %+v", sent)
	}
	if got := join(h.sessionEvents(0).Events); got != "session.started turn.completed session.waiting" {
		t.Fatalf("events %s", got)
	}
	if len(*starts) != 1 {
		t.Fatalf("%d starts, want 1", len(*starts))
	}
}

// A cancel asks the turn workflow to cancel and checks that it runs: while
// it does, the session waits for its report; once it is gone without one
// (terminated), the turn fails and the session takes messages again.
func TestSessionCancelFindsStartedTurnGone(t *testing.T) {
	h, _ := startedTurns(t)
	h.OnRequestCancelExternalWorkflow(mock.Anything, "s1/turn_0", "").Return(nil)
	closed := false
	h.OnActivity(activities.WorkflowClosedName, mock.Anything, "s1/turn_0").Return(
		func(context.Context, string) (bool, error) { return closed, nil })
	var sent *update[signals.SendResult]
	var first, second *update[signals.ControlResult]
	var running []protocol.Event
	h.at(time.Minute, func() {
		sent = h.send(signals.SendRequest{Message: "weather in Oslo", Wait: true})
	})
	h.at(2*time.Minute, func() {
		first = sendUpdate[signals.ControlResult](h, "", signals.UpdateControl, signals.ControlRequest{Op: signals.ControlCancel})
	})
	h.at(3*time.Minute, func() {
		running = h.sessionEvents(0).Events
		closed = true
		second = sendUpdate[signals.ControlResult](h, "", signals.UpdateControl, signals.ControlRequest{Op: signals.ControlCancel})
	})
	h.at(4*time.Minute, func() { h.CancelWorkflow() })
	if err := h.runSession(s1); !temporal.IsCanceledError(err) {
		t.Fatalf("session ended with %v", err)
	}

	if first.result.Status != signals.ControlAccepted || second.result.Status != signals.ControlAccepted {
		t.Fatalf("cancels %+v, %+v", first.result, second.result)
	}
	if got := join(running); got != "session.started" {
		t.Fatalf("events while the turn still ran: %s", got)
	}
	evs := h.sessionEvents(0).Events
	if got := join(evs); got != "session.started turn.failed session.waiting" {
		t.Fatalf("events %s", got)
	}
	var f protocol.TurnFailedData
	decode(t, evs[1], &f)
	if f.Code != "TURN_WORKFLOW_FAILED" || !strings.Contains(f.Message, "s1/turn_0 is gone") {
		t.Fatalf("turn.failed %+v", f)
	}
	if !sent.completed || sent.result.Outcome == nil || sent.result.Outcome.Status != signals.TurnStatusFailed {
		t.Fatalf("send %+v", sent)
	}
}

// A turn started by its session reports its end from a local activity,
// with what it returns.
func TestStartedTurnReportsToSession(t *testing.T) {
	h := newHarness(t, nil)
	type sent struct {
		signal string
		out    workflows.TurnOutput
	}
	var signalled []sent
	h.OnActivity(activities.SignalWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SignalWorkflowInput) error {
			var e struct {
				TurnID string               `json:"turnId"`
				Output workflows.TurnOutput `json:"output"`
			}
			if in.WorkflowID != "s1" || json.Unmarshal(in.Payload, &e) != nil || e.TurnID != "turn_0" {
				t.Errorf("signal %s to %s: %s", in.Signal, in.WorkflowID, in.Payload)
			}
			signalled = append(signalled, sent{in.Signal, e.Output})
			return nil
		})
	in := turnInput("weather in Oslo")
	in.ReportTo, in.Current = "s1", true
	out := h.runTurn(in)
	if len(signalled) != 1 || signalled[0].signal != signals.SignalTurnEnded {
		t.Fatalf("signals %+v", signalled)
	}
	got := signalled[0].out
	if got.Outcome != out.Outcome || join(got.Events) != join(out.Events) || got.Conversation == nil || *got.Conversation != *out.Conversation {
		t.Fatalf("reported %+v, returned %+v", got, out)
	}
	if out.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("outcome %+v", out.Outcome)
	}
}

// A new session runs each turn as a child workflow even when its worker has
// a client (versionCommittedTurns): nothing the session and the turn tell
// each other goes through a local activity, which a failed workflow task
// could not take back. The child's result is the turn's end.
func TestNewSessionRunsTurnsAsChildren(t *testing.T) {
	h := newHarness(t, func(a *agent.Agent) { a.Client = noClient{} })
	var localCalls []string
	for _, name := range []string{activities.StartWorkflowName, activities.SignalWorkflowName, activities.WorkflowClosedName} {
		h.OnActivity(name, mock.Anything, mock.Anything).Return(func(context.Context, any) error {
			localCalls = append(localCalls, name)
			return nil
		}).Maybe()
	}
	var sent *update[signals.SendResult]
	h.at(time.Minute, func() { sent = h.send(signals.SendRequest{Message: "refund ch_1 5", Wait: true}) })
	var open []protocol.InputRequest
	h.at(2*time.Minute, func() {
		open = h.parkedOn(turnWorkflowID(0), "input")
		h.respond(turnWorkflowID(0), protocol.InputResponse{RequestID: open[0].RequestID, OptionID: "approve"})
	})
	h.at(3*time.Minute, func() { h.CancelWorkflow() })
	if err := h.runSession(s1); !temporal.IsCanceledError(err) {
		t.Fatalf("session ended with %v", err)
	}
	if len(localCalls) > 0 {
		t.Fatalf("local activities between session and turn: %v", localCalls)
	}
	if len(h.turns) != 1 || h.turns[0].Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("child turns %+v", h.turns)
	}
	if !sent.completed || sent.result.Outcome == nil {
		t.Fatalf("send %+v", sent)
	}
	evs := h.sessionEvents(0).Events
	if got := join(evs); !strings.Contains(got, "input.requested turn.waiting input.resolved action.result") || !strings.HasSuffix(got, "turn.completed session.waiting") {
		t.Fatalf("events %s", got)
	}
}
