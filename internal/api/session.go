package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/schema"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/internal/tracing"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// DefaultRequestTimeout bounds how long a write (a create, a message,
// answers, a control) waits for Temporal and the session workflow to
// accept it: shorter than the 30 s most HTTP clients wait, so saturated or
// absent workers answer 503 with Retry-After, never a client-side timeout.
const DefaultRequestTimeout = 20 * time.Second

func accepted(w http.ResponseWriter, body protocol.Accepted) {
	w.Header().Set("x-eve-session-id", body.SessionID)
	body.OK = true
	body.Status = "accepted"
	httpjson.Write(w, http.StatusAccepted, body)
}

// turnInput is a parsed message route body.
type turnInput struct {
	message   string
	responses []protocol.InputResponse
	policy    string // turnPolicy: "", "steer" or "queue"
	// schema is the message's outputSchema (nil: none).
	schema json.RawMessage
}

// parseTurnInput reads message / inputResponses like eve's
// parseSessionMessageBody: exactly one of them, message a non-empty string
// (or text parts), inputResponses a non-empty array of strict responses.
func parseTurnInput(obj map[string]json.RawMessage, create bool) (turnInput, error) {
	var in turnInput
	if _, ok := obj["stubs"]; ok && !create {
		return in, errorf(http.StatusBadRequest, CodeBadRequest, "'stubs' are fixed when a session is created: send them with POST /eve/v1/session")
	}
	msg, err := parseMessageField(obj["message"])
	if err != nil {
		return in, err
	}
	if raw, ok := obj["message"]; ok && !isNull(raw) && msg == "" && create {
		// An empty session is a create without a message; a message that
		// is there but blank is a mistake, refused as eve refuses it (and
		// as a send is).
		return in, errorf(http.StatusBadRequest, CodeBadRequest, "Expected 'message' to be non-empty when provided: send the user's text, or leave 'message' out to create an empty session.")
	}
	in.message = msg
	if raw, ok := obj["inputResponses"]; ok && !isNull(raw) {
		if create {
			return in, errorf(http.StatusBadRequest, CodeBadRequest, "a new session has no input requests: send 'message', not 'inputResponses'")
		}
		rs, err := parseInputResponses(raw)
		if err != nil {
			return in, err
		}
		in.responses = rs
	}
	if raw, ok := obj["turnPolicy"]; ok {
		if err := json.Unmarshal(raw, &in.policy); err != nil || (in.policy != signals.TurnPolicySteer && in.policy != signals.TurnPolicyQueue) {
			return in, errorf(http.StatusBadRequest, CodeBadRequest, "Expected 'turnPolicy' to be either 'queue' or 'steer'.")
		}
	}
	// clientContext is accepted and not used (yet). outputSchema asks the
	// message's turn for a structured result (result.completed): it must
	// be a JSON Schema this server can validate against.
	if raw, ok := obj["outputSchema"]; ok && !isNull(raw) {
		if !isObject(raw) {
			return in, errorf(http.StatusBadRequest, CodeBadRequest, "expected 'outputSchema' to be a JSON object")
		}
		if _, err := schema.Compile("outputSchema", raw); err != nil {
			return in, errorf(http.StatusBadRequest, CodeBadRequest, "'outputSchema' is not a usable JSON Schema: %v", err)
		}
		in.schema = bytes.TrimSpace(raw)
	}
	switch {
	case in.message != "" && in.responses != nil:
		return in, errorf(http.StatusBadRequest, CodeBadRequest, "'message' and 'inputResponses' are mutually exclusive: send one per request")
	case in.message == "" && in.responses == nil && !create:
		return in, errorf(http.StatusBadRequest, CodeBadRequest, "expected a non-empty 'message' or a non-empty 'inputResponses' array")
	case in.schema != nil && in.message == "" && in.responses == nil:
		// eve: turn-scoped fields need a message. With answers it is
		// accepted and not used (yet): answers resume a turn that has its
		// own.
		return in, errorf(http.StatusBadRequest, CodeBadRequest, "'outputSchema' asks a new turn for a structured result: send it with a 'message'")
	}
	if n := len(in.message); n > signals.MaxMessageBytes {
		return in, errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "message is %d bytes; the limit is %d bytes", n, signals.MaxMessageBytes)
	}
	return in, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// inputOrAbsent reads an answer's "input": null as no input (a plain
// answer, nothing edited), as JSON clients mean it, so that nothing
// records an "input": null.
func inputOrAbsent(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return nil
	}
	return raw
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func parseMessageField(raw json.RawMessage) (string, error) {
	if raw == nil || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return "", nil
		}
		return s, nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "expected 'message' to be a string or an array of text parts")
	}
	var texts []string
	for i, p := range parts {
		var typ, text string
		_ = json.Unmarshal(p["type"], &typ)
		switch typ {
		case "text":
			if err := json.Unmarshal(p["text"], &text); err != nil || text == "" {
				return "", errorf(http.StatusBadRequest, CodeBadRequest, "message part %d: text parts require a non-empty 'text' string", i+1)
			}
			texts = append(texts, text)
		case "file":
			var mt string
			_ = json.Unmarshal(p["mediaType"], &mt)
			return "", errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "message part %d: file parts (%s) are not supported by this server: send text", i+1, mt)
		default:
			return "", errorf(http.StatusBadRequest, CodeBadRequest, "message part %d: unsupported type %q: use 'text'", i+1, typ)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

func parseInputResponses(raw json.RawMessage) ([]protocol.InputResponse, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "expected 'inputResponses' to be a non-empty array")
	}
	out := make([]protocol.InputResponse, 0, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		dec := json.NewDecoder(bytes.NewReader(it))
		dec.DisallowUnknownFields()
		var r protocol.InputResponse
		if err := dec.Decode(&r); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "inputResponses[%d]: expected {requestId, optionId?, text?, input?}: %v", i, err)
		}
		if r.RequestID == "" {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "inputResponses[%d]: 'requestId' is required", i)
		}
		r.Input = inputOrAbsent(r.Input)
		if seen[r.RequestID] {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "inputResponses[%d]: request %s is answered twice in one batch", i, r.RequestID)
		}
		seen[r.RequestID] = true
		out = append(out, r)
	}
	return out, nil
}

// create: POST /eve/v1/session, with or without a first message.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	obj, err := s.readObject(w, r, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	stubs, err := s.parseStubs(r.Context(), obj)
	if err != nil {
		s.fail(w, err)
		return
	}
	in, err := parseTurnInput(obj, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	caller := Caller(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	// With an Idempotency-Key the session id, the Update ID and the
	// delivery id derive from it (and the caller): a retry joins the
	// session the first request started instead of starting another.
	id, updateID, dlv := "", "", sessions.NewID("dlv")
	if key != "" {
		d := deriveIDs(caller, "", key)
		id, updateID, dlv = d.sessionID, d.updateID, d.deliveryID
	}
	if in.message == "" {
		id, err := s.opts.Sessions.CreateStubbed(ctx, id, caller, stubs)
		if err != nil {
			s.fail(w, s.temporalError("create a session", id, err))
			return
		}
		s.owners.put(id, caller)
		accepted(w, protocol.Accepted{SessionID: id})
		return
	}
	began := time.Now()
	res, err := s.opts.Sessions.CreateAndSendStubbed(ctx, id, caller, updateID, stubs, signals.SendRequest{Message: in.message, DeliveryID: dlv, Caller: caller, TurnPolicy: in.policy, OutputSchema: in.schema})
	if err != nil {
		s.fail(w, s.temporalError("create a session", id, err))
		return
	}
	s.traceSend(began, res)
	s.owners.put(res.SessionID, caller)
	s.hub.wake(res.SessionID)
	accepted(w, protocol.Accepted{SessionID: res.SessionID, DeliveryID: res.DeliveryID, TurnID: res.TurnID})
}

// message: POST /eve/v1/session/{id} with a message or answers.
func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	obj, err := s.readObject(w, r, false)
	if err != nil {
		s.fail(w, err)
		return
	}
	in, err := parseTurnInput(obj, false)
	if err != nil {
		s.fail(w, err)
		return
	}
	if in.responses != nil {
		s.respond(w, r, id, in.responses)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	caller := Caller(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	// A message may answer an open prompt: it is checked like every send.
	if _, err := s.authorize(ctx, id, ActionSend, SessionAccess{Caller: caller, Message: in.message}); err != nil {
		s.fail(w, s.temporalError("send the message", id, err))
		return
	}
	updateID, dlv := "", sessions.NewID("dlv")
	if key != "" {
		d := deriveIDs(caller, id, key)
		updateID, dlv = d.updateID, d.deliveryID
	}
	began := time.Now()
	res, err := s.opts.Sessions.SendOnce(ctx, id, updateID, signals.SendRequest{Message: in.message, DeliveryID: dlv, Caller: caller, TurnPolicy: in.policy, OutputSchema: in.schema})
	if err != nil {
		s.fail(w, s.temporalError("send the message", id, err))
		return
	}
	s.traceSend(began, res)
	s.hub.wake(id)
	accepted(w, protocol.Accepted{SessionID: id, DeliveryID: res.DeliveryID, TurnID: res.TurnID})
}

// respond authorizes and delivers a batch of answers. When the session's
// owner answers and the server knows the turn its message went to, that is
// one round trip, the turn's respond Update; otherwise two: the session's
// summary (its owner, and the running turn to send to), then the turn's
// respond Update, whose validator decides the whole batch. Only
// a refused batch, and a caller the app's hook decides on, read the
// session's log (see inputsFor).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, id string, rs []protocol.InputResponse) {
	caller := Caller(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	if owner, ok := s.owners.get(id); ok && s.ownerAllows(caller, owner) {
		// The owner answers, most likely to the turn its message started:
		// one round trip when that turn takes the batch.
		if res, ok := s.opts.Sessions.RespondHinted(ctx, id, signals.RespondRequest{Responses: rs, Responder: caller}); ok {
			s.hub.wake(id)
			s.respondAccepted(w, id, res)
			return
		}
	}
	sum, err := s.opts.Sessions.Summary(ctx, id)
	if err != nil {
		s.fail(w, s.temporalError("read the session", id, err))
		return
	}
	s.owners.put(id, sum.Initiator)
	access := SessionAccess{SessionID: id, Action: ActionRespond, Owner: sum.Initiator, Caller: caller, Responses: rs}
	var inputs *protocol.Inputs
	if !s.ownerAllows(caller, sum.Initiator) && !s.mayAnswerEscalated(ctx, sum.ActiveTurn, caller, rs) {
		if s.opts.AuthorizeSession == nil && !caller.MayReview(sum.Initiator) {
			s.fail(w, s.forbidden(access))
			return
		}
		// A reviewer's grant and the app's hook see the requests being
		// answered (those the session asked) before anything else is said
		// about them.
		if inputs, err = s.inputsFor(ctx, id, sum.ActiveTurn, rs); err != nil {
			s.fail(w, s.temporalError("read the session", id, err))
			return
		}
		for _, resp := range rs {
			if q, ok := inputs.Asked(resp.RequestID); ok {
				access.Requests = append(access.Requests, q.InputRequest)
			}
		}
		if !s.allows(ctx, access) {
			s.fail(w, s.forbidden(access))
			return
		}
	}
	res, err := s.opts.Sessions.RespondTo(ctx, id, sum.ActiveTurn, signals.RespondRequest{Responses: rs, Responder: caller})
	if err != nil {
		var rej *sessions.RejectedError
		if errors.Is(err, sessions.ErrNoActiveTurn) || errors.As(err, &rej) {
			s.fail(w, s.refused(ctx, id, sum.ActiveTurn, rs, inputs, err))
			return
		}
		s.fail(w, s.temporalError("deliver the answers", id, err))
		return
	}
	s.hub.wake(id)
	s.respondAccepted(w, id, res)
}

// inputsFor folds the input requests of the session's log that rs answer.
// Answers almost always concern the running turn (active): its events are
// read first, and the whole log only when a request is not among them.
// Both are folded page by page.
func (s *Server) inputsFor(ctx context.Context, id string, active *signals.ActiveTurn, rs []protocol.InputResponse) (*protocol.Inputs, error) {
	from := 0
	if active != nil {
		from = active.Base
	}
	for {
		inputs, err := s.opts.Sessions.Inputs(ctx, id, from)
		if err != nil {
			return nil, err
		}
		missing := false
		for _, resp := range rs {
			if _, ok := inputs.Asked(resp.RequestID); !ok {
				missing = true
			}
		}
		if !missing || from == 0 {
			return inputs, nil
		}
		from = 0
	}
}

// refused says why a batch was refused (cause: the turn's validator
// rejected it, or no turn runs), from the session's log (inputs, read now
// when nil): an unknown request is 400 unknown_request; a request whose
// turn ended, or that is settled, 409 input_not_pending; any other
// rejection 400 rejected, with the validator's words.
func (s *Server) refused(ctx context.Context, id string, active *signals.ActiveTurn, rs []protocol.InputResponse, inputs *protocol.Inputs, cause error) error {
	if inputs == nil {
		var err error
		if inputs, err = s.inputsFor(ctx, id, active, rs); err != nil {
			return s.temporalError("read the session", id, err)
		}
	}
	for _, resp := range rs {
		if _, ok := inputs.Asked(resp.RequestID); !ok {
			return errorf(http.StatusBadRequest, CodeUnknownRequest, "session %s has no input request %q: answer a requestId from an input.requested event", id, resp.RequestID)
		}
	}
	for _, resp := range rs {
		if inputs.Expired(resp.RequestID) {
			return errorf(http.StatusGone, CodeInputExpired, "input request %s of session %s expired at its deadline: nobody answered in time, and the turn went on without it", resp.RequestID, id)
		}
	}
	settled := false
	for _, resp := range rs {
		q, _ := inputs.Asked(resp.RequestID)
		if inputs.TurnEnded(q.TurnID) && !inputs.Settled(resp.RequestID) {
			return errorf(http.StatusConflict, CodeInputNotPending, "input request %s of session %s is no longer pending: %s ended", resp.RequestID, id, q.TurnID)
		}
		if inputs.Settled(resp.RequestID) {
			if active == nil || active.TurnID != q.TurnID {
				return errorf(http.StatusConflict, CodeInputNotPending, "input request %s of session %s is already settled", resp.RequestID, id)
			}
			settled = true
		}
	}
	var rej *sessions.RejectedError
	if !errors.As(cause, &rej) {
		return errorf(http.StatusConflict, CodeInputNotPending, "session %s has no running turn waiting for input", id)
	}
	if he := editRejection(rej); he != nil {
		return he
	}
	status, code := http.StatusBadRequest, CodeRejected
	if settled {
		// A different answer to a settled request.
		status, code = http.StatusConflict, CodeInputNotPending
	}
	return errorf(status, code, "the answers were rejected and nothing was recorded: %s", rejectionMessage(rej))
}

// rejectionMessage digs the workflow's own words out of an update failure.
func rejectionMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// temporalError maps an error of sessions.Service to an HTTP error. A
// session found ended or gone wakes its own streams' reader, if it has
// one, so they end too (a terminated workflow records no event to be
// notified of); it wakes no other stream (hub.gone).
func (s *Server) temporalError(what, id string, err error) error {
	he := s.mapTemporalError(what, id, err)
	var h *httpError
	if id != "" && errors.As(he, &h) && (h.status == http.StatusGone || h.status == http.StatusNotFound) {
		s.hub.gone(id)
	}
	return he
}

func (s *Server) mapTemporalError(what, id string, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var ended *sessions.EndedError
	if errors.As(err, &ended) {
		return endedError(ended)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && strings.Contains(nf.Message, "already completed") {
		// A closed workflow the service could not describe.
		return errorf(http.StatusGone, CodeSessionEnded, "session %s has ended: its workflow is closed. %s", id, startAfresh(id))
	}
	if errors.Is(err, sessions.ErrNotFound) || (errors.As(err, &nf) && id != "") {
		return errorf(http.StatusNotFound, CodeSessionNotFound, "session %s not found", id)
	}
	var rej *sessions.RejectedError
	if errors.As(err, &rej) {
		return errorf(http.StatusConflict, CodeRejected, "could not %s: %s", what, rejectionMessage(rej))
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if appErr.Type() == signals.ErrSessionBusy {
			return errorf(http.StatusTooManyRequests, CodeSessionBusy, "could not %s: %s", what, appErr.Message())
		}
		// An update validator refused the request; nothing was recorded.
		return errorf(http.StatusBadRequest, CodeRejected, "could not %s: %s", what, appErr.Message())
	}
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	if errors.As(err, &deadline) || errors.As(err, &exhausted) || strings.Contains(err.Error(), "waiting for update") {
		// Temporal gave up before a worker took the request: workers (or the
		// cluster) are saturated. Temporary, so 503 with Retry-After.
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "could not %s: the session's workers did not answer in time (they may be overloaded). Retry after Retry-After with the same Idempotency-Key header, so a message taken meanwhile is not sent twice", what)
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "could not %s within %s: the session's workers may be overloaded, or none runs on task queue %q. Retry after Retry-After with the same Idempotency-Key header", what, s.opts.RequestTimeout, s.opts.Sessions.TaskQueue)
	}
	if errors.Is(err, context.Canceled) {
		return errorf(499, "cancelled", "the request was cancelled")
	}
	var nsNotFound *serviceerror.NamespaceNotFound
	if errors.As(err, &nsNotFound) {
		// Temporal also answers this when its namespace lookup failed (a
		// persistence timeout under load; its nsregistry says so in a
		// TODO). Either may be the case, so 503 with Retry-After and a
		// message for both; a real misconfiguration fails every request
		// and `eve doctor` names it.
		s.log.Warn("api: Temporal answered that the namespace is not found", "what", what, "session", id, "namespace", nsNotFound.Namespace, "err", err)
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "could not %s: Temporal answered that namespace %q is not found. Temporal answers this too when its store is overloaded: retry after Retry-After (with the same Idempotency-Key header); if it persists, check the namespace eve serve uses (--namespace, `eve doctor`)", what, nsNotFound.Namespace)
	}
	var unavailable *serviceerror.Unavailable
	var canceled *serviceerror.Canceled
	if errors.As(err, &unavailable) || errors.As(err, &canceled) {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "could not %s: Temporal is unavailable: %v", what, unavailable)
	}
	s.log.Error("api: request failed", "what", what, "session", id, "err", err)
	return errorf(http.StatusInternalServerError, CodeInternal, "could not %s: %v", what, err)
}

// startAfresh says what to do about ended session id.
func startAfresh(id string) string {
	return "It takes no more messages, answers or controls; what it recorded stays readable (GET /eve/v1/session/" + id + "/stream?follow=false): start a new session (POST /eve/v1/session)."
}

// endedError is 410 session_ended: the session's workflow closed (how, and
// why when Temporal recorded a reason) and what to do.
func endedError(e *sessions.EndedError) *httpError {
	msg := fmt.Sprintf("session %s has ended: its workflow was %s", e.SessionID, e.Status)
	if r := strings.TrimSpace(e.Reason); r != "" {
		msg += " (" + strings.TrimRight(r, ".") + ")"
	}
	return errorf(http.StatusGone, CodeSessionEnded, "%s. %s", msg, startAfresh(e.SessionID))
}

// control runs one control operation.
func (s *Server) control(w http.ResponseWriter, r *http.Request, req signals.ControlRequest) {
	id := r.PathValue("id")
	req.Caller = Caller(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	if _, err := s.authorize(ctx, id, req.Op, SessionAccess{Caller: req.Caller}); err != nil {
		s.fail(w, s.temporalError(req.Op+" the session", id, err))
		return
	}
	res, err := s.opts.Sessions.Control(ctx, id, req)
	if err != nil {
		s.fail(w, s.temporalError(req.Op+" the session", id, err))
		return
	}
	s.hub.wake(id)
	w.Header().Set("x-eve-session-id", id)
	switch res.Status {
	case signals.ControlAccepted:
		httpjson.Write(w, http.StatusAccepted, protocol.ControlResult{OK: true, SessionID: id, Status: res.Status})
	case signals.ControlReset:
		prev := res.PreviousSessionID
		if prev == "" {
			prev = id
		}
		httpjson.Write(w, http.StatusOK, protocol.ControlResult{OK: true, PreviousSessionID: prev, Status: res.Status})
	case signals.ControlNoActiveTurn, signals.ControlNoActiveSession:
		httpjson.Write(w, http.StatusOK, protocol.ControlResult{OK: true, Status: res.Status})
	default:
		s.fail(w, fmt.Errorf("%s session %s: the workflow answered an unknown status %q", req.Op, id, res.Status))
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	obj, err := s.readObject(w, r, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	var turnID string
	if raw, ok := obj["turnId"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &turnID) != nil || turnID == "" {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "expected 'turnId' to be a non-empty string"))
			return
		}
	}
	s.control(w, r, signals.ControlRequest{Op: signals.ControlCancel, TurnID: turnID})
}

func (s *Server) clear(w http.ResponseWriter, r *http.Request) {
	if _, err := s.readObject(w, r, true); err != nil {
		s.fail(w, err)
		return
	}
	s.control(w, r, signals.ControlRequest{Op: signals.ControlClear})
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	if _, err := s.readObject(w, r, true); err != nil {
		s.fail(w, err)
		return
	}
	s.control(w, r, signals.ControlRequest{Op: signals.ControlCompact})
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	obj, err := s.readObject(w, r, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	var reason string
	if raw, ok := obj["reason"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &reason) != nil || reason == "" {
			s.fail(w, errorf(http.StatusBadRequest, CodeBadRequest, "expected 'reason' to be a non-empty string"))
			return
		}
	}
	s.control(w, r, signals.ControlRequest{Op: signals.ControlResetOp, Reason: reason})
}

// traceSend puts an accepted message in the trace of the turn it went to:
// an eve.send span under the turn's root (ids derived from the turn, as
// the worker's; docs/observability.md).
func (s *Server) traceSend(began time.Time, res signals.SendResult) {
	if s.opts.Tracing == nil || res.TurnID == "" {
		return
	}
	s.opts.Tracing.Tracer.EmitNow(signals.TurnWorkflowID(res.SessionID, res.TurnID), tracing.Span{
		Key: "send/" + res.DeliveryID, Name: "eve.send", Start: began, End: time.Now(),
		Attrs: []attribute.KeyValue{
			attribute.String(tracing.AttrConversation, res.SessionID),
			attribute.String("eve.turn.id", res.TurnID),
			attribute.String("eve.delivery.id", res.DeliveryID),
		},
	})
}
