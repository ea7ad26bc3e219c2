package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Error codes of approve-with-edits (InputResponse.Input).
const (
	// CodeInvalidInput: the edited input breaks the tool's input schema
	// (ErrorBody.Field names the failing field); the request stays open.
	CodeInvalidInput = "invalid_input"
	// CodeNotEditable: the request takes no edited input.
	CodeNotEditable = "not_editable"
)

// editRejection maps a validator's refusal of an edit to its 422 (nil for
// any other rejection). Nothing was recorded: the request stays open.
func editRejection(cause error) *httpError {
	var appErr *temporal.ApplicationError
	if !errors.As(cause, &appErr) {
		return nil
	}
	switch appErr.Type() {
	case signals.ErrTypeInvalidEdit:
		var field string
		if appErr.HasDetails() {
			_ = appErr.Details(&field)
		}
		he := errorf(http.StatusUnprocessableEntity, CodeInvalidInput, "the edit was rejected and nothing was recorded: %s", appErr.Message())
		he.field = field
		return he
	case signals.ErrTypeNotEditable:
		return errorf(http.StatusUnprocessableEntity, CodeNotEditable, "the edit was rejected and nothing was recorded: %s", appErr.Message())
	}
	return nil
}

// respondAccepted answers a batch the turn took, saying what became of
// every answer in it: 202 accepted when each settled (or repeated a
// settled answer); 200 partial, listing the refused beside the settled,
// when the policies refused some; 400 rejected, naming each request and
// the policy's reason, when they refused every answer that could settle
// (the requests stay open, and approval.candidate records each refusal).
// A refused answer never reads as accepted.
func (s *Server) respondAccepted(w http.ResponseWriter, id string, res signals.RespondResult) {
	body := protocolAccepted(id, res)
	switch {
	case len(res.Refused) > 0 && len(res.Resolutions) == 0:
		he := errorf(http.StatusBadRequest, CodeRejected, "%s", refusalMessage(res.Refused))
		he.refused = res.Refused
		s.fail(w, he)
	case len(res.Refused) > 0:
		w.Header().Set("x-eve-session-id", id)
		body.OK, body.Status = true, StatusPartial
		httpjson.Write(w, http.StatusOK, body)
	case res.EditRefused != "" && len(res.Resolutions) == 0 && len(res.Duplicates) == 0:
		// A worker that predates RespondResult.Refused.
		s.fail(w, errorf(http.StatusBadRequest, CodeRejected, "the edited approval was refused and the request stays open: %s", res.EditRefused))
	default:
		accepted(w, body)
	}
}

// StatusPartial is the status of an answer batch whose policies refused
// some answers and let others settle.
const StatusPartial = "partial"

// refusalMessage says which answers were refused and why.
func refusalMessage(refused []protocol.Refusal) string {
	parts := make([]string, len(refused))
	for i, r := range refused {
		what := "the answer to request " + r.RequestID
		if r.Edited {
			what = "the edited approval of request " + r.RequestID
		}
		parts[i] = fmt.Sprintf("%s was refused (%s) and the request stays open: %s", what, r.Outcome, r.Reason)
	}
	return strings.Join(parts, "; ")
}

func protocolAccepted(id string, res signals.RespondResult) protocol.Accepted {
	return protocol.Accepted{SessionID: id, Resolutions: res.Resolutions, Duplicates: res.Duplicates, Refused: res.Refused}
}
