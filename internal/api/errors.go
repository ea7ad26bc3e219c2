package api

import (
	"github.com/eve-temporal/eve/internal/httpbody"

	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/protocol"
)

// Error codes of the error body {ok:false, error, code}.
const (
	CodeBadRequest       = "bad_request"
	CodeInvalidJSON      = "invalid_json"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeForbiddenHost    = "forbidden_host"
	CodeForbiddenOrigin  = "forbidden_origin"
	CodeInvalidID        = "invalid_id"
	CodeRequestTimeout   = "request_timeout"
	CodeTooManyStreams   = "too_many_streams"
	CodeNotFound         = "not_found"
	CodeSessionNotFound  = "session_not_found"
	CodeSessionNotActive = "session_not_active"
	CodeSessionEnded     = "session_ended"
	CodeTooLarge         = "payload_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnknownRequest   = "unknown_request"
	CodeInputNotPending  = "input_not_pending"
	CodeInputExpired     = "input_expired"
	CodeRejected         = "rejected"
	CodeUnavailable      = "unavailable"
	CodeSessionBusy      = "session_busy"
	CodeInternal         = "internal_error"
)

func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpjson.Write(w, status, protocol.ErrorBody{OK: false, Error: msg, Code: code})
}

// overloadRetryAfter is the Retry-After (seconds) of a 503 or 429 that
// sets none of its own.
const overloadRetryAfter = 2

// httpError is a failure with its status and code.
type httpError struct {
	status int
	code   string
	msg    string
	// field is ErrorBody.Field (an invalid edit's failing field).
	field string
	// refused is ErrorBody.Refused (answers the policies refused).
	refused []protocol.Refusal
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		if (he.status == http.StatusServiceUnavailable || he.status == http.StatusTooManyRequests) && w.Header().Get("Retry-After") == "" {
			// Overload and unavailability are temporary: say when to retry.
			w.Header().Set("Retry-After", strconv.Itoa(overloadRetryAfter))
		}
		httpjson.Write(w, he.status, protocol.ErrorBody{OK: false, Error: he.msg, Code: he.code, Field: he.field, Refused: he.refused})
		return
	}
	writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
}

// readObject reads a JSON object body. A body must be application/json
// (415 otherwise, checked before anything is read) and exactly one JSON
// object (trailing data is 400). optional: the route also takes no body at
// all (eve's client sends none to create an empty session, or to clear or
// compact), which reads as {}; a cross-site page cannot send even that,
// since every such request carries an Origin the server refuses
// (docs/http-api.md, "Security"). Bodies over the limit are 413, and a body
// that does not arrive within the read timeout is 408.
func (s *Server) readObject(w http.ResponseWriter, r *http.Request, optional bool) (map[string]json.RawMessage, error) {
	ct := r.Header.Get("Content-Type")
	if !httpbody.HasBody(r) {
		if !optional {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "the request body is empty: send a JSON object")
		}
		if ct != "" && !httpbody.IsJSON(ct) {
			return nil, unsupportedMedia(ct)
		}
		return map[string]json.RawMessage{}, nil
	}
	if !httpbody.IsJSON(ct) {
		httpbody.Refusing(w, r)
		return nil, unsupportedMedia(ct)
	}
	body, err := httpbody.Read(w, r, s.opts.MaxBodyBytes)
	switch {
	case errors.Is(err, httpbody.ErrTooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%v", err)
	case errors.Is(err, httpbody.ErrTimeout):
		return nil, errorf(http.StatusRequestTimeout, CodeRequestTimeout, "%v", err)
	case err != nil:
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	if httpbody.Empty(body) {
		if optional {
			return map[string]json.RawMessage{}, nil
		}
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "the request body is empty: send a JSON object")
	}
	var obj map[string]json.RawMessage
	if err := httpbody.DecodeOne(body, &obj); err != nil || obj == nil {
		switch {
		case errors.Is(err, httpbody.ErrTrailingData):
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
		case err == nil || strings.Contains(err.Error(), "cannot unmarshal"):
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "expected a JSON object")
		}
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON body: %v", err)
	}
	if _, ok := obj["continuationToken"]; ok {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "session-ID routes do not accept 'continuationToken'")
	}
	return obj, nil
}

func unsupportedMedia(ct string) error {
	if ct == "" {
		ct = "none"
	}
	return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "content type %s is not supported: send the body as application/json", ct)
}
