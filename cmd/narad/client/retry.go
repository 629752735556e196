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

// AckOutcome is what AckRetrying made of one ack.
type AckOutcome struct {
	// Acked: the broker took the ack.
	Acked bool
	// Lost: it never will: a 410 (the lease ran out or the handle is
	// stale; the record is delivered again), or every try failed.
	Lost bool
	// First is how long the first try took: the ack's latency.
	First time.Duration
}

// AckRetrying acks handle with at most attempts tries, pausing
// Backoff(attempt, 50 ms, 1 s) after each retryable failure: the pace of
// the load tools (narad bench, bench/load), which share it so that they
// measure acks alike. A 410 or the tries running out is Lost, not an
// error; a failure the contract says not to retry is the error; ctx
// ending stops it with neither.
func (b *Broker) AckRetrying(ctx context.Context, topic, handle string, attempts int) (AckOutcome, error) {
	var out AckOutcome
	for attempt := 1; attempt <= attempts; attempt++ {
		start := time.Now()
		err := b.Ack(ctx, topic, handle)
		if attempt == 1 {
			out.First = time.Since(start)
		}
		switch {
		case err == nil:
			out.Acked = true
			return out, nil
		case IsStatus(err, http.StatusGone):
			out.Lost = true
			return out, nil
		case ctx.Err() != nil:
			return out, nil
		case !IsRetryable(err):
			return out, err
		}
		Sleep(ctx, Backoff(attempt, 50*time.Millisecond, time.Second))
	}
	out.Lost = true
	return out, nil
}
