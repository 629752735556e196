package clock

import (
	"context"
	"time"
)

// Sleep waits d on c, or until ctx ends (then it answers ctx's error).
// The timer it sets is not stopped when ctx ends first: it fires later
// into a channel nobody reads, so a loop that sleeps often should sleep
// for short spans.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	select {
	case <-After(c, d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
