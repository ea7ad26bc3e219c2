package sessions

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Page is a window of a session's events, read by Read or ReadNext. A page
// may hold fewer events than are recorded after From: the workflows answer
// at most signals.MaxEventsPageBytes of events per query, and a page joins
// at most about that much from the session's runs and its running turn.
// Read on from Next (More says whether to do so at once).
type Page struct {
	// Events are the events from index From on (possibly none).
	Events []protocol.Event
	// From is the global index of Events[0]: the requested index, or for a
	// negative request the index it resolved to.
	From int
	// Total is how many events the session has recorded so far, counting
	// the running turn's and those this page does not hold; the stream's
	// tail index is Total-1.
	Total int
	// Active is set while a turn is running (more events are on the way).
	Active bool
	// Turn locates the running turn's events (nil when none runs); pass
	// the page to ReadNext to read both logs at once next time.
	Turn *TurnCursor
	// Ended: the page is of a closed session's record (ReadEnded), which
	// ReadNext reads on.
	Ended bool
}

// TurnCursor says where a running turn's events are: in workflow
// WorkflowID, its first event at global index Base.
type TurnCursor struct {
	WorkflowID string
	Base       int
}

// Tail returns the index of the last recorded event (-1 when none).
func (p Page) Tail() int { return p.Total - 1 }

// Next returns the index after the page's last event: where to read next.
func (p Page) Next() int { return p.From + len(p.Events) }

// More reports whether events after this page are already recorded (the
// page was cut at the size bound): read again from Next without waiting.
func (p Page) More() bool { return p.Next() < p.Total }

// farIndex is an index past any session's tail: reading there returns no
// events, only the totals.
const farIndex = 1 << 30

// Read returns a page of the session's events from a global index, with the
// number of events recorded so far. A negative from counts back from the
// tail (-1 is the last event), clamped at 0: Read learns the total first
// and reads from there, never the whole log. A from beyond the tail returns
// no events and no error. The page may end before the tail (see Page);
// the session's own log (older runs included) and the running turn's log
// are joined so that indexes never shift. A closed session answers
// *EndedError (ReadEnded reads what it recorded), an unknown one an error
// wrapping ErrNotFound.
func (s *Service) Read(ctx context.Context, id string, from int) (Page, error) {
	return s.readFrom(ctx, id, from, false)
}

// ReadEnded is Read for a session whose workflow has closed (State answers
// *EndedError): the events it recorded, which a worker reads by replaying
// the closed run's history. Temporal keeps that history for the
// namespace's retention period; after it, the session is unknown
// (ErrNotFound). A session closed during a turn (terminated) holds that
// turn's events too. Nothing is recorded after a read's Total.
func (s *Service) ReadEnded(ctx context.Context, id string, from int) (Page, error) {
	return s.readFrom(ctx, id, from, true)
}

func (s *Service) readFrom(ctx context.Context, id string, from int, ended bool) (Page, error) {
	if from < 0 {
		head, err := s.readRetry(ctx, id, farIndex, ended)
		if err != nil {
			return Page{}, err
		}
		from = max(0, head.Total+from)
	}
	return s.readRetry(ctx, id, from, ended)
}

func (s *Service) readRetry(ctx context.Context, id string, from int, ended bool) (Page, error) {
	for attempt := 0; ; attempt++ {
		p, retry, err := s.read(ctx, id, from, ended, nil)
		if err == nil || !retry || attempt >= 50 {
			return p, err
		}
		// The turn's workflow is not started yet (the session records
		// it as active in the same workflow task that starts it), or it
		// just ended and the session has not recorded that yet.
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
// when the session says the turn has changed. After a page of a closed
// session's record (prev.Ended) it is ReadEnded.
func (s *Service) ReadNext(ctx context.Context, id string, from int, prev Page) (Page, error) {
	if prev.Ended {
		return s.ReadEnded(ctx, id, from)
	}
	if prev.Turn == nil || from < 0 {
		return s.Read(ctx, id, from)
	}
	guess := *prev.Turn
	ch := make(chan turnRead, 1)
	go func() { ch <- s.readTurn(ctx, guess.WorkflowID, max(0, from-guess.Base), true) }()
	p, retry, err := s.read(ctx, id, from, false, func(cur TurnCursor) (turnRead, bool) {
		tr := <-ch
		return tr, cur == guess && tr.err == nil
	})
	if err != nil && retry {
		return s.Read(ctx, id, from)
	}
	return p, err
}

// turnRead is one read of a turn's log: its events from turn-local index
// from (when asked for), and its length n.
type turnRead struct {
	from int
	evs  []protocol.Event
	n    int
	err  error
}

// read queries the session, earlier runs as needed, then the running turn.
// ended: the session's latest run may be closed (ReadEnded). prefetched,
// when set, may supply the turn's read (ok) instead of queries. retry says
// the failure may pass (the turn's workflow was not there).
func (s *Service) read(ctx context.Context, id string, from int, ended bool, prefetched func(TurnCursor) (turnRead, bool)) (Page, bool, error) {
	v, err := s.queryRun(ctx, id, ended, signals.QueryEvents, signals.EventsQuery{From: from})
	if ended && recordedNothing(err) {
		return Page{From: from, Ended: true}, false, nil
	}
	if err != nil {
		return Page{}, false, err
	}
	var sp signals.EventsPage
	if err := v.Get(&sp); err != nil {
		return Page{}, false, fmt.Errorf("decode events of session %s: %w", id, err)
	}
	p := Page{From: from, Total: sp.Total, Ended: ended}
	budget := signals.MaxEventsPageBytes
	if from < sp.From {
		// Events recorded before a continue-as-new are read from their
		// runs, a page at a time: stop at the first short page.
		next := from
		for _, r := range sp.Runs {
			if next >= r.To {
				continue
			}
			if next < r.From {
				return Page{}, false, fmt.Errorf("events of session %s: no run holds events [%d, %d)", id, next, r.From)
			}
			if budget <= 0 {
				break
			}
			rp, err := s.page(ctx, id, r.RunID, next)
			if err != nil {
				return Page{}, false, fmt.Errorf("events %d-%d of session %s (run %s): %w", r.From, r.To, id, r.RunID, err)
			}
			evs := rp.Events
			if n := r.To - next; len(evs) > n {
				evs = evs[:n]
			}
			if rp.From != next || len(evs) == 0 {
				return Page{}, false, fmt.Errorf("events of session %s: run %s answered %d events from %d for index %d of [%d, %d)", id, r.RunID, len(evs), rp.From, next, r.From, r.To)
			}
			p.Events = append(p.Events, evs...)
			next += len(evs)
			budget -= eventsSize(evs)
			if next < r.To {
				break // a short page: the rest of this run comes next time
			}
		}
		if next == sp.From && budget > 0 {
			p.Events = append(p.Events, sp.Events...)
			budget -= eventsSize(sp.Events)
		}
	} else {
		p.Events = sp.Events
		budget -= eventsSize(sp.Events)
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
	next := p.Next()
	// The turn's events join the page only after all of the session's;
	// its length counts in Total either way.
	wantEvents := next >= sp.Total && budget > 0
	turnFrom := max(0, next-base)
	var tr turnRead
	ok := false
	if prefetched != nil {
		tr, ok = prefetched(*p.Turn)
		if ok && wantEvents && tr.from != turnFrom {
			ok = false
		}
	}
	if !ok {
		tr = s.readTurn(ctx, sp.ActiveTurn.WorkflowID, turnFrom, wantEvents)
	}
	if ended {
		// A closed session's turn ended with it (or never started):
		// nothing more is on the way.
		p.Active = false
		var nf *serviceerror.NotFound
		if recordedNothing(tr.err) || errors.As(tr.err, &nf) {
			// It closed before its first task, or never started (the
			// session had only initiated it).
			p.Turn = nil
			return p, false, nil
		}
	}
	if tr.err != nil {
		return p, !ended, tr.err
	}
	p.Total = base + tr.n
	if wantEvents {
		p.Events = append(p.Events, tr.evs...)
	}
	return p, false, nil
}

// recordedNothing reports a query of a closed workflow that recorded no
// events: it closed before its first workflow task completed, which
// Temporal answers with WorkflowNotReady, now and ever.
func recordedNothing(err error) bool {
	var nr *serviceerror.WorkflowNotReady
	return errors.As(err, &nr)
}

// page queries one run of the session (an earlier run: closed by continue-as-new).
func (s *Service) page(ctx context.Context, id, runID string, from int) (signals.EventsPage, error) {
	var page signals.EventsPage
	v, err := query.Value(ctx, s.Client, id, runID, signals.QueryEvents, signals.EventsQuery{From: from})
	if err != nil {
		return page, fmt.Errorf("read events of session %s: %w", id, err)
	}
	if err := v.Get(&page); err != nil {
		return page, fmt.Errorf("decode events of session %s: %w", id, err)
	}
	return page, nil
}

// eventsSize measures events as signals.PageEvents does.
func eventsSize(evs []protocol.Event) int {
	n := 0
	for _, e := range evs {
		n += len(e.Data) + 128
	}
	return n
}

// readTurn reads a turn's events from a turn-local index (when wantEvents)
// and its length. The turn's query answers a bounded page and not the
// length, so a non-empty page is followed by a query for the length.
func (s *Service) readTurn(ctx context.Context, workflowID string, from int, wantEvents bool) turnRead {
	tr := turnRead{from: from}
	if !wantEvents {
		tr.n, tr.err = s.turnLen(ctx, workflowID)
		return tr
	}
	evs, err := s.turnEvents(ctx, workflowID, from)
	if n, ok := outOfRange(err); ok {
		tr.n = n // the index is past what the turn holds
		return tr
	}
	if err != nil {
		tr.err = err
		return tr
	}
	tr.evs = evs
	if len(evs) == 0 {
		tr.n = from
		return tr
	}
	n, err := s.turnLen(ctx, workflowID)
	tr.n, tr.err = max(n, from+len(evs)), err
	return tr
}

var outOfRangePattern = regexp.MustCompile(`out of range \[0, ?(\d+)\]`)

// outOfRange reads the turn's length from the error its events query
// answers for an index past its end ("event index 9 out of range [0,4]").
func outOfRange(err error) (int, bool) {
	var qf *serviceerror.QueryFailed
	if err == nil || !errors.As(err, &qf) {
		return 0, false
	}
	m := outOfRangePattern.FindStringSubmatch(qf.Error())
	if m == nil {
		return 0, false
	}
	n, convErr := strconv.Atoi(m[1])
	return n, convErr == nil
}

// turnLen returns how many events a turn holds: its events query refuses an
// index past the end and names the length. Should it ever not, the events
// are counted a page at a time.
func (s *Service) turnLen(ctx context.Context, workflowID string) (int, error) {
	_, err := s.turnEvents(ctx, workflowID, farIndex)
	if n, ok := outOfRange(err); ok {
		return n, nil
	}
	var qf *serviceerror.QueryFailed
	if err != nil && !errors.As(err, &qf) {
		return 0, err
	}
	n := 0
	for {
		evs, err := s.turnEvents(ctx, workflowID, n)
		if m, ok := outOfRange(err); ok {
			return m, nil
		}
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			return n, nil
		}
		n += len(evs)
	}
}

func (s *Service) turnEvents(ctx context.Context, workflowID string, from int) ([]protocol.Event, error) {
	v, err := query.Value(ctx, s.Client, workflowID, "", signals.QueryTurnEvents, from)
	if err != nil {
		return nil, fmt.Errorf("read events of turn %s: %w", workflowID, err)
	}
	var evs []protocol.Event
	if err := v.Get(&evs); err != nil {
		return nil, fmt.Errorf("decode events of turn %s: %w", workflowID, err)
	}
	return evs, nil
}

// Inputs folds the session's events from index from (negative: from the
// tail) up to its tail, reading page by page without holding the events.
func (s *Service) Inputs(ctx context.Context, id string, from int) (*protocol.Inputs, error) {
	in := &protocol.Inputs{}
	p, err := s.Read(ctx, id, from)
	if err != nil {
		return nil, err
	}
	in.AddEvents(p.From, p.Events)
	for p.More() {
		if p, err = s.ReadNext(ctx, id, p.Next(), p); err != nil {
			return nil, err
		}
		if len(p.Events) == 0 {
			break
		}
		in.AddEvents(p.From, p.Events)
	}
	return in, nil
}
