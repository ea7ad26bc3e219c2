package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/eve-temporal/eve/protocol"
)

// Turn is what WaitTurn saw of one turn.
type Turn struct {
	SessionID string
	// Events are the turn's events as the response yielded them.
	Events []protocol.Event
	// Next is the index after the last event read (where to continue).
	Next int
	// Status is completed, failed, waiting (parked on input requests) or
	// cancelled.
	Status string
	// Reply is the last final assistant message.
	Reply string
	// Error describes a failed turn.
	Error string
	// Open lists the input requests the turn waits on (Status waiting).
	Open []protocol.InputRequest
}

// Turn statuses.
const (
	TurnCompleted = "completed"
	TurnFailed    = "failed"
	TurnWaiting   = "waiting"
	TurnCancelled = "cancelled"
)

// WaitTurn follows a session's stream from index from until the turn
// segment ends, the way eve's client reads a response: when deliveryID is
// set it skips events until one carries that delivery id, and after that
// skips events attributed to other deliveries. The segment ends at
// session.waiting, session.completed or session.failed, or at turn.waiting
// while input requests are open. fn, when set, sees every event kept.
func (c *Client) WaitTurn(ctx context.Context, sessionID, deliveryID string, from int, fn func(index int, e protocol.Event)) (*Turn, error) {
	st := c.Stream(ctx, sessionID, from, nil)
	defer st.Close()
	t := &Turn{SessionID: sessionID, Next: from}
	seen := deliveryID == ""
	var inputs Inputs
	for st.Next() {
		e := st.Event()
		t.Next = st.Cursor()
		if deliveryID != "" {
			mine := slices.Contains(e.Meta.DeliveryIDs, deliveryID)
			terminal := e.Type == protocol.SessionFailed || e.Type == protocol.SessionCompleted
			if !mine && terminal && (!seen || e.Type == protocol.SessionCompleted) {
				return t, fmt.Errorf("session %s ended before delivery %s reached its turn boundary", sessionID, deliveryID)
			}
			if !seen && !mine {
				continue
			}
			if !terminal && len(e.Meta.DeliveryIDs) > 0 && !mine {
				continue
			}
			seen = true
		}
		t.Events = append(t.Events, e)
		if fn != nil {
			fn(st.Index(), e)
		}
		inputs.Add(st.Index(), e)
		switch e.Type {
		case protocol.MessageCompleted:
			var d protocol.MessageCompletedData
			if e.Decode(&d) == nil && d.FinishReason != "tool-calls" && d.Message != "" {
				t.Reply = d.Message
			}
		case protocol.TurnFailed:
			var d protocol.TurnFailedData
			_ = e.Decode(&d)
			t.Status, t.Error = TurnFailed, d.Message
		case protocol.TurnCancelled:
			t.Status = TurnCancelled
		case protocol.TurnCompleted:
			if t.Status == "" {
				t.Status = TurnCompleted
			}
		case protocol.SessionWaiting, protocol.SessionCompleted:
			if t.Status == "" {
				t.Status = TurnCompleted
			}
			return t, nil
		case protocol.SessionFailed:
			t.Status = TurnFailed
			return t, nil
		case protocol.TurnWaiting:
			var d protocol.TurnWaitingData
			_ = e.Decode(&d)
			open := inputs.Open()
			if len(open) > 0 || d.On == "input" {
				t.Status = TurnWaiting
				for _, r := range open {
					t.Open = append(t.Open, r.InputRequest)
				}
				return t, nil
			}
		}
	}
	if err := st.Err(); err != nil {
		return t, err
	}
	return t, ctx.Err()
}

// SendAndWait sends a message (to a new session when sessionID is empty)
// and waits for its turn to end or park.
func (c *Client) SendAndWait(ctx context.Context, sessionID, message string, fn func(index int, e protocol.Event)) (*Turn, error) {
	var (
		acc  Accepted
		err  error
		from int
	)
	if sessionID == "" {
		acc, err = c.CreateAndSend(ctx, message)
	} else {
		if from, err = c.Tail(ctx, sessionID); err != nil {
			return nil, err
		}
		from++
		acc, err = c.Send(ctx, sessionID, message)
	}
	if err != nil {
		return nil, err
	}
	if acc.DeliveryID == "" {
		return nil, fmt.Errorf("the server accepted the message without a delivery id")
	}
	return c.WaitTurn(ctx, acc.SessionID, acc.DeliveryID, from, fn)
}

// RespondAndWait answers input requests and waits until the turn ends or
// parks again.
func (c *Client) RespondAndWait(ctx context.Context, sessionID string, responses []protocol.InputResponse, fn func(index int, e protocol.Event)) (Accepted, *Turn, error) {
	from, err := c.Tail(ctx, sessionID)
	if err != nil {
		return Accepted{}, nil, err
	}
	acc, err := c.Respond(ctx, sessionID, responses...)
	if err != nil {
		return acc, nil, err
	}
	t, err := c.WaitTurn(ctx, sessionID, "", from+1, fn)
	return acc, t, err
}

// PendingRequest is an open input request and where it was asked.
type PendingRequest = protocol.OpenRequest

// Pending lists the session's open input requests, oldest first.
func (c *Client) Pending(ctx context.Context, sessionID string) ([]PendingRequest, error) {
	evs, _, err := c.Events(ctx, sessionID, 0)
	if err != nil {
		return nil, err
	}
	var in Inputs
	in.AddEvents(0, evs)
	return in.Open(), nil
}

// Inputs folds events into the state of input requests: add events in
// stream order, then read Open. The zero value is ready to use. The API
// server folds with the same type.
type Inputs = protocol.Inputs
