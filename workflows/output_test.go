package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// outputRules answer with eve__reply, validly or not.
const outputRules = `
name: wfout
default: "Hello."
rules:
  - match: '^summarize'
    steps:
      - calls: [{tool: eve__reply, input: {title: "tides", count: 3}}]
  - match: '^retry'
    steps:
      - calls: [{tool: eve__reply, input: {title: "tides"}}]
      - calls: [{tool: eve__reply, input: {title: "tides", count: 4}}]
  - match: '^beside'
    steps:
      - calls:
          - {tool: ping, input: {}}
          - {tool: eve__reply, input: {title: "early", count: 1}}
      - calls: [{tool: eve__reply, input: {title: "late", count: 2}}]
  - match: '^prose'
    reply: "Here is a summary in prose."
`

const summarySchema = `{"type":"object","properties":{"title":{"type":"string"},"count":{"type":"integer"}},"required":["title","count"],"additionalProperties":false}`

// toolsSeen records the tool names each model step offered.
type toolsSeen struct {
	model.Model
	mu    sync.Mutex
	steps [][]string
	last  []model.Message
}

func (m *toolsSeen) Step(ctx context.Context, req model.Request, s model.Stream) (model.Response, error) {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	m.mu.Lock()
	m.steps = append(m.steps, names)
	m.last = req.Messages
	m.mu.Unlock()
	return m.Model.Step(ctx, req, s)
}

// A turn whose message sent an outputSchema offers eve__reply, ends on a
// valid call with result.completed and the value as its outcome's Data,
// answers an invalid or premature call and goes on, and fails with
// OUTPUT_SCHEMA_NOT_FULFILLED on an answer in prose.
func TestTurnOutputSchema(t *testing.T) {
	for _, c := range []struct {
		name, message string
		schema        string
		wantTypes     []string
		wantStatus    string
		wantData      string
		wantRan       []string
		wantFailCode  string
		wantReplyTool bool
		wantModelRead string // a tool result the model read before its last step
	}{
		{name: "valid", message: "summarize the tides", schema: summarySchema,
			wantTypes: []string{protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted, protocol.StepCompleted,
				protocol.ResultCompleted, protocol.TurnCompleted},
			wantStatus: signals.TurnStatusCompleted, wantData: `{"title":"tides","count":3}`, wantReplyTool: true},
		{name: "invalid, then valid", message: "retry the tides", schema: summarySchema,
			wantTypes: []string{protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted, protocol.StepCompleted,
				protocol.StepStarted, protocol.StepCompleted, protocol.ResultCompleted, protocol.TurnCompleted},
			wantStatus: signals.TurnStatusCompleted, wantData: `{"title":"tides","count":4}`, wantReplyTool: true,
			wantModelRead: "Invalid input for tool eve__reply"},
		{name: "beside another call", message: "beside", schema: summarySchema,
			wantTypes: []string{protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted, protocol.ActionsRequested,
				protocol.ActionResult, protocol.StepCompleted, protocol.StepStarted, protocol.StepCompleted,
				protocol.ResultCompleted, protocol.TurnCompleted},
			wantStatus: signals.TurnStatusCompleted, wantData: `{"title":"late","count":2}`, wantRan: []string{"ping"}, wantReplyTool: true,
			wantModelRead: "Your reply wasn't delivered"},
		{name: "prose", message: "prose please", schema: summarySchema,
			wantTypes: []string{protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted, protocol.MessageAppended,
				protocol.MessageCompleted, protocol.StepCompleted, protocol.TurnFailed},
			wantStatus: signals.TurnStatusFailed, wantFailCode: "OUTPUT_SCHEMA_NOT_FULFILLED", wantReplyTool: true},
		{name: "no schema: no eve__reply", message: "prose please",
			wantTypes: []string{protocol.TurnStarted, protocol.MessageReceived, protocol.StepStarted, protocol.MessageAppended,
				protocol.MessageCompleted, protocol.StepCompleted, protocol.TurnCompleted},
			wantStatus: signals.TurnStatusCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			sm, err := scripted.Parse([]byte(outputRules))
			if err != nil {
				t.Fatal(err)
			}
			seen := &toolsSeen{Model: sm}
			h := newHarness(t, func(a *agent.Agent) { a.Model = seen })
			in := turnInput(c.message)
			if c.schema != "" {
				in.OutputSchema = json.RawMessage(c.schema)
			}
			out := h.runTurn(in)
			if diff := cmp.Diff(c.wantTypes, types(out.Events)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if out.Outcome.Status != c.wantStatus {
				t.Errorf("status %q, want %q (%s)", out.Outcome.Status, c.wantStatus, out.Outcome.Error)
			}
			if !sameJSON(out.Outcome.Data, c.wantData) {
				t.Errorf("data %s, want %s", out.Outcome.Data, c.wantData)
			}
			if c.wantData != "" {
				var rc protocol.ResultCompletedData
				decode(t, of(out.Events, protocol.ResultCompleted)[0], &rc)
				if !sameJSON(rc.Result, c.wantData) || rc.TurnID != "turn_0" {
					t.Errorf("result.completed %+v", rc)
				}
			}
			var ran []string
			for _, r := range h.executed() {
				ran = append(ran, strings.SplitN(r, ":", 2)[0])
			}
			if diff := cmp.Diff(c.wantRan, ran); diff != "" {
				t.Errorf("tools run (-want +got):\n%s", diff)
			}
			if c.wantFailCode != "" {
				var f protocol.TurnFailedData
				decode(t, of(out.Events, protocol.TurnFailed)[0], &f)
				if f.Code != c.wantFailCode || f.Message != "The agent could not produce a result matching the requested schema." {
					t.Errorf("turn.failed %+v", f)
				}
			}
			for i, names := range seen.steps {
				has := false
				for _, n := range names {
					has = has || n == tools.ReplyToolName
				}
				if has != c.wantReplyTool {
					t.Errorf("step %d offered %v: eve__reply there %v, want %v", i, names, has, c.wantReplyTool)
				}
			}
			if c.wantModelRead != "" {
				read := ""
				for _, m := range seen.last {
					for _, r := range m.ToolResults {
						read += string(r.Output)
					}
				}
				if !strings.Contains(read, c.wantModelRead) {
					t.Errorf("the model's last step read %q, want %q in a tool result", read, c.wantModelRead)
				}
			}
		})
	}
}

// A session's message with an outputSchema runs as a turn of its own and
// a waiting sender reads the structured result in its outcome.
func TestSessionOutputSchema(t *testing.T) {
	sm, err := scripted.Parse([]byte(outputRules))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(a *agent.Agent) { a.Model = sm; a.ContinueAsNewAfterTurns = 2 })
	var first, second *update[signals.SendResult]
	h.at(time.Minute, func() {
		first = h.send(signals.SendRequest{Message: "summarize", DeliveryID: "dlv_s", Wait: true, OutputSchema: json.RawMessage(summarySchema)})
	})
	h.at(2*time.Minute, func() {
		second = h.send(signals.SendRequest{Message: "prose", DeliveryID: "dlv_p", Wait: true})
	})
	_ = h.runSession(s1)
	if first == nil || !first.completed || first.err != nil || first.result.Outcome == nil {
		t.Fatalf("first send %+v", first)
	}
	if got := first.result.Outcome.Data; !sameJSON(got, `{"title":"tides","count":3}`) {
		t.Errorf("first outcome data %s", got)
	}
	// The schema is the turn's only: the next message answers in prose.
	if second == nil || !second.completed || second.result.Outcome == nil || second.result.Outcome.Status != signals.TurnStatusCompleted ||
		second.result.Outcome.Data != nil || second.result.Outcome.Reply != "Here is a summary in prose." {
		t.Fatalf("second send %+v", second)
	}
}

// sameJSON reports whether got is the JSON value want ("": none).
func sameJSON(got json.RawMessage, want string) bool {
	if want == "" || len(got) == 0 {
		return want == "" && len(got) == 0
	}
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && cmp.Equal(g, w)
}
