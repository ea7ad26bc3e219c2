package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
)

// maxFeedEvents bounds the recent events a feed keeps for its streams; a
// stream further behind reads on its own until it catches up.
const maxFeedEvents = 4096

// hub runs one reader (a feed) per session with open streams on this
// server and fans its events out to them. With a notification bus, a feed
// reads only when told the session changed (a notification, or a write
// through this server): an idle stream costs no query. Without one, each
// feed polls (one poller per session, not per stream).
type hub struct {
	svc              *sessions.Service
	log              *slog.Logger
	push             bool
	poll, idlePoll   time.Duration
	mu               sync.Mutex
	feeds            map[string]*feed
	unsubscribeNotes func()
	// listeners hear every change (inbox event streams); they must not block.
	listeners map[int]func(sessionID string)
	nextID    int
}

func newHub(svc *sessions.Service, bus notify.Bus, poll, idlePoll time.Duration, log *slog.Logger) *hub {
	h := &hub{svc: svc, log: log, push: bus != nil, poll: poll, idlePoll: idlePoll, feeds: map[string]*feed{}, listeners: map[int]func(string){}}
	if bus != nil {
		h.unsubscribeNotes = bus.Subscribe(h.notified)
	}
	return h
}

func (h *hub) close() {
	if h.unsubscribeNotes != nil {
		h.unsubscribeNotes()
	}
}

// notified handles a notification: session id now holds events events
// ("" id: anything may have changed).
func (h *hub) notified(id string, events int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fn := range h.listeners {
		fn(id)
	}
	if id == "" {
		for _, f := range h.feeds {
			f.kick(0)
		}
		return
	}
	if f := h.feeds[id]; f != nil {
		f.kick(events)
	}
}

// listen calls fn with the id of every session that changed ("": any may
// have); fn must not block. cancel stops the calls.
func (h *hub) listen(fn func(sessionID string)) (cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.nextID
	h.nextID++
	h.listeners[k] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.listeners, k)
	}
}

// wake makes the session's feed read now (a write through this server).
func (h *hub) wake(id string) { h.notified(id, 0) }

// gone makes the feed of a session found unknown or ended read now, so its
// open streams end; nobody else hears of it. Inbox streams (listeners) are
// not told: an unknown id concerns nobody's inbox, and telling every open
// stream of each would let anyone make them all look the id up (a burst
// of sends to made-up ids would cost N streams N lookups each).
func (h *hub) gone(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.feeds[id]; f != nil {
		f.kick(0)
	}
}

// feed reads one session's events for its subscribers.
type feed struct {
	h    *hub
	id   string
	wake chan struct{}
	stop context.CancelFunc
	ctx  context.Context

	mu    sync.Mutex
	start int              // global index of evs[0]
	evs   []protocol.Event // recent events, up to next
	next  int              // index after the last event read
	want  int              // highest count announced
	ended bool             // the session is gone or closed
	subs  map[*subscription]struct{}
}

// subscription is one stream's place in a feed. C is signalled (never
// blocking) when events or the end are there for it.
type subscription struct {
	f *feed
	C chan struct{}
}

// subscribe adds a stream that has read up to cursor (its next index).
func (h *hub) subscribe(id string, cursor int) *subscription {
	sub := &subscription{C: make(chan struct{}, 1)}
	h.mu.Lock()
	f := h.feeds[id]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{h: h, id: id, wake: make(chan struct{}, 1), ctx: ctx, stop: cancel,
			start: cursor, next: cursor, subs: map[*subscription]struct{}{}}
		h.feeds[id] = f
		go f.run()
	}
	sub.f = f
	f.mu.Lock()
	f.subs[sub] = struct{}{}
	ahead := cursor > f.next
	f.mu.Unlock()
	h.mu.Unlock()
	if ahead {
		// The stream read events the feed has not: read (they are there).
		f.kick(cursor)
	}
	return sub
}

// close removes the subscription; the last one stops the feed.
func (s *subscription) close() {
	f := s.f
	f.h.mu.Lock()
	f.mu.Lock()
	delete(f.subs, s)
	last := len(f.subs) == 0
	f.mu.Unlock()
	if last && f.h.feeds[f.id] == f {
		delete(f.h.feeds, f.id)
		f.stop()
	}
	f.h.mu.Unlock()
}

// since returns the events from cursor on that the feed holds. behind: the
// feed no longer holds cursor (read it yourself); ended: no more will come.
func (s *subscription) since(cursor int) (evs []protocol.Event, behind, ended bool) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if cursor < f.start {
		return nil, true, false
	}
	if cursor < f.next {
		evs = f.evs[cursor-f.start:]
	}
	return evs, false, f.ended && cursor >= f.next
}

// kick asks the feed to read (events: the count announced, 0 unknown).
func (f *feed) kick(events int) {
	f.mu.Lock()
	f.want = max(f.want, events)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// retryDelays are the waits of a feed that was told of events it cannot
// read yet (the notification came before the workflow task completed).
var retryDelays = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond,
	80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond}

func (f *feed) run() {
	defer f.stop()
	var page sessions.Page
	retry := 0
	lastActivity := time.Now()
	lastType := ""
	timer := time.NewTimer(0) // the first read: events since the first cursor
	defer timer.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
			retry = 0
			lastActivity = time.Now()
		case <-timer.C:
		}
		var err error
		got := false
		for {
			f.mu.Lock()
			from := f.next
			f.mu.Unlock()
			rctx, cancel := context.WithTimeout(f.ctx, readTimeout)
			var p sessions.Page
			p, err = f.h.svc.ReadNext(rctx, f.id, from, page)
			cancel()
			if err != nil {
				break
			}
			page = p
			if len(p.Events) > 0 {
				got = true
				lastType = p.Events[len(p.Events)-1].Type
				f.append(p.Events)
			}
			if !p.More() || len(p.Events) == 0 {
				break
			}
		}
		switch {
		case f.ctx.Err() != nil:
			return
		case errors.Is(err, sessions.ErrNotFound), errors.Is(err, sessions.ErrEnded):
			f.end()
			return
		case err != nil:
			f.h.log.Debug("api: stream read failed; retrying", "session", f.id, "err", err)
		}
		if got {
			lastActivity = time.Now()
			retry = 0
		}
		f.mu.Lock()
		short := f.want > f.next
		f.mu.Unlock()
		wait := time.Duration(-1)
		switch {
		case (short || err != nil) && retry < len(retryDelays):
			// Told of events not readable yet, or a failed read: re-read
			// after a short, bounded backoff.
			wait = retryDelays[retry]
			retry++
		case !f.h.push:
			wait = f.h.interval(page.Active, lastType, lastActivity)
		case short || err != nil:
			// Still behind what a notification announced (a loaded worker or
			// cluster): keep reading at the slowest retry pace until the
			// events are there, so a stream never stalls on a missed read.
			wait = retryDelays[len(retryDelays)-1]
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
	}
}

// append records events read and signals the subscribers.
func (f *feed) append(evs []protocol.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evs = append(f.evs, evs...)
	f.next += len(evs)
	if n := len(f.evs) - maxFeedEvents; n > 0 {
		f.evs = append([]protocol.Event(nil), f.evs[n:]...)
		f.start += n
	}
	f.signal()
}

func (f *feed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	f.signal()
}

func (f *feed) signal() {
	for s := range f.subs {
		select {
		case s.C <- struct{}{}:
		default:
		}
	}
}

// interval is a polling feed's wait before the next read: PollInterval
// while events flow (within fastWindow of the last event or write), five
// times that while a turn runs quietly, and IdlePollInterval when the
// session is idle or the turn is parked on input (its answer comes through
// a write, which wakes the feed).
func (h *hub) interval(active bool, lastType string, lastActivity time.Time) time.Duration {
	switch {
	case time.Since(lastActivity) < fastWindow:
		return h.poll
	case active && lastType != protocol.TurnWaiting:
		return min(5*h.poll, h.idlePoll)
	}
	return h.idlePoll
}
