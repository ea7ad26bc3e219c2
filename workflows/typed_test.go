package workflows

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// The first open prompt across the turn's own requests and those its
// children proxied (typed.go, eve's rule): a session-limit prompt first,
// then in the order asked; a proxied request retired, or whose typed
// answer went down, is not one. The session's mirror lists them so, and
// names the proxied ones a response policy judges.
func TestTypedPrompts(t *testing.T) {
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser}
	b := newInputBoard(turnInput{SessionID: "s1", TurnID: "turn_0", Auth: auth.Auth{Current: alice}}, true)
	tr := &turn{board: b, relays: map[string]*relayed{}}
	ask := func(id, kind string) {
		b.add(&request{req: protocol.InputRequest{RequestID: id, Kind: kind}}, time.Time{})
	}
	relay := func(id string, rule signals.AnswerRule) *relayed {
		b.asked++
		rl := &relayed{kind: protocol.KindToolApproval, req: protocol.InputRequest{RequestID: id, Kind: protocol.KindToolApproval}, order: b.asked, rule: rule}
		tr.relays[id] = rl
		return rl
	}
	first := relay("apr_sA_c1", signals.AnswerRule{RequestID: "apr_sA_c1", RequesterOnly: true, Requester: alice})
	ask("apr_c2", protocol.KindToolApproval)
	relay("apr_sB_c1", signals.AnswerRule{RequestID: "apr_sB_c1", Judged: true})
	ask("lim_1", protocol.KindSessionLimit)
	ids := func() []string {
		var out []string
		for _, p := range tr.prompts() {
			out = append(out, p.req.RequestID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"lim_1", "apr_sA_c1", "apr_c2", "apr_sB_c1"}, ids()); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	// Off (a history before the change): the board's own, as before.
	if got := tr.inputs(); len(got.Open) != 2 || got.Open[0].RequestID != "apr_c2" || got.Judged != nil {
		t.Errorf("mirror without the change %+v", got)
	}
	tr.typedOn = true
	b.byID["lim_1"].state = reqSettled
	first.sent = true
	got := tr.inputs()
	var open []string
	for _, r := range got.Open {
		open = append(open, r.RequestID)
	}
	if diff := cmp.Diff([]string{"apr_c2", "apr_sB_c1"}, open); diff != "" {
		t.Errorf("mirror (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"apr_sB_c1"}, got.Judged); diff != "" {
		t.Errorf("judged (-want +got):\n%s", diff)
	}
	tr.relays["apr_sB_c1"].retired = true
	if diff := cmp.Diff([]string{"apr_c2"}, ids()); diff != "" {
		t.Errorf("prompts after the child settled (-want +got):\n%s", diff)
	}
}

// A subagent's turn says who may answer each request it relays: its own
// by its board (the requester's alone without a response policy, judged
// with one), a descendant's as that one relayed it.
func TestAnswerRules(t *testing.T) {
	alice := &auth.Principal{ID: "alice", Type: auth.TypeUser}
	b := newInputBoard(turnInput{SessionID: "s1", TurnID: "turn_0", Auth: auth.Auth{Current: alice}}, true)
	tr := &turn{board: b, relays: map[string]*relayed{}}
	b.add(&request{req: protocol.InputRequest{RequestID: "apr_c1", Kind: protocol.KindToolApproval}}, time.Time{})
	b.add(&request{req: protocol.InputRequest{RequestID: "apr_c2", Kind: protocol.KindToolApproval}, plan: work.CallPlan{ResponsePolicy: true}}, time.Time{})
	b.add(&request{req: protocol.InputRequest{RequestID: "inp_c3", Kind: protocol.KindQuestion}}, time.Time{})
	deep := signals.AnswerRule{RequestID: "apr_sG_c1", RequesterOnly: true, Requester: &auth.Principal{ID: "carol", Type: auth.TypeUser}}
	tr.relays["apr_sG_c1"] = &relayed{rule: deep}
	raw := mustJSON(protocol.InputRequestedData{Requests: []protocol.InputRequest{
		{RequestID: "apr_c1"}, {RequestID: "apr_c2"}, {RequestID: "inp_c3"}, {RequestID: "apr_sG_c1"}}})
	want := []signals.AnswerRule{
		{RequestID: "apr_c1", RequesterOnly: true, Requester: alice},
		{RequestID: "apr_c2", Judged: true},
		{RequestID: "inp_c3"},
		deep,
	}
	if diff := cmp.Diff(want, tr.answerRules(raw)); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}
