package worker

// How a failed control-plane call is handled: the contract's per-status
// behaviour, the jittered backoff and Retry-After.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// handleCallError applies the contract's per-status behaviour common to all
// calls. It returns how long to wait before retrying, and false when the
// caller must give up on this request.
func (n *Node) handleCallError(ctx context.Context, err error, token *string, backoff *time.Duration) (time.Duration, bool) {
	switch {
	case fatal(err):
		n.m.authFailures.Add(1)
		n.fail(err)
		return 0, false
	case sessionInvalid(err):
		n.reopen(ctx, token)
		return 0, true
	case retryable(err):
		return n.backoffFor(err, backoff), true
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		// An unauthenticated answer we cannot repair by reopening the session.
		n.m.authFailures.Add(1)
		n.fail(fmt.Errorf("authentication trouble: %w", err))
		return 0, false
	}
	return 0, false
}

// backoffFor returns the jittered wait before a retry: Retry-After for 429,
// else the doubling backoff.
//
// The doubling backoff (capped at RetryMax, half of it random) applies to
// network errors, timeouts and 5xx alike; a 429 or 503 that carries
// Retry-After is never retried sooner than it says (a database outage
// answers 503 with Retry-After: the fleet waits instead of hammering).
func (n *Node) backoffFor(err error, backoff *time.Duration) time.Duration {
	d := *backoff
	*backoff = min(*backoff*2, n.cfg.RetryMax)
	d = d/2 + jitter(d/2)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable) && ae.RetryAfter > 0 {
		d = max(d, ae.RetryAfter+jitter(ae.RetryAfter/4))
	}
	return d
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// sleep waits d or until ctx ends; false means ctx ended.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
