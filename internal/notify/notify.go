// Package notify carries "session X changed (it now has N events)" from the
// workers that record events to the API servers that stream them, so a
// stream reads a session's events when they change instead of polling.
//
// Local is the in-process bus (a worker and an API server in one process,
// as in eve dev); Postgres carries the notifications between processes
// over PostgreSQL LISTEN/NOTIFY (EVE_NOTIFY=postgres://...). Delivery is
// best effort and may come early (before the workflow task that holds the
// event completes): readers re-read until they see the announced count.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Bus publishes and delivers session change notifications.
type Bus interface {
	// Notify announces that a session now holds events events (0:
	// unknown). It never blocks (workflow code calls it).
	Notify(sessionID string, events int)
	// Subscribe calls fn for each notification, from any goroutine; fn
	// must not block. A call with an empty sessionID means notifications
	// may have been lost (the bus reconnected): every session may have
	// changed. cancel stops the calls.
	Subscribe(fn func(sessionID string, events int)) (cancel func())
}

// Local is an in-process Bus.
type Local struct {
	mu   sync.RWMutex
	next int
	subs map[int]func(string, int)
}

// NewLocal returns an in-process bus.
func NewLocal() *Local { return &Local{subs: map[int]func(string, int){}} }

// Notify calls the subscribers.
func (l *Local) Notify(sessionID string, events int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, fn := range l.subs {
		fn(sessionID, events)
	}
}

// Subscribe adds fn.
func (l *Local) Subscribe(fn func(string, int)) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.next
	l.next++
	l.subs[k] = fn
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, k)
	}
}

// Open returns the bus a setting names: "" is none (nil, nil); "local" an
// in-process bus; postgres:// or postgresql:// a PostgreSQL bus, which
// runs until ctx ends.
func Open(ctx context.Context, setting string, logger *slog.Logger) (Bus, error) {
	switch {
	case setting == "":
		return nil, nil
	case setting == "local":
		return NewLocal(), nil
	case strings.HasPrefix(setting, "postgres://"), strings.HasPrefix(setting, "postgresql://"):
		return OpenPostgres(ctx, setting, logger)
	}
	return nil, fmt.Errorf("EVE_NOTIFY %q: want a postgres://user@host:port/db URL, or local", redact(setting))
}

// redact drops a URL's password.
func redact(s string) string {
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 {
		return s
	}
	userinfo := s[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return s[:scheme+3] + userinfo[:i] + ":***" + s[at:]
	}
	return s
}
