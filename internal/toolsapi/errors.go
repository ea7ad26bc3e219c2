package toolsapi

import (
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

// ErrForbidden is Owner's error (wrapped) for a caller that may not act
// for the user it names: the request is refused with 403.
var ErrForbidden = errors.New("forbidden")

// Owner is the principal a request of caller (an authenticated
// principal, or nil) acts for, given the user it names (requested, ""
// when none):
//
//   - a caller acts as itself, id and type, when it names no user or
//     names its own id (a service named bob is not the user bob);
//   - a service principal acts for another user only when its keys-file
//     grant (auth.Principal.CanActFor) names that user (or "*");
//   - the anonymous caller of an open server (no keys: nobody is
//     authenticated), or no caller, acts for the user it names
//     (defaultUser when none);
//   - anything else is refused (ErrForbidden, 403).
//
// Executions are scoped to that principal: their ids derive from its id
// and type, and fetching or cancelling the execution of a principal the
// caller may not act for answers 404 (see MayAccess).
func Owner(caller *auth.Principal, requested, defaultUser string) (auth.Principal, error) {
	if caller == nil || caller.Type == auth.TypeAnonymous {
		if requested == "" {
			requested = defaultUser
		}
		return auth.Principal{ID: requested, Type: auth.TypeUser}, nil
	}
	if requested == "" || requested == caller.ID {
		return auth.Principal{ID: caller.ID, Type: principalType(caller.Type)}, nil
	}
	user := auth.Principal{ID: requested, Type: auth.TypeUser}
	if MayAccess(caller, user) {
		return user, nil
	}
	return auth.Principal{}, fmt.Errorf("%w: %s %q cannot act for user %q (a service acts for users only when its key's canActFor names them)", ErrForbidden, principalType(caller.Type), caller.ID, requested)
}

// MayAccess reports whether caller may read or cancel an execution of
// owner: it is owner (same id and type, as the session routes compare
// principals), or a service whose grant names owner, a user. The open
// server's anonymous caller (or no caller) may reach every execution.
func MayAccess(caller *auth.Principal, owner auth.Principal) bool {
	if caller == nil || caller.Type == auth.TypeAnonymous {
		return true
	}
	// Both types explicit, so ActsFor matches the id and the type (an
	// unset type would match any), as the session routes do.
	self := auth.Principal{ID: caller.ID, Type: principalType(caller.Type), CanActFor: caller.CanActFor}
	return self.ActsFor(&auth.Principal{ID: owner.ID, Type: principalType(owner.Type)})
}
