package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

var (
	reqAlice = &auth.Principal{ID: "alice", Type: auth.TypeUser}
	reqBob   = &auth.Principal{ID: "bob", Type: auth.TypeUser}
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	step     = protocol.StepRef{Sequence: 2, StepIndex: 1, TurnID: "turn_0"}
)

// testRequest is an open approval of an editable call whose response
// policy judges its answers, due an hour after it was opened at t0.
func testRequest() *request {
	b := newInputBoard(turnInput{SessionID: "ses_1", TurnID: "turn_0", Sequence: 2, Auth: auth.Auth{Current: reqAlice, Initiator: reqAlice}}, true)
	p := work.CallPlan{Call: model.ToolCall{ID: "call_1", Name: "refund", Input: json.RawMessage(`{"amount":5}`)},
		Title: "Refund", Approval: approval.KindAlways, ResponsePolicy: true, Editable: true,
		InputSchema: json.RawMessage(`{"type":"object"}`)}
	r := b.add(newApprovalRequest(p, 1, "", true, ""), t0)
	r.deadline = t0.Add(time.Hour)
	return r
}

func approve(r *request) decision {
	resp := protocol.InputResponse{RequestID: r.req.RequestID, OptionID: "approve"}
	d, err := r.decide(resp)
	if err != nil {
		panic(err)
	}
	return d
}

func editOf(r *request) decision {
	d, err := r.decide(protocol.InputResponse{RequestID: r.req.RequestID, OptionID: "approve", Input: json.RawMessage(`{"amount":3}`)})
	if err != nil {
		panic(err)
	}
	return d
}

// reach drives a fresh request to state s through its transitions.
func reach(t *testing.T, s reqState) (*request, *candidate) {
	t.Helper()
	r := testRequest()
	var c *candidate
	var err error
	switch s {
	case reqCandidate:
		c, err = r.propose(approve(r), protocol.InputResponse{RequestID: r.req.RequestID, OptionID: "approve"}, reqBob)
	case reqSettled:
		_, err = r.answer(approve(r), reqAlice)
	case reqExpired:
		_, err = r.expire()
	case reqWithdrawn:
		_, err = r.withdraw()
	case reqCancelled:
		_, err = r.cancel()
	}
	if err != nil {
		t.Fatalf("reaching %s: %v", s, err)
	}
	if r.state != s {
		t.Fatalf("reaching %s: the request is %s", s, r.state)
	}
	return r, c
}

// recorded is what effects say, in a form cmp can compare.
type recorded struct {
	Events   []recordedEvent
	Resolved []protocol.InputResolution
	Notice   *tools.Reminder
	NoticeID string
	Refused  []protocol.Refusal
}

type recordedEvent struct {
	Type string
	Data any
}

func recordedOf(fx effects) recorded {
	var out recorded
	for _, e := range fx.events {
		out.Events = append(out.Events, recordedEvent{e.typ, e.data})
	}
	out.Resolved, out.Refused = fx.resolved, fx.refused
	if fx.notice != nil {
		out.Notice, out.NoticeID = &fx.notice.rm, fx.notice.key
	}
	return out
}

// transitions drives each transition from the state it is given.
var transitions = map[string]func(r *request, c *candidate) (effects, error){
	"answer": func(r *request, _ *candidate) (effects, error) { return r.answer(approve(r), reqAlice) },
	"propose": func(r *request, _ *candidate) (effects, error) {
		_, err := r.propose(approve(r), protocol.InputResponse{RequestID: r.req.RequestID, OptionID: "approve"}, reqBob)
		return effects{}, err
	},
	"conclude": func(r *request, c *candidate) (effects, error) {
		if c == nil {
			c = &candidate{id: "cnd_none", r: r}
		}
		return r.conclude(c, approval.Allow(), nil, t0.Add(time.Minute))
	},
	"expire":   func(r *request, _ *candidate) (effects, error) { return r.expire() },
	"withdraw": func(r *request, _ *candidate) (effects, error) { return r.withdraw() },
	"cancel":   func(r *request, _ *candidate) (effects, error) { return r.cancel() },
	"remind": func(r *request, _ *candidate) (effects, error) {
		return r.remind(t0.Add(50*time.Minute), t0.Add(50*time.Minute))
	},
	"escalate": func(r *request, _ *candidate) (effects, error) {
		return r.escalate(&approval.Escalation{After: 30 * time.Minute, Attribute: "role", Value: "manager"}, t0.Add(30*time.Minute))
	},
	"edit": func(r *request, _ *candidate) (effects, error) {
		_, err := r.edit(editOf(r), reqBob)
		return effects{}, err
	},
}

func approved() protocol.InputResolution {
	return protocol.InputResolution{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeApproved, RequestID: "apr_call_1",
		Response: &protocol.InputResponse{RequestID: "apr_call_1", OptionID: "approve"}}
}

func TestRequestTransitions(t *testing.T) {
	reminder := tools.Reminder{SessionID: "ses_1", TurnID: "turn_0", RequestID: "apr_call_1", Kind: protocol.KindToolApproval,
		ToolName: "refund", Prompt: "Approve Refund?", Requester: reqAlice, Owner: reqAlice, OpenedAt: t0, Deadline: t0.Add(time.Hour)}
	for _, from := range []reqState{reqOpen, reqCandidate} {
		cases := []struct {
			transition string
			state      reqState
			want       recorded
		}{
			{"answer", reqSettled, recorded{
				Events:   []recordedEvent{{protocol.ApprovalSettled, protocol.ApprovalSettledData{Outcome: protocol.OutcomeApproved, RequestID: "apr_call_1", ResponderPrincipalID: "alice", StepRef: step}}},
				Resolved: []protocol.InputResolution{approved()}}},
			{"propose", reqCandidate, recorded{}},
			{"expire", reqExpired, recorded{
				Events:   []recordedEvent{{protocol.ApprovalSettled, protocol.ApprovalSettledData{Outcome: protocol.OutcomeExpired, RequestID: "apr_call_1", StepRef: step}}},
				Resolved: []protocol.InputResolution{{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeExpired, RequestID: "apr_call_1"}}}},
			{"withdraw", reqWithdrawn, recorded{
				Resolved: []protocol.InputResolution{{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeIgnored, RequestID: "apr_call_1"}}}},
			{"cancel", reqCancelled, recorded{
				Resolved: []protocol.InputResolution{{Kind: protocol.KindToolApproval, Outcome: protocol.OutcomeCancelled, RequestID: "apr_call_1"}}}},
			{"remind", from, recorded{
				Events: []recordedEvent{{protocol.InputReminder, protocol.InputReminderData{RequestID: "apr_call_1", At: t0.Add(50 * time.Minute), Deadline: t0.Add(time.Hour), Number: 1, StepRef: step}}},
				Notice: func() *tools.Reminder {
					rm := reminder
					rm.At, rm.Number, rm.IdempotencyKey = t0.Add(50*time.Minute), 1, "ses_1/turn_0/apr_call_1/1"
					return &rm
				}(), NoticeID: "1"}},
			{"escalate", from, recorded{
				Events: []recordedEvent{{protocol.ApprovalEscalated, protocol.ApprovalEscalatedData{RequestID: "apr_call_1", At: t0.Add(30 * time.Minute), Group: "role=manager", StepRef: step}}},
				Notice: func() *tools.Reminder {
					rm := reminder
					rm.At, rm.Escalation, rm.EscalationAttribute, rm.EscalationValue = t0.Add(30*time.Minute), "role=manager", "role", "manager"
					rm.IdempotencyKey = "ses_1/turn_0/apr_call_1/escalation"
					return &rm
				}(), NoticeID: "escalation"}},
			{"edit", from, recorded{}},
		}
		if from == reqCandidate {
			// The policy allows the waiting candidate: the request settles.
			cases = append(cases, struct {
				transition string
				state      reqState
				want       recorded
			}{"conclude", reqSettled, recorded{
				Events:   []recordedEvent{{protocol.ApprovalSettled, protocol.ApprovalSettledData{Outcome: protocol.OutcomeApproved, RequestID: "apr_call_1", ResponderPrincipalID: "bob", StepRef: step}}},
				Resolved: []protocol.InputResolution{approved()}}})
		}
		for _, c := range cases {
			t.Run(from.String()+"/"+c.transition, func(t *testing.T) {
				r, cand := reach(t, from)
				fx, err := transitions[c.transition](r, cand)
				if err != nil {
					t.Fatalf("%s from %s: %v", c.transition, from, err)
				}
				if r.state != c.state {
					t.Errorf("state after %s from %s = %s, want %s", c.transition, from, r.state, c.state)
				}
				if diff := cmp.Diff(c.want, recordedOf(fx)); diff != "" {
					t.Errorf("%s from %s recorded (-want +got):\n%s", c.transition, from, diff)
				}
			})
		}
	}
}

// A closed request refuses every transition, says why as a person who
// answered it reads it, and stays as it was.
func TestRequestClosedRefusesEveryTransition(t *testing.T) {
	why := map[reqState]string{
		reqSettled:   "already settled (approved)",
		reqExpired:   "expired at its deadline (2026-01-02T04:04:05Z): nobody answered in time, and the turn went on without it",
		reqWithdrawn: "already settled (ignored)",
		reqCancelled: "already settled (cancelled)",
	}
	for _, from := range []reqState{reqSettled, reqExpired, reqWithdrawn, reqCancelled} {
		for name, do := range transitions {
			if name == "conclude" {
				continue // a closed request concludes its candidates stale (below)
			}
			t.Run(from.String()+"/"+name, func(t *testing.T) {
				r, _ := reach(t, from)
				before := r.res
				fx, err := do(r, nil)
				var se *stateError
				if !errors.As(err, &se) {
					t.Fatalf("%s from %s: error %v, want a stateError", name, from, err)
				}
				if diff := cmp.Diff(why[from], err.Error()); diff != "" {
					t.Errorf("%s from %s: message (-want +got):\n%s", name, from, diff)
				}
				if r.state != from || !cmp.Equal(before, r.res) {
					t.Errorf("%s from %s changed the request: now %s, %+v", name, from, r.state, r.res)
				}
				if diff := cmp.Diff(recorded{}, recordedOf(fx)); diff != "" {
					t.Errorf("%s from %s recorded (-want +got):\n%s", name, from, diff)
				}
			})
		}
	}
}

// Transitions the state allows but the request's data does not.
func TestRequestRefusedTransitions(t *testing.T) {
	cases := []struct {
		name string
		do   func(r *request) (effects, error)
		want string
	}{
		{"conclude without a candidate", func(r *request) (effects, error) {
			return r.conclude(&candidate{id: "cnd_x", r: r}, approval.Allow(), nil, t0)
		}, "request apr_call_1 is open: it cannot conclude"},
		{"expire without a deadline", func(r *request) (effects, error) {
			r.deadline = time.Time{}
			return r.expire()
		}, "request apr_call_1 cannot expire: it has no deadline"},
		{"remind at the deadline", func(r *request) (effects, error) {
			return r.remind(t0.Add(time.Hour), t0.Add(time.Hour))
		}, "request apr_call_1 cannot remind: its deadline is due"},
		{"escalate twice", func(r *request) (effects, error) {
			e := &approval.Escalation{After: time.Minute, Attribute: "role", Value: "manager"}
			if _, err := r.escalate(e, t0.Add(time.Minute)); err != nil {
				return effects{}, err
			}
			return r.escalate(e, t0.Add(2*time.Minute))
		}, "request apr_call_1 cannot escalate: it escalated already"},
		{"edit a tool that takes none", func(r *request) (effects, error) {
			d := editOf(r)
			r.plan.Editable = false
			_, err := r.edit(d, reqBob)
			return effects{}, err
		}, "request apr_call_1 cannot edit: its tool takes no edited input (approval.Policy.Editable)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRequest()
			_, err := c.do(r)
			if err == nil {
				t.Fatalf("%s: no error", c.name)
			}
			if diff := cmp.Diff(c.want, err.Error()); diff != "" {
				t.Errorf("%s: message (-want +got):\n%s", c.name, diff)
			}
			if r.state != reqOpen {
				t.Errorf("%s: the request is %s, want open", c.name, r.state)
			}
		})
	}
}

// A candidate the policy refuses leaves the request open again once no
// other waits; one that ends after the request closed is stale. Both are
// kept for the decision record.
func TestRequestCandidates(t *testing.T) {
	resp := protocol.InputResponse{RequestID: "apr_call_1", OptionID: "approve"}
	cases := []struct {
		name      string
		run       func(t *testing.T, r *request) effects
		state     reqState
		want      recordedEvent
		candidate protocol.DecisionCandidate
	}{
		{"rejected, the last one", func(t *testing.T, r *request) effects {
			c, _ := r.propose(approve(r), resp, reqBob)
			fx, err := r.conclude(c, approval.Reject("A second person must approve refunds."), nil, t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return fx
		}, reqOpen, recordedEvent{protocol.ApprovalCandidate, protocol.ApprovalCandidateData{CandidateID: "cnd_apr_call_1.1", Outcome: protocol.CandidateRejected,
			RequestID: "apr_call_1", ResponderPrincipalID: "bob", Reason: "A second person must approve refunds.", StepRef: step}},
			protocol.DecisionCandidate{CandidateID: "cnd_apr_call_1.1", Principal: &protocol.PrincipalRef{ID: "bob", Type: auth.TypeUser},
				Outcome: protocol.CandidateRejected, Reason: "A second person must approve refunds.", At: t0.Add(time.Minute)}},
		{"rejected, another still waits", func(t *testing.T, r *request) effects {
			c, _ := r.propose(approve(r), resp, reqBob)
			r.propose(approve(r), resp, reqAlice)
			fx, err := r.conclude(c, approval.Verdict{}, errors.New("policy crashed"), t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return fx
		}, reqCandidate, recordedEvent{protocol.ApprovalCandidate, protocol.ApprovalCandidateData{CandidateID: "cnd_apr_call_1.1", Outcome: protocol.CandidateFailed,
			RequestID: "apr_call_1", ResponderPrincipalID: "bob", Reason: work.ReasonResponseFailed, StepRef: step}},
			protocol.DecisionCandidate{CandidateID: "cnd_apr_call_1.1", Principal: &protocol.PrincipalRef{ID: "bob", Type: auth.TypeUser},
				Outcome: protocol.CandidateFailed, Reason: work.ReasonResponseFailed, At: t0.Add(time.Minute)}},
		{"stale: the request settled meanwhile", func(t *testing.T, r *request) effects {
			c, _ := r.propose(approve(r), resp, reqBob)
			if _, err := r.answer(approve(r), reqAlice); err != nil {
				t.Fatal(err)
			}
			fx, err := r.conclude(c, approval.Allow(), nil, t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return fx
		}, reqSettled, recordedEvent{protocol.ApprovalCandidate, protocol.ApprovalCandidateData{CandidateID: "cnd_apr_call_1.1", Outcome: protocol.CandidateStale,
			RequestID: "apr_call_1", ResponderPrincipalID: "bob", Reason: "The request was settled before this response was verified.", StepRef: step}},
			protocol.DecisionCandidate{CandidateID: "cnd_apr_call_1.1", Principal: &protocol.PrincipalRef{ID: "bob", Type: auth.TypeUser},
				Outcome: protocol.CandidateStale, Reason: "The request was settled before this response was verified.", At: t0.Add(time.Minute)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRequest()
			fx := c.run(t, r)
			if r.state != c.state {
				t.Errorf("state = %s, want %s", r.state, c.state)
			}
			refusal := protocol.Refusal{RequestID: "apr_call_1", CandidateID: c.candidate.CandidateID, Outcome: c.candidate.Outcome, Reason: c.candidate.Reason}
			if diff := cmp.Diff(recorded{Events: []recordedEvent{c.want}, Refused: []protocol.Refusal{refusal}}, recordedOf(fx)); diff != "" {
				t.Errorf("recorded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]protocol.DecisionCandidate{c.candidate}, r.refused); diff != "" {
				t.Errorf("decision record's candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// The decision record sums up how the request closed.
func TestRequestDecisionRecord(t *testing.T) {
	r := testRequest()
	c, _ := r.propose(editOf(r), protocol.InputResponse{RequestID: "apr_call_1", OptionID: "approve"}, reqAlice)
	r.conclude(c, approval.Reject("no"), nil, t0.Add(time.Minute))
	d, err := r.edit(editOf(r), reqBob)
	if err != nil {
		t.Fatal(err)
	}
	fx, err := r.answer(d, reqBob)
	if err != nil {
		t.Fatal(err)
	}
	got := r.decisionRecord(fx.resolved[0], t0.Add(2*time.Minute))
	dl := t0.Add(time.Hour)
	want := protocol.Decision{SessionID: "ses_1", TurnID: "turn_0", RequestID: "apr_call_1", Kind: protocol.KindToolApproval,
		ToolName: "refund", CallID: "call_1", Prompt: "Approve Refund?", Input: json.RawMessage(`{"amount":5}`),
		Requester: &protocol.PrincipalRef{ID: "alice", Type: auth.TypeUser}, AskedAt: t0, DecidedAt: t0.Add(2 * time.Minute),
		Outcome: protocol.OutcomeApproved, Deadline: &dl, OptionID: "approve",
		Decider: &protocol.PrincipalRef{ID: "bob", Type: auth.TypeUser}, EditedInput: json.RawMessage(`{"amount":3}`),
		Candidates: []protocol.DecisionCandidate{{CandidateID: "cnd_apr_call_1.1", Principal: &protocol.PrincipalRef{ID: "alice", Type: auth.TypeUser},
			Outcome: protocol.CandidateRejected, Reason: "no", At: t0.Add(time.Minute)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision record (-want +got):\n%s", diff)
	}
}

// A subagent's turn tags its request ids with its session (changeSubagentRequestIDs):
// sibling children whose models number call ids alike ask apart.
func TestRequestIDs(t *testing.T) {
	for _, tc := range []struct {
		name, tag, approval, question string
	}{
		{name: "root", approval: "apr_call_1_0", question: "inp_call_1_0"},
		{name: "child", tag: sessionTag("ses_sub_a"), approval: "apr_" + sessionTag("ses_sub_a") + "_call_1_0", question: "inp_" + sessionTag("ses_sub_a") + "_call_1_0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{approvalRequestID("call_1_0", tc.tag), questionRequestID("call_1_0", tc.tag)}
			if diff := cmp.Diff([]string{tc.approval, tc.question}, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	a, b := sessionTag("ses_sub_a"), sessionTag("ses_sub_b")
	if a == b || len(a) != 9 || a[0] != 's' {
		t.Errorf("tags %q and %q: want s and 8 hex digits, apart", a, b)
	}
}

// A subagent's turn hands its calls its session's tag for their own
// questions (changeSubagentAskIDs): the ids are tagged, and the turn takes
// a call's question by its prefix, tagged or not (a workflow tool built
// with an older tools/wfcall asks untagged), never another call's.
func TestAskIDs(t *testing.T) {
	tag := sessionTag("ses_sub_a")
	if got, want := signals.AskID(tag, "call_1_0", "1"), "ask_"+tag+"_call_1_0_1"; got != want {
		t.Errorf("tagged id %q, want %q", got, want)
	}
	if got, want := signals.AskID("", "call_1_0", "size"), "ask_call_1_0_size"; got != want {
		t.Errorf("untagged id %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, turnTag, id string
		ok                bool
	}{
		{name: "root, untagged", id: "ask_call_1_0_1", ok: true},
		{name: "root, tagged", id: "ask_" + tag + "_call_1_0_1", ok: false},
		{name: "child, tagged", turnTag: tag, id: "ask_" + tag + "_call_1_0_1", ok: true},
		{name: "child, untagged", turnTag: tag, id: "ask_call_1_0_1", ok: true},
		{name: "child, a sibling's tag", turnTag: tag, id: "ask_" + sessionTag("ses_sub_b") + "_call_1_0_1", ok: false},
		{name: "child, another call", turnTag: tag, id: "ask_" + tag + "_call_2_0_1", ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &turn{askTag: tc.turnTag}
			if got := tr.askPrefixOK("call_1_0", tc.id); got != tc.ok {
				t.Errorf("askPrefixOK(%q) = %t, want %t", tc.id, got, tc.ok)
			}
		})
	}
}
