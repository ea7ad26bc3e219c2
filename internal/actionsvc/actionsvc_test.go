package actionsvc

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/capability"
	"github.com/eve-temporal/eve/signals"
)

func TestMapErrorOutputLimits(t *testing.T) {
	s := &Service{}
	c := capability.Claims{ActionID: "act_1"}
	// The settle validator's refusal of output over the tool's MaxOutputBytes: 422.
	st, r := s.mapError(c, temporal.NewApplicationError("output is 1572885 bytes; tool job accepts at most 1048576 (tools.Tool.MaxOutputBytes). Send less", signals.ErrActionInvalid))
	if st != http.StatusUnprocessableEntity || r.Code != "invalid_output" || !strings.Contains(r.Error, "accepts at most 1048576") {
		t.Fatalf("validator refusal: %d %+v", st, r)
	}
	// Temporal's own blob size limit: 413, not a 503 that asks for retries.
	st, r = s.mapError(c, fmt.Errorf("update: %w", serviceerror.NewInvalidArgument("Blob data size exceeds limit.")))
	if st != http.StatusRequestEntityTooLarge || r.Code != "body_too_large" || !strings.Contains(r.Error, "act_1") || !strings.Contains(r.Error, "Blob data size exceeds limit.") {
		t.Fatalf("blob limit: %d %+v", st, r)
	}
	if st, _ := s.mapError(c, serviceerror.NewInvalidArgument("something else")); st != http.StatusServiceUnavailable {
		t.Fatalf("other invalid argument: %d", st)
	}
}
