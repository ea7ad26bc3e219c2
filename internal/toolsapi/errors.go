package toolsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
)

// Error is a request the tools API refuses, with its HTTP status. Its JSON
// form is the error body {ok:false, error, code} plus, for input that
// breaks a tool's schema, the tool and every violation.
type Error struct {
	Status     int                 `json:"-"`
	Code       string              `json:"code"`
	Message    string              `json:"error"`
	Tool       string              `json:"tool,omitempty"`
	Violations []catalog.Violation `json:"violations,omitempty"`
	// ExecutionID names the execution concerned, when there is one.
	ExecutionID string `json:"executionId,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// As lets errors.As find a *catalog.ExecutionError, so ExecuteToolCalls
// reports the code and message the model should see.
func (e *Error) As(target any) bool {
	if p, ok := target.(**catalog.ExecutionError); ok {
		*p = &catalog.ExecutionError{Code: e.Code, Message: e.Message}
		return true
	}
	return false
}

// inputError maps a catalog validation error to a 400 (or 404).
func inputError(err error) error {
	var ie *catalog.InputError
	if errors.As(err, &ie) {
		return &Error{Status: http.StatusBadRequest, Code: catalog.CodeInvalidInput, Message: ie.Error(), Tool: ie.Tool, Violations: ie.Violations}
	}
	if errors.Is(err, catalog.ErrUnknownTool) {
		return &Error{Status: http.StatusNotFound, Code: catalog.CodeUnknownTool, Message: err.Error()}
	}
	return &Error{Status: http.StatusBadRequest, Code: catalog.CodeInvalidInput, Message: err.Error()}
}

// ErrForbidden is what a UserID resolver returns (wrapped) to refuse a
// request with 403.
var ErrForbidden = errors.New("forbidden")

// PrincipalUsers returns an Options.UserID resolver over the API server's
// authenticated caller (for example api.Caller):
//
//   - a caller of type "user" acts only as itself: the user is its
//     principal id, and naming another user is refused;
//   - any other caller (a service key, the anonymous caller of an open
//     server) acts for the user it names, or as itself when it names none.
func PrincipalUsers(caller func(ctx context.Context) *auth.Principal) func(r *http.Request, requested string) (string, error) {
	return func(r *http.Request, requested string) (string, error) {
		p := caller(r.Context())
		if p == nil {
			if requested == "" {
				return DefaultUserID, nil
			}
			return requested, nil
		}
		if p.Type == "user" {
			if requested != "" && requested != p.ID {
				return "", fmt.Errorf("%w: user %q cannot act for user %q", ErrForbidden, p.ID, requested)
			}
			return p.ID, nil
		}
		if requested != "" {
			return requested, nil
		}
		return p.ID, nil
	}
}
