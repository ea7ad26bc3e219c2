package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eve-temporal/eve/model"
)

// TransportFailures checks what a provider's Step returns when no answer
// comes: the server is gone or too slow (retryable), or the caller
// cancelled (context.Canceled, not retryable). newModel builds the
// provider's model for a server whose testdata has text.sse.
func TransportFailures(t *testing.T, newModel func(*testing.T, *Server) model.Model, req model.Request) {
	t.Run("ConnectionErrorIsRetryable", func(t *testing.T) {
		f := New(t, Reply{Status: 200, File: "text.sse"})
		m := newModel(t, f)
		f.Close()
		_, err := m.Step(context.Background(), req, nil)
		if err == nil || !model.IsRetryable(err) {
			t.Errorf("err = %v, want retryable", err)
		}
	})
	t.Run("TimeoutIsRetryable", func(t *testing.T) {
		f := New(t, Reply{Status: 200, File: "text.sse", Delay: 5 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := newModel(t, f).Step(ctx, req, nil)
		if err == nil || !model.IsRetryable(err) {
			t.Errorf("err = %v, want retryable", err)
		}
	})
	t.Run("CancelIsNotRetryable", func(t *testing.T) {
		f := New(t, Reply{Status: 200, File: "text.sse", Delay: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := newModel(t, f).Step(ctx, req, nil)
		if err == nil || model.IsRetryable(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled, not retryable", err)
		}
	})
}
