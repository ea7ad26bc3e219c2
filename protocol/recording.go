package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A recorded session as a test (docs/evals.md, "Export and replay"): GET
// /eve/v1/session/{id}/export-stubs turns a session's history into eve's
// tool stubs (what each call returned), the messages and answers that drove
// it, and its trajectory (the calls the model made, in order). Replaying
// the steps in a new session created with the stubs, against a new build or
// a new model, and comparing trajectories (DiffTrajectories) shows where
// the agent now behaves differently, without running any real tool the
// recording saw run.

// SessionRecording is a session exported as a test.
type SessionRecording struct {
	SessionID string `json:"sessionId"`
	// Messages are the user messages, in order (what an eve eval sends).
	Messages []string `json:"messages"`
	// Steps are what drove the session, in order: each a message, or the
	// answers to the input requests a turn parked on.
	Steps []RecordedStep `json:"steps"`
	// Stubs replay every call that ran (or a stub settled): one rule per
	// tool and input, its outcomes the results in call order. Calls a
	// person answered (client tools) and calls that never ran (denied,
	// refused, cancelled) have none: the steps answer them again.
	Stubs []ToolStub `json:"stubs"`
	// Calls are the trajectory: every call the model made, in order.
	Calls []RecordedCall `json:"calls"`
}

// RecordedStep is one message, or one batch of answers.
type RecordedStep struct {
	Message string             `json:"message,omitempty"`
	Respond []RecordedResponse `json:"respond,omitempty"`
}

// RecordedResponse answers the open request of a tool: a replay finds it
// by tool name and kind (request ids differ between sessions).
type RecordedResponse struct {
	ToolName string          `json:"toolName"`
	Kind     string          `json:"kind"`
	OptionID string          `json:"optionId,omitempty"`
	Text     string          `json:"text,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// RecordedCall is one call of a trajectory.
type RecordedCall struct {
	TurnID string          `json:"turnId"`
	Tool   string          `json:"tool"`
	Input  json.RawMessage `json:"input"`
	// Status is how the call settled (completed, failed, rejected; empty
	// when it had not).
	Status string `json:"status,omitempty"`
}

// notRun are the failure codes of calls whose tool did not run: no stub
// replays them.
var notRun = []string{CodeToolNotFound, CodeToolInputInvalid, CodeToolCancelled, CodeToolDenied, CodeInputExpired, CodeConnectionChanged}

// RecordSession exports a session's events (in stream order) as a test.
func RecordSession(sessionID string, evs []Event) (SessionRecording, error) {
	rec := SessionRecording{SessionID: sessionID, Messages: []string{}, Steps: []RecordedStep{}, Stubs: []ToolStub{}}
	requests := map[string]InputRequest{}
	answered := map[string]bool{} // calls a person's answer settled (client tools)
	results := map[string]ActionResultData{}
	atStart, midTurnMessage := false, false
	for _, e := range evs {
		switch e.Type {
		case TurnStarted:
			atStart = true
			continue
		case MessageReceived:
			var d MessageReceivedData
			if err := e.Decode(&d); err != nil {
				return rec, err
			}
			rec.Messages = append(rec.Messages, d.Message)
			rec.Steps = append(rec.Steps, RecordedStep{Message: d.Message})
			// A message read while a turn runs answered its prompt or
			// steered it: replayed as the same message.
			midTurnMessage = !atStart
			continue
		case StepStarted:
			midTurnMessage = false
		case InputRequested:
			var d InputRequestedData
			if err := e.Decode(&d); err != nil {
				return rec, err
			}
			for _, r := range d.Requests {
				requests[r.RequestID] = r
				if r.Kind == KindQuestion {
					answered[r.Action.CallID] = true
				}
			}
		case InputResolved:
			var d InputResolvedData
			if err := e.Decode(&d); err != nil {
				return rec, err
			}
			var step RecordedStep
			for _, res := range d.Resolutions {
				r, ok := requests[res.RequestID]
				if !ok || res.Response == nil || midTurnMessage {
					continue
				}
				step.Respond = append(step.Respond, RecordedResponse{ToolName: r.Action.ToolName, Kind: r.Kind,
					OptionID: res.Response.OptionID, Text: res.Response.Text, Input: res.Response.Input})
			}
			if len(step.Respond) > 0 {
				rec.Steps = append(rec.Steps, step)
			}
			midTurnMessage = false
		case ActionsRequested:
			var d ActionsRequestedData
			if err := e.Decode(&d); err != nil {
				return rec, err
			}
			for _, a := range d.Actions {
				rec.Calls = append(rec.Calls, RecordedCall{TurnID: d.TurnID, Tool: a.ToolName, Input: canonicalJSON(a.Input)})
			}
		case ActionResult:
			var d ActionResultData
			if err := e.Decode(&d); err != nil {
				return rec, err
			}
			results[d.Result.CallID] = d
		}
		atStart = false
	}
	// The calls' statuses, and a rule per tool and input.
	callIDs := callIDsOf(evs)
	byKey := map[string]int{}
	perTool := map[string]int{}
	for i := range rec.Calls {
		c := &rec.Calls[i]
		id := callIDs[i]
		res, ok := results[id]
		if !ok {
			continue
		}
		c.Status = res.Status
		if answered[id] {
			continue
		}
		var outcome ToolStubOutcome
		switch {
		case res.Status == StatusCompleted:
			outcome.Response = res.Result.Output
		case res.Status == StatusFailed && res.Error != nil && !slices.Contains(notRun, res.Error.Code):
			outcome.Throw = &ToolStubThrow{Message: res.Error.Message}
		default:
			continue
		}
		key := c.Tool + "\x00" + string(c.Input)
		n, seen := byKey[key]
		if !seen {
			perTool[c.Tool]++
			rule := ToolStub{ID: fmt.Sprintf("%s-%d", c.Tool, perTool[c.Tool]), Tool: c.Tool, Match: matchInput(c.Input)}
			rec.Stubs = append(rec.Stubs, rule)
			n = len(rec.Stubs) - 1
			byKey[key] = n
		}
		rec.Stubs[n].Outcomes = append(rec.Stubs[n].Outcomes, outcome)
	}
	for i := range rec.Stubs {
		if r := &rec.Stubs[i]; len(r.Outcomes) == 1 {
			r.Outcome, r.Outcomes = &r.Outcomes[0], nil
		}
	}
	// The first match wins: a rule that names more of the input first.
	slices.SortStableFunc(rec.Stubs, func(a, b ToolStub) int { return len(b.Match) - len(a.Match) })
	if len(rec.Stubs) > MaxToolStubs {
		return rec, fmt.Errorf("the session made %d distinct tool calls; a session takes at most %d tool stubs", len(rec.Stubs), MaxToolStubs)
	}
	return rec, nil
}

// Trajectory lists the calls the model made in a session's events, in
// order.
func Trajectory(evs []Event) []RecordedCall {
	rec, _ := RecordSession("", evs)
	return rec.Calls
}

// callIDsOf lists the call ids of the actions.requested events, in order
// (RecordedCall keeps none: they differ between sessions).
func callIDsOf(evs []Event) []string {
	var ids []string
	for _, e := range evs {
		if e.Type != ActionsRequested {
			continue
		}
		var d ActionsRequestedData
		if e.Decode(&d) == nil {
			for _, a := range d.Actions {
				ids = append(ids, a.CallID)
			}
		}
	}
	return ids
}

// matchInput is a matcher for exactly this input: each top-level property
// {"const": value}. Anything but a non-empty object matches any input.
func matchInput(input json.RawMessage) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(input, &obj) != nil || len(obj) == 0 {
		return nil
	}
	m := make(map[string]json.RawMessage, len(obj))
	for k, v := range obj {
		m[k] = json.RawMessage(`{"const":` + string(canonicalJSON(v)) + `}`)
	}
	return m
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spaces.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// DiffTrajectories says how got differs from want, line by line (one call
// a line: turn, tool, input), "" when they are the same calls in the same
// order with the same inputs.
func DiffTrajectories(want, got []RecordedCall) string {
	line := func(c RecordedCall) string { return c.TurnID + " " + c.Tool + " " + string(canonicalJSON(c.Input)) }
	a := make([]string, len(want))
	for i, c := range want {
		a[i] = line(c)
	}
	b := make([]string, len(got))
	for i, c := range got {
		b[i] = line(c)
	}
	if slices.Equal(a, b) {
		return ""
	}
	// The longest common subsequence, then the edit script.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "the trajectory differs (-recorded +replayed: turn, tool, input):\n")
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			sb.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			sb.WriteString("- " + a[i] + "\n")
			i++
		default:
			sb.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return sb.String()
}
