package measure

import (
	"context"
	"time"
)

// MaxRatePerSecond bounds the rate a tool accepts: far above what a
// broker takes over HTTP, so that a typo (an extra zero or three) is
// refused rather than attempted.
const MaxRatePerSecond = 10_000_000

// Pacer holds a run to a rate over all its workers together: record n
// (counted from 1, in the order workers take their numbers) is due at
// start + (n-1)/rate. A worker that takes a number waits until it is due,
// so the workers share one schedule whatever their number. A run the
// broker cannot keep up with falls behind it and then goes as fast as it
// can; Behind says by how much. A nil Pacer is no pacing at all.
type Pacer struct {
	start time.Time
	// perRecordNs is 1/rate in nanoseconds, kept as a float so that a rate
	// that does not divide a second keeps its average.
	perRecordNs float64
}

// NewPacer returns a Pacer for perSecond records a second from start; nil
// for perSecond <= 0, which means as fast as possible.
func NewPacer(perSecond float64, start time.Time) *Pacer {
	if perSecond <= 0 {
		return nil
	}
	return &Pacer{start: start, perRecordNs: float64(time.Second) / perSecond}
}

// Due is when record n (from 1) may be sent; the zero time with no
// pacing.
func (p *Pacer) Due(n int64) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.start.Add(time.Duration(float64(max(n-1, 0)) * p.perRecordNs))
}

// Wait returns once record n is due, or when ctx is done (then with its
// error).
func (p *Pacer) Wait(ctx context.Context, n int64) error {
	if p == nil {
		return ctx.Err()
	}
	d := time.Until(p.Due(n))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Behind is how late record n, sent at sent, went out against the
// schedule; 0 when on time or early, or with no pacing.
func (p *Pacer) Behind(n int64, sent time.Time) time.Duration {
	if p == nil {
		return 0
	}
	return max(sent.Sub(p.Due(n)), 0)
}
