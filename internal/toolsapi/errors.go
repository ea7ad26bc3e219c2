package toolsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
)

// Error is a request the tools API refuses, with its HTTP status: the
// error body, as toolsclient reads it too.
type Error = catalog.APIError

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
//   - a caller acts as itself when it names no user or names itself: the
//     user is its principal id;
//   - a service principal acts for another user only when its keys-file
//     grant (auth.Principal.CanActFor) names that user (or "*");
//   - the anonymous caller of an open server (no keys: nobody is
//     authenticated) acts for the user it names;
//   - anything else is refused (ErrForbidden, 403).
//
// Executions are then scoped to that user: their ids derive from it and
// fetching or cancelling another user's execution answers 404.
func PrincipalUsers(caller func(ctx context.Context) *auth.Principal) func(r *http.Request, requested string) (string, error) {
	return func(r *http.Request, requested string) (string, error) {
		p := caller(r.Context())
		if p == nil || p.Type == auth.TypeAnonymous {
			if requested == "" {
				return DefaultUserID, nil
			}
			return requested, nil
		}
		if requested == "" || requested == p.ID {
			return p.ID, nil
		}
		if p.Type == auth.TypeService && p.ActsFor(&auth.Principal{ID: requested, Type: auth.TypeUser}) {
			return requested, nil
		}
		return "", fmt.Errorf("%w: %s %q cannot act for user %q (a service acts for users only when its key's canActFor names them)", ErrForbidden, p.Type, p.ID, requested)
	}
}
