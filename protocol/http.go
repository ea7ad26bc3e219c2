package protocol

// Bodies of eve's session protocol over HTTP (shared/eve-protocol.md): the
// API server writes them and the Go client reads them, from this one
// definition.

// Accepted is the body of an accepted create, message or answer batch
// (202).
type Accepted struct {
	OK         bool   `json:"ok"`
	SessionID  string `json:"sessionId"`
	Status     string `json:"status"`
	DeliveryID string `json:"deliveryId,omitempty"`
	// TurnID is the turn a message starts (not part of eve's body; eve's
	// client ignores it).
	TurnID string `json:"turnId,omitempty"`
	// Resolutions and Duplicates report what an answer batch settled;
	// Refused the answers its policies refused (Status "partial" when
	// others settled; when none did, the answer is an error: ErrorBody).
	Resolutions []InputResolution `json:"resolutions,omitempty"`
	Duplicates  []string          `json:"duplicates,omitempty"`
	Refused     []Refusal         `json:"refused,omitempty"`
}

// Refusal is an answer a policy judged and did not let settle its request
// (the tool's response policy; for an edited input, its approval policy
// too): the request stays open. Outcome and Reason are those of its
// approval.candidate (rejected, failed, timed-out, stale).
type Refusal struct {
	RequestID   string `json:"requestId"`
	CandidateID string `json:"candidateId"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
	// Edited: the answer approved with an edited input.
	Edited bool `json:"edited,omitempty"`
}

// ControlResult is the body of cancel, clear, compact and reset: Status is
// accepted, no_active_turn, no_active_session or reset.
type ControlResult struct {
	OK                bool   `json:"ok"`
	SessionID         string `json:"sessionId,omitempty"`
	PreviousSessionID string `json:"previousSessionId,omitempty"`
	Status            string `json:"status"`
}

// ErrorBody is every error response: {ok:false, error, code}. eve's client
// shows Error as the message and Code as ClientError.code.
type ErrorBody struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	// Field is the JSON pointer of the failing field of an edited input
	// (code invalid_input, e.g. "/amount"; "" for the whole input).
	Field string `json:"field,omitempty"`
	// Refused lists, for code rejected, the answers the policies refused
	// when none of a batch settled (the requests stay open).
	Refused []Refusal `json:"refused,omitempty"`
}

// Health is the body of GET /eve/v1/health when the server and Temporal
// answer (200).
type Health struct {
	OK         bool   `json:"ok"`
	Status     string `json:"status"`
	WorkflowID string `json:"workflowId"`
}
