package actors

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
)

// rules R2, R3: a runner tick skips the metastore scan while the
// assignment shards' version stood still, and scans anyway when asked to
// (a worker ended, a pass failed) and at least every MoveFullScanEvery.
func TestRuleR2R3TheRunnerScansOnlyWhenSomethingMayHaveChanged(t *testing.T) {
	const every = 30 * time.Second
	for _, tc := range []struct {
		name      string
		rescan    bool
		version   uint64
		sinceScan time.Duration
		want      bool
	}{
		{"nothing changed (rule R2)", false, 7, time.Second, false},
		{"nothing changed, just short of the full scan", false, 7, every - time.Nanosecond, false},
		{"an assignment changed (rule R2)", false, 8, time.Second, true},
		{"a worker ended (rule R3)", true, 7, time.Second, true},
		{"the full scan is due (rule R3)", false, 7, every, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scanDue(tc.rescan, tc.version, 7, tc.sinceScan, every); got != tc.want {
				t.Fatalf("scan: got %v, want %v", got, tc.want)
			}
		})
	}
}

// settlingStore is the worker rig's store with a catch-up barrier that
// fails until settle is closed.
type settlingStore struct {
	*workerStore
	settle chan struct{}
}

func (s *settlingStore) CatchUp(ctx context.Context) error {
	select {
	case <-s.settle:
		return nil
	default:
		return errors.New("no leader yet")
	}
}

// rule B7: a node takes moves once its metastore replica has settled: the
// runner starts no worker, whatever its replica says is targeted here,
// until a catch-up barrier succeeded; then it starts them without waiting
// for a tick. The bubble's clock runs the runner's ticks.
func TestRuleB7TheRunnerStartsNoMoveUntilItsReplicaSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 3, false)
		r.cfg.MoveTick = 100 * time.Millisecond
		store := &settlingStore{workerStore: r.store, settle: make(chan struct{})}
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testLogger(t) }))
		d := deps{cfg: r.cfg, log: testLogger(t), metrics: newNodeMetrics("mover-rig-" + t.Name()), notifier: newCommitNotifier()}
		mover, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &moverActor{deps: d, store: store, source: r.source, workers: map[messages.PartitionKey]*actor.PID{}, carries: map[messages.PartitionKey]*workerCarry{},
				progress: map[messages.PartitionKey]messages.MoveProgress{}}
		}), moverName)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = system.Root.StopFuture(mover).Wait()
			system.Shutdown()
			// Timers that fire after the stop are dead letters, whose
			// throttle holds a goroutine for its period: let it end.
			time.Sleep(time.Minute)
		}()

		time.Sleep(10 * r.cfg.MoveTick)
		synctest.Wait()
		if got := d.metrics.movesInFlight.Get(); got != 0 {
			t.Fatalf("moves in flight before the replica settled: got %v, want 0", got)
		}
		if got := len(r.store.flips); got != 0 {
			t.Fatalf("flips before the replica settled: got %d, want 0", got)
		}
		close(store.settle)
		time.Sleep(2 * r.cfg.MoveTick) // the next tick asks again
		synctest.Wait()
		r.store.mu.Lock()
		a := r.store.assignments[assignmentKey(r.key.Incarnation, 0)]
		r.store.mu.Unlock()
		if a.Owner != "n2" {
			t.Fatalf("owner once the replica settled: got %q, want n2 (the move ran)", a.Owner)
		}
	})
}
