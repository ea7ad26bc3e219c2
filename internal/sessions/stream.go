package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Page is a window of a session's events, read in one go by Read.
type Page struct {
	// Events are the events from index From on (possibly none).
	Events []protocol.Event
	// From is the global index of Events[0]: the requested index, or for a
	// negative request the index it resolved to.
	From int
	// Total is how many events the session has recorded so far, counting
	// the running turn's; the stream's tail index is Total-1.
	Total int
	// Active is set while a turn is running (more events are on the way).
	Active bool
	// Turn locates the running turn's events (nil when none runs); pass
	// the page to ReadNext to read both logs at once next time.
	Turn *TurnCursor
}

// TurnCursor says where a running turn's events are: in workflow
// WorkflowID, its first event at global index Base.
type TurnCursor struct {
	WorkflowID string
	Base       int
}

// Tail returns the index of the last recorded event (-1 when none).
func (p Page) Tail() int { return p.Total - 1 }

// Read returns the session's events from a global index, with the number
// of events recorded so far. A negative from counts back from the tail
// (-1 is the last event), clamped at 0; a from beyond the tail returns no
// events and no error. The session's log and the running turn's log are
// joined exactly as Events does; unlike Events, Read never fails because
// the index is ahead of what the turn holds.
func (s *Service) Read(ctx context.Context, id string, from int) (Page, error) {
	if from < 0 {
		all, err := s.Read(ctx, id, 0)
		if err != nil {
			return all, err
		}
		start := max(0, all.Total+from)
		all.Events = all.Events[start:]
		all.From = start
		return all, nil
	}
	for attempt := 0; ; attempt++ {
		p, retry, err := s.read(ctx, id, from, nil)
		if err == nil || !retry || attempt >= 50 {
			return p, err
		}
		// The turn's child workflow is not started yet (the session records
		// it as active in the same workflow task that starts it).
		select {
		case <-ctx.Done():
			return Page{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ReadNext is Read(ctx, id, from) for a reader that polls: when the
// previous page saw a running turn, it queries the session and that turn
// at the same time (one round trip instead of two), and falls back to Read
// when the session says the turn has changed.
func (s *Service) ReadNext(ctx context.Context, id string, from int, prev Page) (Page, error) {
	if prev.Turn == nil || from < 0 {
		return s.Read(ctx, id, from)
	}
	type turnResult struct {
		evs []protocol.Event
		err error
	}
	guess := prev.Turn
	turnFrom := max(0, from-guess.Base)
	ch := make(chan turnResult, 1)
	go func() {
		evs, err := s.turnEvents(ctx, guess.WorkflowID, turnFrom)
		ch <- turnResult{evs, err}
	}()
	p, retry, err := s.read(ctx, id, from, func(cur TurnCursor) ([]protocol.Event, bool, error) {
		tr := <-ch
		if cur != *guess || tr.err != nil {
			return nil, false, nil // not what we guessed: query it afresh
		}
		return tr.evs, true, nil
	})
	if err != nil && retry {
		return s.Read(ctx, id, from)
	}
	return p, err
}

// read queries the session, then the running turn. prefetched, when set,
// may supply the turn's events from turnFrom (ok) instead of a query.
func (s *Service) read(ctx context.Context, id string, from int, prefetched func(TurnCursor) ([]protocol.Event, bool, error)) (Page, bool, error) {
	sp, err := s.page(ctx, id, "", from)
	if err != nil {
		return Page{}, false, err
	}
	p := Page{Events: sp.Events, From: from, Total: sp.Total}
	if len(sp.Runs) > 0 && from < sp.From {
		// Events recorded before a continue-as-new are read from their run.
		var old []protocol.Event
		for _, r := range sp.Runs {
			if from >= r.To {
				continue
			}
			start := max(from, r.From)
			rp, err := s.page(ctx, id, r.RunID, start)
			if err != nil {
				return Page{}, false, fmt.Errorf("events %d-%d of session %s (run %s): %w", r.From, r.To, id, r.RunID, err)
			}
			evs := rp.Events
			if n := r.To - start; len(evs) > n {
				evs = evs[:n]
			}
			old = append(old, evs...)
		}
		if len(old) != sp.From-from {
			return Page{}, true, fmt.Errorf("events of session %s: earlier runs returned %d events for [%d, %d)", id, len(old), from, sp.From)
		}
		p.Events = append(old, sp.Events...)
	}
	if sp.ActiveTurn == nil {
		return p, false, nil
	}
	p.Active = true
	// The turn's events follow everything the session itself holds
	// (ActiveTurn.Base). A clear or compact during the turn is recorded
	// after the turn's events, so indexes already streamed never shift.
	base := max(sp.ActiveTurn.Base, sp.Total)
	p.Turn = &TurnCursor{WorkflowID: sp.ActiveTurn.WorkflowID, Base: base}
	turnFrom := max(0, from-base)
	if prefetched != nil {
		if evs, ok, _ := prefetched(*p.Turn); ok {
			p.Events = append(p.Events, evs...)
			p.Total = base + turnFrom + len(evs)
			return p, false, nil
		}
	}
	evs, err := s.turnEvents(ctx, sp.ActiveTurn.WorkflowID, turnFrom)
	var qf *serviceerror.QueryFailed
	if errors.As(err, &qf) {
		// The index is past what the turn holds: read it all to learn
		// its length.
		all, err := s.turnEvents(ctx, sp.ActiveTurn.WorkflowID, 0)
		if err != nil {
			return p, true, err
		}
		p.Total = base + len(all)
		if turnFrom <= len(all) {
			p.Events = append(p.Events, all[turnFrom:]...)
		}
		return p, false, nil
	}
	if err != nil {
		return p, true, err
	}
	p.Events = append(p.Events, evs...)
	p.Total = base + turnFrom + len(evs)
	return p, false, nil
}

func (s *Service) turnEvents(ctx context.Context, workflowID string, from int) ([]protocol.Event, error) {
	v, err := s.Client.QueryWorkflow(ctx, workflowID, "", signals.QueryTurnEvents, from)
	if err != nil {
		return nil, fmt.Errorf("read events of turn %s: %w", workflowID, err)
	}
	var evs []protocol.Event
	if err := v.Get(&evs); err != nil {
		return nil, fmt.Errorf("decode events of turn %s: %w", workflowID, err)
	}
	return evs, nil
}

// OpenRequest is an input request with where it was asked.
type OpenRequest struct {
	protocol.InputRequest
	// Index is the global index of the input.requested event that asked.
	Index  int    `json:"index"`
	TurnID string `json:"turnId"`
}

// Inputs is the state of a session's input requests, folded from its events.
type Inputs struct {
	// Asked holds every request ever asked, by id.
	Asked map[string]OpenRequest
	// Open lists the requests still waiting for an answer, in the order asked.
	Open []OpenRequest
	// Settled holds the ids some input.resolved settled (invalid answers
	// do not settle a request).
	Settled map[string]bool
	// EndedTurns holds the turns that ended (turn.completed, turn.failed,
	// turn.cancelled); their unsettled requests are not open.
	EndedTurns map[string]bool
}

// FoldInputs folds events (evs[0] at global index from) into Inputs.
func FoldInputs(evs []protocol.Event, from int) Inputs {
	in := Inputs{Asked: map[string]OpenRequest{}, Settled: map[string]bool{}, EndedTurns: map[string]bool{}}
	var order []string
	for i, e := range evs {
		switch e.Type {
		case protocol.InputRequested:
			var d protocol.InputRequestedData
			if e.Decode(&d) != nil {
				continue
			}
			for _, r := range d.Requests {
				if _, seen := in.Asked[r.RequestID]; !seen {
					order = append(order, r.RequestID)
				}
				in.Asked[r.RequestID] = OpenRequest{InputRequest: r, Index: from + i, TurnID: d.TurnID}
			}
		case protocol.InputResolved:
			var d protocol.InputResolvedData
			if e.Decode(&d) != nil {
				continue
			}
			for _, r := range d.Resolutions {
				if r.Outcome != protocol.OutcomeInvalid {
					in.Settled[r.RequestID] = true
				}
			}
		case protocol.TurnCompleted, protocol.TurnFailed, protocol.TurnCancelled:
			var d protocol.TurnRef
			if e.Decode(&d) == nil {
				in.EndedTurns[d.TurnID] = true
			}
		}
	}
	for _, id := range order {
		r := in.Asked[id]
		if !in.Settled[id] && !in.EndedTurns[r.TurnID] {
			in.Open = append(in.Open, r)
		}
	}
	return in
}
