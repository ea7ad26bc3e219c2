package sessions

import "sync"

// maxTurnHints bounds the sessions whose running turn a Service remembers.
const maxTurnHints = 10000

// turnHints remembers each session's last known turn workflow (from a send's
// result or a summary), so an answer can go straight to it: one round trip
// instead of two. A hint is only ever a guess; the turn's respond validator
// refuses answers that are not its own, and a refused or stale guess falls
// back to asking the session.
type turnHints struct {
	mu sync.Mutex
	m  map[string]string // session id → turn workflow id
}

func (h *turnHints) put(sessionID, workflowID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]string{}
	}
	if _, ok := h.m[sessionID]; !ok && len(h.m) >= maxTurnHints {
		for k := range h.m { // forget any one: hints are cheap to learn again
			delete(h.m, k)
			break
		}
	}
	h.m[sessionID] = workflowID
}

func (h *turnHints) get(sessionID string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wid, ok := h.m[sessionID]
	return wid, ok
}

func (h *turnHints) drop(sessionID, workflowID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[sessionID] == workflowID {
		delete(h.m, sessionID)
	}
}
