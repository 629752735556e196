package fanout

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// A link's back-off runs on Deps.Clock: the refused group goes again once
// the test moves the clock by RetryMin, and the wake timer still pending
// when the actor stops is stopped with it.
func TestBackOffRunsOnTheActorsClockAndEndsWithIt(t *testing.T) {
	clk := testnet.NewClock()
	var refuse atomic.Bool
	refuse.Store(true)
	r := newRigOn(t, clk, Knobs{}, func(p int) bool { return refuse.Load() && p == fnv32a("k1", 4) })
	r.system.Root.Send(r.parent, add{n: 8})
	r.eventually("a refusal and its back-off's timer", func() bool { return r.metrics.Failures.Get() == 1 && clk.Pending() == 1 })
	refuse.Store(false)
	clk.Advance(time.Second) // past any back-off: the rig's RetryMax is 20 ms
	r.eventually("the refused group sent again after the back-off", func() bool { return r.cursorAt() == 8 })
	if got := r.metrics.Failures.Get(); got != 1 {
		t.Fatalf("failures: got %d, want 1 (no retry before the clock moved)", got)
	}

	refuse.Store(true)
	r.system.Root.Send(r.parent, add{n: 8})
	r.eventually("a second refusal and its back-off's timer", func() bool { return r.metrics.Failures.Get() == 2 && clk.Pending() == 1 })
	if err := r.system.Root.StopFuture(r.parent).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the fan-out actor stopped, want 0", n)
	}
}
