package model

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryDelay reports how long a transient error asks the caller to wait
// before the next attempt, typically a provider's Retry-After on a 429 or
// 529. It looks for an error in err's chain with a
//
//	RetryAfter() time.Duration
//
// method (the provider packages' error types have one). ok is false when no
// error in the chain asks for a delay, and the caller's own backoff applies.
//
// The model step activity can hand the delay to Temporal so that the
// server-side retry waits as long as the provider asked:
//
//	if d, ok := model.RetryDelay(err); ok {
//		return temporal.NewApplicationErrorWithOptions(msg, "ModelRateLimited",
//			temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: d})
//	}
func RetryDelay(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if err == nil || !errors.As(err, &ra) {
		return 0, false
	}
	d := ra.RetryAfter()
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// ParseRetryAfter reads the delay an HTTP response asks for before a retry:
// the retry-after-ms header (milliseconds, sent by OpenAI and Anthropic) or
// Retry-After (delay-seconds or an HTTP date, RFC 9110 section 10.2.3). now is
// the reference for an HTTP date. ok is false when neither header holds a
// positive delay.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
	}
	return 0, false
}
