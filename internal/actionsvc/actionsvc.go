// Package actionsvc serves delegated actions' completion URLs:
// POST <url> settles the action, POST <url>/heartbeat keeps its job alive.
// Status codes follow shared/design.md exactly.
package actionsvc

import (
	"github.com/eve-temporal/eve/internal/httpbody"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// MaxBodyBytes bounds a completion body, whatever the tool's
// MaxOutputBytes (which the settle Update's validator checks: 422).
const MaxBodyBytes = 4 << 20

// MaxHeartbeatDetailsBytes bounds a heartbeat's details: under the 64 KiB
// above which a payload leaves history for the payload store, so a job
// that heartbeats often leaves no object behind per beat.
const MaxHeartbeatDetailsBytes = 16 << 10

// Service settles actions through Temporal.
type Service struct {
	Client client.Client
	Signer *capability.Signer
	Logger *slog.Logger
	// Timeout bounds the Temporal calls of one request (default 10 s).
	Timeout time.Duration
	Now     func() time.Time
}

// Body is what a job posts.
type Body struct {
	Output json.RawMessage       `json:"output,omitempty"`
	Error  *protocol.ActionError `json:"error,omitempty"`
}

// Reply is the JSON answer.
type Reply struct {
	OK              bool   `json:"ok"`
	ActionID        string `json:"actionId,omitempty"`
	Status          string `json:"status,omitempty"`
	Duplicate       bool   `json:"duplicate,omitempty"`
	CancelRequested *bool  `json:"cancelRequested,omitempty"`
	Error           string `json:"error,omitempty"`
	Code            string `json:"code,omitempty"`
}

func fail(status int, code, msg string) (int, Reply) {
	return status, Reply{OK: false, Error: msg, Code: code}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 10 * time.Second
}

// verify checks the token before anything reaches Temporal: a bad task
// token can make Temporal wait until its timeout, so a forged or expired
// one is answered here, at once.
func (s *Service) verify(token string) (capability.Claims, int, Reply, bool) {
	c, err := s.Signer.Verify(token, s.now())
	switch {
	case errors.Is(err, capability.ErrExpired):
		st, r := fail(http.StatusUnauthorized, "capability_expired", "this completion URL has expired")
		return c, st, r, false
	case err != nil:
		st, r := fail(http.StatusUnauthorized, "invalid_capability", "this completion URL is not valid (forged or malformed)")
		return c, st, r, false
	}
	return c, 0, Reply{}, true
}

// Complete settles the action named by token.
func (s *Service) Complete(ctx context.Context, token string, body Body) (int, Reply) {
	c, st, r, ok := s.verify(token)
	if !ok {
		return st, r
	}
	if (body.Output == nil) == (body.Error == nil) {
		return fail(http.StatusBadRequest, "invalid_body", `send {"output": ...} or {"error": {"message": ..., "code": ...}}`)
	}
	if body.Error != nil && strings.TrimSpace(body.Error.Message) == "" {
		return fail(http.StatusBadRequest, "invalid_body", "error.message is required")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   c.WorkflowID,
		UpdateName:   signals.UpdateSettleAction,
		Args:         []any{signals.SettleAction{ActionID: c.ActionID, Output: body.Output, Error: body.Error}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var dec signals.SettleDecision
	if err == nil {
		err = h.Get(ctx, &dec)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// The turn is over: compare with how the action settled.
			return s.late(ctx, c, body)
		}
		return s.mapError(c, err)
	}
	status := protocol.StatusCompleted
	if body.Error != nil {
		status = protocol.StatusFailed
	}
	if dec.Decision == signals.DecisionDuplicate {
		return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, Status: status, Duplicate: true}
	}
	result := signals.ActionResult{Kind: signals.ResultKind, Status: status, Output: body.Output, Error: body.Error}
	if err := s.Client.CompleteActivityByID(ctx, c.Namespace, c.WorkflowID, "", c.ActivityID, result, nil); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// Completed already (a retry after a crash), or ended first.
			return s.late(ctx, c, body)
		}
		if st, r, ok := tooLarge(c, err); ok {
			return st, r
		}
		s.log().Error("complete activity", "action", c.ActionID, "err", err)
		return fail(http.StatusServiceUnavailable, "temporal_unavailable", "could not reach Temporal; retry")
	}
	return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, Status: status}
}

// late answers a completion that found no pending activity (its workflow
// ended, or the activity completed) by the late-completion rule
// (signals.ActionState.LateSettle): a repeat of how the action settled is
// a duplicate (200), anything else 409 or 410.
func (s *Service) late(ctx context.Context, c capability.Claims, body Body) (int, Reply) {
	st, err := s.state(ctx, c)
	if err != nil {
		return fail(http.StatusGone, "action_ended", fmt.Sprintf("the turn of action %s has ended", c.ActionID))
	}
	if err := st.LateSettle(signals.SettleAction{ActionID: c.ActionID, Output: body.Output, Error: body.Error}); err != nil {
		return refusal(err)
	}
	status := protocol.StatusCompleted
	if body.Error != nil {
		status = protocol.StatusFailed
	}
	return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, Status: status, Duplicate: true}
}

// refusal answers a *signals.SettleError with its status and code.
func refusal(err error) (int, Reply) {
	var se *signals.SettleError
	if errors.As(err, &se) {
		if status, code, ok := signals.SettleHTTP(se.Type); ok {
			return fail(status, code, se.Message)
		}
	}
	return fail(http.StatusInternalServerError, "internal_error", err.Error())
}

func (s *Service) mapError(c capability.Claims, err error) (int, Reply) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		// The settle Update's validator refused it (signals.ActionState.CheckSettle).
		if status, code, ok := signals.SettleHTTP(appErr.Type()); ok {
			return fail(status, code, appErr.Message())
		}
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fail(http.StatusGone, "action_ended", fmt.Sprintf("the turn of action %s has ended", c.ActionID))
	}
	if st, r, ok := tooLarge(c, err); ok {
		return st, r
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fail(http.StatusServiceUnavailable, "worker_unavailable", "no worker answered in time; retry")
	}
	s.log().Error("settle action", "action", c.ActionID, "err", err)
	return fail(http.StatusServiceUnavailable, "temporal_unavailable", "could not settle the action now; retry")
}

// tooLarge answers Temporal's refusal of a payload over its blob size
// limit (2 MB by default, when the client does not offload large payloads
// to External Storage): 413, since retrying the same body cannot succeed.
func tooLarge(c capability.Claims, err error) (int, Reply, bool) {
	var ia *serviceerror.InvalidArgument
	if !errors.As(err, &ia) || !strings.Contains(strings.ToLower(ia.Error()), "size exceeds limit") {
		return 0, Reply{}, false
	}
	st, r := fail(http.StatusRequestEntityTooLarge, "body_too_large",
		fmt.Sprintf("Temporal refused the completion of action %s as too large (%s): send less output (page or summarize), or offload large payloads to External Storage", c.ActionID, ia.Error()))
	return st, r, true
}

func (s *Service) state(ctx context.Context, c capability.Claims) (signals.ActionState, error) {
	var st signals.ActionState
	v, err := query.Value(ctx, s.Client, c.WorkflowID, "", signals.QueryAction, c.ActionID)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// Heartbeat keeps a job alive and tells it whether to stop.
func (s *Service) Heartbeat(ctx context.Context, token string, details json.RawMessage) (int, Reply) {
	c, st, r, ok := s.verify(token)
	if !ok {
		return st, r
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	var args []any
	if len(details) > 0 {
		args = append(args, details)
	}
	err := s.Client.RecordActivityHeartbeatByID(ctx, c.Namespace, c.WorkflowID, "", c.ActivityID, args...)
	yes, no := true, false
	var canceled *temporal.CanceledError
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, CancelRequested: &no}
	case errors.As(err, &canceled):
		return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, CancelRequested: &yes}
	case errors.As(err, &nf):
		if st, qerr := s.state(ctx, c); qerr == nil && st.State == signals.ActionCancelled {
			return http.StatusOK, Reply{OK: true, ActionID: c.ActionID, Status: st.State, CancelRequested: &yes}
		}
		return fail(http.StatusGone, "action_ended", fmt.Sprintf("action %s has ended", c.ActionID))
	}
	s.log().Error("heartbeat", "action", c.ActionID, "err", err)
	return fail(http.StatusServiceUnavailable, "temporal_unavailable", "could not record the heartbeat; retry")
}

func (s *Service) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// RedactPath returns a request path fit for logs: the capability of a
// completion URL ({prefix}{token}[/heartbeat]) is replaced by "…".
func RedactPath(path string) string { return actions.RedactPath(path) }

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	return strings.TrimSpace(h[7:]), true
}

// ServeHTTP handles POST {prefix}{token} and POST {prefix}{token}/heartbeat,
// where prefix is signals.ActionsPath, and the same with the capability
// in an "Authorization: Bearer <token>" header: POST {prefix}{action id}
// (or {prefix} alone) and POST {prefix}{action id}/heartbeat. With the
// header, a path that names another action than the capability is refused
// (401 invalid_capability).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, signals.ActionsPath)
	token, heartbeat := strings.CutSuffix(rest, "/heartbeat")
	named := "" // the action the path names, with the header form
	if h, ok := bearer(r); ok {
		if token != h {
			named = token
		}
		token = h
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpjson.Write(w, http.StatusMethodNotAllowed, Reply{Error: "use POST", Code: "method_not_allowed"})
		return
	}
	// The capability decides before the body is read: a forged or expired
	// one, or one for another action than the path names, is answered at
	// once, even when its body stalls.
	claims, _, _, ok := s.verify(token)
	if ok && named != "" && claims.ActionID != named {
		httpbody.Refusing(w, r)
		httpjson.Write(w, http.StatusUnauthorized, Reply{Error: "the capability in the Authorization header is for another action than the URL names", Code: "invalid_capability"})
		return
	}
	if !ok {
		httpbody.Refusing(w, r)
		if heartbeat {
			st, rep := s.Heartbeat(r.Context(), token, nil)
			httpjson.Write(w, st, rep)
			return
		}
		st, rep := s.Complete(r.Context(), token, Body{})
		httpjson.Write(w, st, rep)
		return
	}
	if ct := r.Header.Get("Content-Type"); httpbody.HasBody(r) && !httpbody.IsJSON(ct) {
		httpbody.Refusing(w, r)
		httpjson.Write(w, http.StatusUnsupportedMediaType, Reply{Error: "send the body as JSON with Content-Type: application/json", Code: "unsupported_media_type"})
		return
	}
	r = httpbody.Deadline(w, r, httpbody.DefaultReadTimeout)
	raw, err := httpbody.Read(w, r, MaxBodyBytes)
	if err != nil {
		st, code := http.StatusBadRequest, "invalid_body"
		switch {
		case errors.Is(err, httpbody.ErrTooLarge):
			st, code = http.StatusRequestEntityTooLarge, "body_too_large"
		case errors.Is(err, httpbody.ErrTimeout):
			st, code = http.StatusRequestTimeout, "request_timeout"
		}
		httpjson.Write(w, st, Reply{Error: err.Error(), Code: code})
		return
	}
	if heartbeat {
		var hb struct {
			Details json.RawMessage `json:"details"`
		}
		if !httpbody.Empty(raw) {
			if err := httpbody.DecodeOne(raw, &hb); err != nil {
				httpjson.Write(w, http.StatusBadRequest, Reply{Error: "body is not one JSON object of the form {\"details\": ...}: " + err.Error(), Code: "invalid_body"})
				return
			}
		}
		if len(hb.Details) > MaxHeartbeatDetailsBytes {
			// Details are the job's progress note, kept with the activity;
			// large ones would each go to the payload store.
			httpjson.Write(w, http.StatusRequestEntityTooLarge, Reply{Error: fmt.Sprintf("heartbeat details are %d bytes; the limit is %d (actionsvc.MaxHeartbeatDetailsBytes): send a short progress note, and the result with the completion", len(hb.Details), MaxHeartbeatDetailsBytes), Code: "details_too_large"})
			return
		}
		st, rep := s.Heartbeat(r.Context(), token, hb.Details)
		httpjson.Write(w, st, rep)
		return
	}
	var body Body
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	err = dec.Decode(&body)
	if err == nil {
		if _, more := dec.Token(); !errors.Is(more, io.EOF) {
			err = httpbody.ErrTrailingData
		}
	}
	if err != nil {
		httpjson.Write(w, http.StatusBadRequest, Reply{Error: "body is not valid JSON of the form {\"output\": ...} or {\"error\": {...}}: " + err.Error(), Code: "invalid_body"})
		return
	}
	st, rep := s.Complete(r.Context(), token, body)
	httpjson.Write(w, st, rep)
}
