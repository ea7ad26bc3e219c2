package query

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A call that never answers (the stalled query) is answered by its hedge.
func TestHedgeAnswersAStalledCall(t *testing.T) {
	var calls atomic.Int32
	firstCancelled := make(chan struct{})
	v, err := Hedged(context.Background(), []time.Duration{time.Millisecond}, func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // stalled until the hedge's answer cancels it
			close(firstCancelled)
			return "", ctx.Err()
		}
		return "answer", nil
	})
	if err != nil || v != "answer" {
		t.Fatalf("Hedged = %q, %v; want the hedge's answer", v, err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
	// The stalled call is cancelled once the hedge has answered.
	select {
	case <-firstCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled call was not cancelled")
	}
}

// A call that answers before the first hedge is sent once.
func TestHedgeNotSentForAnAnswer(t *testing.T) {
	var calls atomic.Int32
	want := errors.New("query failed: no such handler")
	_, err := Hedged(context.Background(), []time.Duration{time.Hour}, func(ctx context.Context) (int, error) {
		calls.Add(1)
		return 0, want
	})
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v (an error is an answer)", err, want)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// Every hedge is sent while nothing answers; the last one's answer counts.
func TestHedgeSendsEachHedge(t *testing.T) {
	var calls atomic.Int32
	v, err := Hedged(context.Background(), []time.Duration{time.Millisecond, 2 * time.Millisecond}, func(ctx context.Context) (int32, error) {
		n := calls.Add(1)
		if n < 3 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return n, nil
	})
	if err != nil || v != 3 {
		t.Fatalf("Hedged = %d, %v; want the third call's answer", v, err)
	}
}

// The caller's deadline ends every call.
func TestHedgeEndsWithTheCallersContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Hedged(ctx, []time.Duration{time.Hour}, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
