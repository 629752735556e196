package clock

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Sleep waits its span on the clock it is given, and no longer once its
// context ends.
func TestSleepWaitsOnItsClockOrUntilTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), Wall{}, time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("got %v after %s, want nil after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, Wall{}, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Millisecond {
			t.Fatalf("got %v after %s, want the deadline after 1ms", err, time.Since(start))
		}
	})
}
