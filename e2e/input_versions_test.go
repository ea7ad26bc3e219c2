package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// A session started by eve's starters (signals.SessionVersions) and its turns
// take eve's changes from their inputs: with the search attributes and the
// inbox on, neither records a version marker when it starts, parks, is
// answered, or runs a regular turn (changeInputVersions), and the park
// still writes its attributes once. The parked turn's eve-quiet-resume
// is on from the input too (generation 3), so no marker is left.
func TestInputVersionsRecordNoMarkers(t *testing.T) {
	env := searchEnv(t, true)
	id, d := startParked(t, env, "refund ch_11 11")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.WaitIdle(id)
	ctx := env.Ctx(60 * time.Second)
	env.SendAndWait(ctx, id, "what's the weather in Rome")
	env.WaitIdle(id)
	if got := evetest.Of(env.Events(ctx, id), protocol.DecisionRecorded); len(got) != 1 {
		t.Errorf("decision.recorded events = %d, want 1 (the answer's; eve-decision-record on from the input)", len(got))
	}
	for _, wid := range []string{id, id + "/turn_0", id + "/turn_1"} {
		var markers []string
		versionUpserts := 0
		it := env.Client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" {
				markers = append(markers, string(a.GetDetails()["change-id"].GetPayloads()[0].GetData()))
			}
			if e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()["TemporalChangeVersion"] != nil {
				versionUpserts++
			}
		}
		var want []string
		if !slices.Equal(markers, want) || versionUpserts != len(want) {
			t.Errorf("%s: version markers %v and %d TemporalChangeVersion upserts, want %v", wid, markers, versionUpserts, want)
		}
	}
	// The park wrote once (waiting-input with its inbox); its answer
	// wrote nothing (eve-park-writes, on from the input).
	if got := upserts(t, ctx, env.Client, id+"/turn_0"); len(got) != 1 {
		t.Errorf("turn_0 upserts = %v, want the park's one", got)
	}
}

// TestRecordInputVersions records only the histories of changeInputVersions,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordInputVersions
func TestRecordInputVersions(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordInputVersions(t, prefix)
}

// recordInputVersions: a session with Versions in its input, the search
// attributes and the inbox on: its first turn parks and is approved, its
// second answers at once, its third parks and is denied.
func recordInputVersions(t *testing.T, prefix string) {
	t.Helper()
	env := searchEnv(t, true)
	save := func(name, wid string) {
		if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	id, d := startParked(t, env, "refund ch_12 12")
	respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	env.WaitIdle(id)
	ctx := env.Ctx(60 * time.Second)
	env.SendAndWait(ctx, id, "what's the weather in Rome")
	res, err := env.Sessions.Send(ctx, id, signals.SendRequest{Message: "refund ch_13 13", Wait: true})
	if err != nil || res.Outcome == nil || res.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("second park: %+v %v", res.Outcome, err)
	}
	var req protocol.InputRequestedData
	reqs := evetest.Of(env.Events(ctx, id), protocol.InputRequested)
	reqs[len(reqs)-1].Decode(&req)
	respond(t, env, id, protocol.InputResponse{RequestID: req.Requests[0].RequestID, OptionID: "deny"})
	env.WaitIdle(id)
	save("input-versions-session", id)
	save("input-versions-turn-approved", id+"/turn_0")
	save("input-versions-turn-regular", id+"/turn_1")
	save("input-versions-turn-denied", id+"/turn_2")
}

// TestRecordQuietResume records only the histories of changeQuietResume,
// which TestRecordHistories records too:
//
//	EVE_RECORD_HISTORIES=1 EVE_RECORD_PREFIX=v0.5.0- go test ./e2e -run TestRecordQuietResume
func TestRecordQuietResume(t *testing.T) {
	if os.Getenv("EVE_RECORD_HISTORIES") != "1" {
		t.Skip("set EVE_RECORD_HISTORIES=1 to record testdata/histories")
	}
	prefix := os.Getenv("EVE_RECORD_PREFIX")
	if prefix == "" {
		t.Fatal("set EVE_RECORD_PREFIX to a new prefix: recorded histories of released code are kept as they are")
	}
	recordQuietResume(t, prefix)
}

// recordQuietResume: turns that tell their session nothing when their last
// request closes, with the inbox (the session's status read against it) and
// without search attributes: each parks and is approved, then a message
// answers at once.
func recordQuietResume(t *testing.T, prefix string) {
	t.Helper()
	for _, c := range []struct {
		name string
		env  func(*testing.T) *evetest.Env
	}{{"inbox", func(t *testing.T) *evetest.Env { return searchEnv(t, true) }}, {"plain", demoEnv}} {
		env := c.env(t)
		save := func(name, wid string) {
			if err := writeHistory(env.Ctx(30*time.Second), env.Client, wid, "", filepath.Join(historyDir, prefix+name+".json")); err != nil {
				t.Fatal(err)
			}
		}
		id, d := startParked(t, env, "refund ch_14 14")
		respond(t, env, id, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
		env.WaitIdle(id)
		env.SendAndWait(env.Ctx(60*time.Second), id, "what's the weather in Rome")
		env.WaitIdle(id)
		save("quiet-resume-"+c.name+"-session", id)
		save("quiet-resume-"+c.name+"-turn", id+"/turn_0")
	}
}
