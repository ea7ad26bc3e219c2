package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
)

// eventLog is the events a workflow records for the session's stream: a
// turn's (handed to its session when it ends) or a session run's. An
// event's id derives from the session and the event's global index, so a
// replay makes the same ids.
type eventLog struct {
	rt        *runtime // notifies streams (never workflow state)
	sessionID string
	// base is the global index of events[0].
	base   int
	events []protocol.Event
	// deliveries are the messages the events answer (a turn's: the one it
	// runs for and those it took).
	deliveries []string
	// bytes is the size of the events' data.
	bytes int
	// relay, when set, sees every event emitted (a subagent's turn relays
	// its people in the loop to its parent: proxy.go).
	relay func(ctx workflow.Context, typ string, data any)
}

// emit records an event and tells the streams.
func (l *eventLog) emit(ctx workflow.Context, typ string, data any) {
	now := workflow.Now(ctx)
	idx := l.total()
	l.record(protocol.NewEvent(typ, data, protocol.EventID(now, l.sessionID, idx), now, l.deliveries))
	l.rt.notify(ctx, l.sessionID, l.total())
	if l.relay != nil {
		l.relay(ctx, typ, data)
	}
}

// record appends events recorded elsewhere (a finished turn's).
func (l *eventLog) record(evs ...protocol.Event) {
	for _, e := range evs {
		l.bytes += len(e.Data)
	}
	l.events = append(l.events, evs...)
}

// total is the global index after the last event.
func (l *eventLog) total() int { return l.base + len(l.events) }
