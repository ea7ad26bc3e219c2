package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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
	CodeTooManyStreams   = "too_many_streams"
	CodeNotFound         = "not_found"
	CodeSessionNotFound  = "session_not_found"
	CodeSessionNotActive = "session_not_active"
	CodeSessionEnded     = "session_ended"
	CodeTooLarge         = "payload_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnknownRequest   = "unknown_request"
	CodeInputNotPending  = "input_not_pending"
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
		writeError(w, he.status, he.code, he.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
}

// readObject reads a JSON object body. An empty body is {} when optional;
// a body needs content-type application/json (415 otherwise); bodies over
// the limit are 413 and nothing is read past it.
func (s *Server) readObject(w http.ResponseWriter, r *http.Request, optional bool) (map[string]json.RawMessage, error) {
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "unreadable request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return map[string]json.RawMessage{}, nil
		}
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "the request body is empty: send a JSON object")
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		if ct == "" {
			ct = "none"
		}
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "content type %s is not supported: send the body as application/json", ct)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		if err == nil || strings.Contains(err.Error(), "cannot unmarshal") {
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "expected a JSON object")
		}
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON body: %v", err)
	}
	if _, ok := obj["continuationToken"]; ok {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "session-ID routes do not accept 'continuationToken'")
	}
	return obj, nil
}

func tooLarge(limit int64) error {
	return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body too large: the limit is %d bytes", limit)
}

func isJSON(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
