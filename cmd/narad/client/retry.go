package client

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// IsRetryable reports whether the contract's retry guidance says to try
// again: 502, 503 and transport errors, never another 4xx or 5xx. A call
// the client refused to send (ErrInvalid) or an answer outside the
// contract (ErrProtocol) would fail the same way again.
func IsRetryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status == http.StatusBadGateway || se.Status == http.StatusServiceUnavailable
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrProtocol)
}

// Backoff is the pause before retry number attempt (from 1): first,
// doubled per attempt, capped at limit. Each tool picks its own bounds: a
// load run retries faster than a person at a terminal needs to.
func Backoff(attempt int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Sleep sleeps for d or until ctx is done, so that a pause between
// retries ends with the caller.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
