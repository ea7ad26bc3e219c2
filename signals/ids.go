package signals

import (
	"errors"
	"regexp"
)

// The ids a URL carries are checked against their own formats before any
// Temporal call: an id that is no id of eve's (non-ASCII, control bytes, a
// path) is refused as malformed, and a well-formed id of another kind (a
// turn's workflow id, an execution's) is answered as any unknown session
// is, whatever its state and whoever asks.
var (
	sessionIDPattern   = regexp.MustCompile(`^ses_[A-Za-z0-9_-]{1,120}$`)
	executionIDPattern = regexp.MustCompile(`^exec_[A-Za-z0-9_-]{1,120}$`)
	// eveIDPattern: any id eve derives (a session, a turn's workflow id
	// "<session>/turn_<n>", an execution, an action), at most four
	// segments of letters, digits, '_' and '-'.
	eveIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,120}(/[A-Za-z0-9_-]{1,120}){0,3}$`)
)

var (
	// ErrMalformedID: the id is no id of eve's.
	ErrMalformedID = errors.New("malformed id")
	// ErrNotSessionID, ErrNotExecutionID: a well-formed id of another kind.
	ErrNotSessionID   = errors.New("not a session id")
	ErrNotExecutionID = errors.New("not an execution id")
)

// CheckExecutionID says whether id is a tools API execution id ("exec_…"):
// nil, ErrNotExecutionID, or ErrMalformedID.
func CheckExecutionID(id string) error {
	switch {
	case executionIDPattern.MatchString(id):
		return nil
	case eveIDPattern.MatchString(id):
		return ErrNotExecutionID
	}
	return ErrMalformedID
}

// CheckSessionID says whether id is a session id: nil, ErrNotSessionID,
// or ErrMalformedID.
func CheckSessionID(id string) error {
	switch {
	case sessionIDPattern.MatchString(id):
		return nil
	case eveIDPattern.MatchString(id):
		return ErrNotSessionID
	}
	return ErrMalformedID
}
