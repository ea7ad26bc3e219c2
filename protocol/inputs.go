package protocol

// OpenRequest is an input request and where it was asked.
type OpenRequest struct {
	InputRequest
	// Index is the global index of its input.requested event.
	Index  int    `json:"index"`
	TurnID string `json:"turnId"`
}

// Inputs folds a session's events, in stream order, into the state of its
// input requests: which were asked, which settled, which are still open.
// Readers of the stream (the API server, the Go client) fold with it, so
// they agree on what is open. A log read page by page folds to the same
// state as the whole of it. The zero value is ready to use.
type Inputs struct {
	order   []string // request ids in the order first asked
	asked   map[string]OpenRequest
	settled map[string]bool
	expired map[string]bool
	ended   map[string]bool // turns that ended
}

// Add folds one event, at global index i.
func (in *Inputs) Add(i int, e Event) {
	if in.asked == nil {
		in.asked, in.settled, in.ended, in.expired = map[string]OpenRequest{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	switch e.Type {
	case InputRequested:
		var d InputRequestedData
		if e.Decode(&d) != nil {
			return
		}
		for _, r := range d.Requests {
			if _, seen := in.asked[r.RequestID]; !seen {
				in.order = append(in.order, r.RequestID)
			}
			in.asked[r.RequestID] = OpenRequest{InputRequest: r, Index: i, TurnID: d.TurnID}
		}
	case InputResolved:
		var d InputResolvedData
		if e.Decode(&d) != nil {
			return
		}
		for _, r := range d.Resolutions {
			// An invalid answer does not settle its request.
			if r.Outcome != OutcomeInvalid {
				in.settled[r.RequestID] = true
			}
			if r.Outcome == OutcomeExpired {
				in.expired[r.RequestID] = true
			}
		}
	case TurnCompleted, TurnFailed, TurnCancelled:
		var d TurnRef
		if e.Decode(&d) == nil {
			in.ended[d.TurnID] = true
		}
	}
}

// AddEvents folds consecutive events, evs[0] at global index from.
func (in *Inputs) AddEvents(from int, evs []Event) {
	for i, e := range evs {
		in.Add(from+i, e)
	}
}

// Open returns the requests still waiting for an answer, in the order
// asked: not settled, and their turn has not ended.
func (in *Inputs) Open() []OpenRequest {
	var out []OpenRequest
	for _, id := range in.order {
		r := in.asked[id]
		if !in.settled[id] && !in.ended[r.TurnID] {
			out = append(out, r)
		}
	}
	return out
}

// Asked returns a request by id, whether or not it is still open.
func (in *Inputs) Asked(requestID string) (OpenRequest, bool) {
	r, ok := in.asked[requestID]
	return r, ok
}

// Settled reports whether an input.resolved settled the request.
func (in *Inputs) Settled(requestID string) bool { return in.settled[requestID] }

// TurnEnded reports whether the turn ended (turn.completed, turn.failed or
// turn.cancelled): its unsettled requests are no longer open.
func (in *Inputs) TurnEnded(turnID string) bool { return in.ended[turnID] }

// Expired reports whether the request reached its deadline unanswered.
func (in *Inputs) Expired(requestID string) bool { return in.expired[requestID] }
