package toolsapi

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/toolcatalog"
	"github.com/eve-temporal/eve/tools"
)

// A caller's catalog is the shared one plus what the resolvers listed per
// caller (tools.Resolver.CallerCatalog: dynamic connections) list for it.
// Listings are kept per caller (Options.MaxCallers, least recently seen
// out first) and refreshed as the shared listing is: the first read waits,
// later ones go on with the last listing while one goroutine lists again
// after ListedTTL. No lock is held while a resolver runs.

// callerCache keeps the callers' listings. The zero value with a limit is
// ready to use.
type callerCache struct {
	mu      sync.Mutex
	limit   int
	recent  list.List                // of *callerEntry, most recently seen first
	entries map[string]*list.Element // by callerKey
}

// callerEntry is one caller's listing. ready is closed once it was listed
// the first time; the other fields are guarded by callerCache.mu.
type callerEntry struct {
	key       string
	ready     chan struct{}
	listed    map[string][]*tools.Tool // by resolver: its last good listing
	gen       int                      // bumped when listed changes
	stale     time.Time
	relisting bool
	view      *catalogView // the shared view plus listed, once built
	viewGen   int          // the gen view was built of
	viewOn    *catalogView // the shared view it was built on
}

func callerKey(p auth.Principal) string { return principalType(p.Type) + "\x00" + p.ID }

// callerSession is the session a resolver lists a caller's tools for: the
// caller as Current and Initiator, as an execution's session names it
// (the execution workflow's session), so that the execution finds the
// same tools.
func callerSession(p auth.Principal) auth.Session {
	c := &auth.Principal{ID: p.ID, Type: principalType(p.Type)}
	return auth.Session{Auth: auth.Auth{Current: c, Initiator: c}}
}

// viewFor is the catalog caller sees.
func (s *Service) viewFor(caller auth.Principal) *catalogView {
	shared := s.current()
	if len(s.perCaller) == 0 {
		return shared
	}
	e, first := s.callerEntry(callerKey(caller))
	if first {
		func() {
			defer close(e.ready) // even if a resolver panics
			listed := s.listCaller(caller, nil)
			s.callers.mu.Lock()
			s.setListed(e, listed)
			s.callers.mu.Unlock()
		}()
	} else {
		<-e.ready // another request lists it; bounded by listedTimeout
	}
	s.callers.mu.Lock()
	if s.now().After(e.stale) && !e.relisting {
		e.relisting = true
		prev := e.listed
		go func() {
			listed := s.listCaller(caller, prev)
			s.callers.mu.Lock()
			s.setListed(e, listed)
			e.relisting = false
			s.callers.mu.Unlock()
		}()
	}
	if e.view != nil && e.viewGen == e.gen && e.viewOn == shared {
		v := e.view
		s.callers.mu.Unlock()
		return v
	}
	gen, listed := e.gen, e.listed
	s.callers.mu.Unlock()
	v := s.callerView(caller, shared, listed)
	s.callers.mu.Lock()
	if e.gen == gen {
		e.view, e.viewGen, e.viewOn = v, gen, shared
	}
	s.callers.mu.Unlock()
	return v
}

// callerEntry returns the caller's entry, creating it (first) when there
// is none, and marks it the most recently seen.
func (s *Service) callerEntry(key string) (e *callerEntry, first bool) {
	s.callers.mu.Lock()
	defer s.callers.mu.Unlock()
	c := &s.callers
	if el, ok := c.entries[key]; ok {
		c.recent.MoveToFront(el)
		return el.Value.(*callerEntry), false
	}
	if c.entries == nil {
		c.entries = map[string]*list.Element{}
	}
	e = &callerEntry{key: key, ready: make(chan struct{})}
	c.entries[key] = c.recent.PushFront(e)
	for c.recent.Len() > c.limit {
		oldest := c.recent.Back()
		c.recent.Remove(oldest)
		delete(c.entries, oldest.Value.(*callerEntry).key)
	}
	return e, true
}

// callerListing is what one listing of a caller found.
type callerListing struct {
	tools  map[string][]*tools.Tool
	failed bool
}

// setListed stores a listing (callerCache.mu held).
func (s *Service) setListed(e *callerEntry, l callerListing) {
	e.listed = l.tools
	e.gen++
	e.stale = s.now().Add(ListedTTL)
	if l.failed {
		e.stale = s.now().Add(listedRetry)
	}
}

// listCaller runs the per-caller resolvers for caller. A resolver that
// fails keeps its tools of prev (none at first) and is logged; the others
// are listed all the same.
func (s *Service) listCaller(caller auth.Principal, prev map[string][]*tools.Tool) callerListing {
	ctx, cancel := context.WithTimeout(context.Background(), listedTimeout)
	defer cancel()
	out := callerListing{tools: make(map[string][]*tools.Tool, len(s.perCaller))}
	rc := tools.ResolveContext{Context: ctx, Session: callerSession(caller)}
	for _, r := range s.perCaller {
		ts, err := callerCatalog(r, rc)
		if err == nil {
			err = tools.Compile(ts...)
		}
		if err != nil {
			// The principal's id, never its credentials: a connection's
			// errors name no token.
			s.log.Warn("toolsapi: a resolver's tools could not be listed for a caller; the caller's catalog keeps what it listed before (at first, none of this resolver's tools)",
				"resolver", r.Name, "principalType", principalType(caller.Type), "principalId", caller.ID, "err", err, "retryIn", listedRetry)
			out.failed = true
			ts = prev[r.Name]
		}
		out.tools[r.Name] = ts
	}
	return out
}

// callerView is the shared view extended with a caller's own tools (the
// shared one itself when it has none): its catalog extends the shared one,
// whose tools are not compiled again. A tool whose canonical or runtime
// name the shared catalog (or an earlier resolver) has is left out and
// logged: the shared tool wins, as it does when an execution looks the
// name up.
func (s *Service) callerView(caller auth.Principal, shared *catalogView, listed map[string][]*tools.Tool) *catalogView {
	taken := make(map[string]bool, 2*len(shared.byName))
	for name, t := range shared.byName {
		taken[name] = true
		taken[t.Name] = true
	}
	v := &catalogView{byName: map[string]*tools.Tool{}, base: shared, stale: shared.stale}
	var defs []catalog.Definition
	kits := map[string]bool{}
	for _, r := range s.perCaller {
		for _, t := range listed[r.Name] {
			d := toolcatalog.Definition(t, s.toolkit)
			if taken[d.Name] || taken[t.Name] {
				s.log.Warn("toolsapi: a caller's tool is left out: another tool has its name", "resolver", r.Name, "tool", d.Name,
					"principalType", principalType(caller.Type), "principalId", caller.ID)
				continue
			}
			taken[d.Name], taken[t.Name] = true, true
			defs = append(defs, d)
			v.byName[d.Name] = t
			kits[d.Toolkit] = true
		}
	}
	if len(defs) == 0 {
		return shared
	}
	cat, err := shared.cat.Extend(defs...)
	if err != nil {
		s.log.Warn("toolsapi: a caller's catalog could not be built; the caller sees the shared catalog", "err", err,
			"principalType", principalType(caller.Type), "principalId", caller.ID)
		return shared
	}
	v.cat = cat
	for k := range kits {
		v.own = append(v.own, k)
	}
	slices.Sort(v.own)
	return v
}

// callerCatalog runs a resolver's CallerCatalog; a panic is its error.
func callerCatalog(r tools.Resolver, rc tools.ResolveContext) (ts []*tools.Tool, err error) {
	defer func() {
		if p := recover(); p != nil {
			ts, err = nil, fmt.Errorf("CallerCatalog panicked: %v", p)
		}
	}()
	return r.CallerCatalog(rc)
}
