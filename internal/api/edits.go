package api

import (
	"errors"
	"net/http"

	"go.temporal.io/sdk/temporal"

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

// respondAccepted answers a batch the turn took: 202, unless its edits were
// all the policies refused and nothing settled (400 rejected, with their
// reasons; the requests stay open and approval.candidate records it).
func (s *Server) respondAccepted(w http.ResponseWriter, id string, res signals.RespondResult) {
	if res.EditRefused != "" && len(res.Resolutions) == 0 && len(res.Duplicates) == 0 {
		s.fail(w, errorf(http.StatusBadRequest, CodeRejected, "the edited approval was refused and the request stays open: %s", res.EditRefused))
		return
	}
	accepted(w, protocolAccepted(id, res))
}

func protocolAccepted(id string, res signals.RespondResult) protocol.Accepted {
	return protocol.Accepted{SessionID: id, Resolutions: res.Resolutions, Duplicates: res.Duplicates}
}
