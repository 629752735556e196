package mover

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// The sweep's turn is the move runner's to give (rule R5): the runner
// counts its ticks and sends the sweeper a sweeper.Due every
// SweepEveryTicks'th. The sweeper itself is tested in actors/sweeper.

type r5Store struct {
	*settlingStore
	scans atomic.Int64
}

func (s *r5Store) TargetedAt(node string) []messages.Assignment {
	s.scans.Add(1)
	return s.settlingStore.TargetedAt(node)
}

// rule R5: the runner hands the sweeper exactly one sweeper.Due every
// SweepEveryTicks ticks, counting the ticks that come before the replica
// settled and the ticks whose scan is skipped because nothing changed.
// The bubble's clock runs the ticks.
func TestRuleR5TheSweepRunsEveryNthTickCountingSkippedOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 4
		d := testDeps(t.TempDir())
		d.Tick, d.Config.SweepEveryTicks, d.Config.FullScanEvery = 100*time.Millisecond, every, time.Hour
		store := &r5Store{settlingStore: &settlingStore{workerStore: &workerStore{fakeReplica: newFakeReplica()}, settle: make(chan struct{})}}
		system := newTestSystem(t)
		var dues atomic.Int64
		standIn, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(sweeper.Due); ok {
				dues.Add(1)
			}
		}), "sweeper-stand-in")
		if err != nil {
			t.Fatal(err)
		}
		d.Logger, d.Store, d.Sweeper = testnet.Logger(t), store, standIn
		startTestMover(t, system, d)

		// Ticks 1-8, the replica not settled: no scan, two sweeps.
		time.Sleep(8*d.Tick + d.Tick/2)
		synctest.Wait()
		if got := store.scans.Load(); got != 0 {
			t.Fatalf("scans before the replica settled: got %d, want 0", got)
		}
		if got := dues.Load(); got != 8/every {
			t.Fatalf("sweeps in 8 ticks before the replica settled: got %d, want %d", got, 8/every)
		}

		// Ticks 9-24: the replica settles at tick 9 and its one scan
		// finds nothing; nothing changes after, so every later scan is
		// skipped. The sweeps keep their pace.
		close(store.settle)
		time.Sleep(16 * d.Tick)
		synctest.Wait()
		if got := store.scans.Load(); got != 1 {
			t.Fatalf("scans over ticks 9-24, nothing changed: got %d, want 1 (the rest skipped)", got)
		}
		if got := dues.Load(); got != 24/every {
			t.Fatalf("sweeps in 24 ticks: got %d, want %d", got, 24/every)
		}
	})
}
