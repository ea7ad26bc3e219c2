package model

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

type delayed struct{ d time.Duration }

func (e delayed) Error() string             { return "rate limited" }
func (e delayed) RetryAfter() time.Duration { return e.d }

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"nil", nil, 0, false},
		{"plain", errors.New("x"), 0, false},
		{"no delay", delayed{0}, 0, false},
		{"direct", delayed{3 * time.Second}, 3 * time.Second, true},
		{"retryable", Retryable(delayed{time.Second}), time.Second, true},
		{"wrapped", fmt.Errorf("model step 0 of t1: %w", Retryable(delayed{1500 * time.Millisecond})), 1500 * time.Millisecond, true},
	} {
		d, ok := RetryDelay(tc.err)
		if d != tc.want || ok != tc.ok {
			t.Errorf("%s: RetryDelay = %v, %v; want %v, %v", tc.name, d, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{map[string]string{"Retry-After": "20"}, 20 * time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "343"}, 343 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "250", "retry-after": "1"}, 250 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "junk", "retry-after": "2"}, 2 * time.Second, true},
		{map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30 * time.Second, true},
		{map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:59:00 GMT"}, 0, false},
		{map[string]string{"Retry-After": "0"}, 0, false},
		{map[string]string{"Retry-After": "-3"}, 0, false},
		{map[string]string{"Retry-After": "soon"}, 0, false},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		d, ok := ParseRetryAfter(h, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("%v: ParseRetryAfter = %v, %v; want %v, %v", tc.h, d, ok, tc.want, tc.ok)
		}
	}
	if d, ok := ParseRetryAfter(nil, now); ok || d != 0 {
		t.Errorf("nil header: %v, %v", d, ok)
	}
}
