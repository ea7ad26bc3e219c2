package client

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/eve-temporal/eve/protocol"
)

// Recording is a session exported as a test (ExportStubs).
type Recording = protocol.SessionRecording

// ExportStubs reads a session as a test: eve's tool stubs for every call
// that ran, the messages and answers that drove it, and its trajectory
// (GET /eve/v1/session/{id}/export-stubs).
func (c *Client) ExportStubs(ctx context.Context, sessionID string) (Recording, error) {
	var rec Recording
	_, err := c.do(ctx, http.MethodGet, sessionRoute(sessionID, "/export-stubs"), nil, &rec)
	return rec, err
}

// CreateStubbed starts a session with eve's tool stubs (the caller needs
// the grant: allowToolStubs, docs/evals.md) and returns its id.
func (c *Client) CreateStubbed(ctx context.Context, stubs []protocol.ToolStub) (string, error) {
	if stubs == nil {
		stubs = []protocol.ToolStub{}
	}
	var a Accepted
	if _, err := c.do(ctx, http.MethodPost, "/eve/v1/session", map[string]any{"stubs": stubs}, &a); err != nil {
		return "", err
	}
	return a.SessionID, nil
}

// ReplayResult is what a replay of a recording did.
type ReplayResult struct {
	// SessionID is the new session the replay drove.
	SessionID string
	// Calls are its trajectory.
	Calls []protocol.RecordedCall
	// Diff says where the trajectory differs from the recording's (tools
	// called, their order, their inputs) and which recorded answers found
	// no request to answer; "" when it is the same.
	Diff string
}

// Replay drives a recording against the server (a new build, a new
// model): it creates a session with the recording's stubs, so no call the
// recording saw run runs for real, sends its messages and answers its
// requests in order, each after the session settled (idle, or parked on
// input), and compares the trajectories. An answer finds its request by
// tool and kind among the open ones.
func (c *Client) Replay(ctx context.Context, rec Recording) (*ReplayResult, error) {
	id, err := c.CreateStubbed(ctx, rec.Stubs)
	if err != nil {
		return nil, fmt.Errorf("create the replay's session: %w", err)
	}
	res := &ReplayResult{SessionID: id}
	var notes []string
	for i, step := range rec.Steps {
		from, err := c.Tail(ctx, id)
		if err != nil {
			return res, err
		}
		if step.Message != "" {
			if _, err := c.Send(ctx, id, step.Message); err != nil {
				return res, fmt.Errorf("step %d: send %q: %w", i+1, step.Message, err)
			}
		} else {
			responses, missing, err := c.matchResponses(ctx, id, step.Respond)
			if err != nil {
				return res, fmt.Errorf("step %d: %w", i+1, err)
			}
			notes = append(notes, missing...)
			if len(responses) == 0 {
				continue
			}
			if _, err := c.Respond(ctx, id, responses...); err != nil {
				return res, fmt.Errorf("step %d: respond: %w", i+1, err)
			}
		}
		if _, err := c.WaitTurn(ctx, id, "", from+1, nil); err != nil {
			return res, fmt.Errorf("step %d: wait for the session to settle: %w", i+1, err)
		}
	}
	evs, _, err := c.Events(ctx, id, 0)
	if err != nil {
		return res, err
	}
	res.Calls = protocol.Trajectory(evs)
	res.Diff = protocol.DiffTrajectories(rec.Calls, res.Calls)
	if len(notes) > 0 {
		if res.Diff == "" {
			res.Diff = "the trajectory is the same, but:\n"
		}
		res.Diff += strings.Join(notes, "\n") + "\n"
	}
	return res, nil
}

// matchResponses finds, for each recorded answer, the open request of its
// tool and kind, oldest first; missing says which found none.
func (c *Client) matchResponses(ctx context.Context, id string, recorded []protocol.RecordedResponse) (out []protocol.InputResponse, missing []string, err error) {
	open, err := c.Pending(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	used := map[string]bool{}
	for _, r := range recorded {
		found := false
		for _, o := range open {
			q := o.InputRequest
			if used[q.RequestID] || q.Action.ToolName != r.ToolName || q.Kind != r.Kind {
				continue
			}
			used[q.RequestID], found = true, true
			out = append(out, protocol.InputResponse{RequestID: q.RequestID, OptionID: r.OptionID, Text: r.Text, Input: r.Input})
			break
		}
		if !found {
			missing = append(missing, fmt.Sprintf("! no open %s request of %s to answer %q", r.Kind, r.ToolName, r.OptionID+r.Text))
		}
	}
	return out, missing, nil
}
