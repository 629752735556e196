package controller

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/testnet"
)

// tickStore is a store of a node that never leads: the controller's tick
// asks it who leads, and nothing else.
type tickStore struct {
	Store
	asked atomic.Int64
}

func (s *tickStore) Changed() <-chan struct{} { return make(chan struct{}) }

func (s *tickStore) Leader(uint64) (uint64, bool) {
	s.asked.Add(1)
	return 0, false
}

// The controller ticks on its Deps.Clock, not the wall's: a tick comes
// when the test moves the clock by a heartbeat interval, and each tick
// sets the next. The timer pending at the stop is stopped with the actor,
// so none outlives it.
func TestTheControllerTicksOnItsClockAndStopsItsTimer(t *testing.T) {
	clk := testnet.NewClock()
	s := &tickStore{}
	d := testDeps(t, DefaultConfig(), s)
	d.Clock = clk
	system := actor.NewActorSystem()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return New(d) }))
	testnet.Eventually(t, 10*time.Second, "the first tick's timer", func() bool { return clk.Pending() == 1 })
	if n := s.asked.Load(); n != 0 {
		t.Fatalf("asked who leads %d times before the clock moved, want 0", n)
	}
	clk.Advance(min(d.Membership.HeartbeatInterval, d.Config.RebalanceBusyInterval))
	testnet.Eventually(t, 10*time.Second, "a tick and the next one's timer", func() bool { return s.asked.Load() == 1 && clk.Pending() == 1 })
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the controller stopped, want 0", n)
	}
}
