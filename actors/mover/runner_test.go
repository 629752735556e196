package mover

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/testnet"
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
		r.d.Tick = 100 * time.Millisecond
		store := &settlingStore{workerStore: r.store, settle: make(chan struct{})}
		d := r.runnerDeps(store)
		startTestMover(t, newTestSystem(t), d)

		time.Sleep(10 * r.d.Tick)
		synctest.Wait()
		if got := d.Metrics.InFlight.Get(); got != 0 {
			t.Fatalf("moves in flight before the replica settled: got %v, want 0", got)
		}
		if got := len(r.store.flips); got != 0 {
			t.Fatalf("flips before the replica settled: got %d, want 0", got)
		}
		close(store.settle)
		time.Sleep(2 * r.d.Tick) // the next tick asks again
		synctest.Wait()
		if a, _ := r.store.Assignment(r.key.Incarnation, 0); a.Owner != "n2" {
			t.Fatalf("owner once the replica settled: got %q, want n2 (the move ran)", a.Owner)
		}
	})
}

// rule R1, rule R4: the runner looks for partitions targeted at this node
// every MoveTick (a second unless told otherwise), and a target written
// between two ticks has its worker, and here its whole move, by the next
// one. The bubble's clock runs the ticks.
func TestRuleR1R4ANewTargetStartsItsWorkerOnTheNextTick(t *testing.T) {
	if got := testDeps("").Tick; got != time.Second {
		t.Fatalf("the rig's MoveTick: got %v, want the node's default 1s (rule R1; actors checks its default)", got)
	}
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 3, false)
		targeted, _ := r.store.Assignment(r.key.Incarnation, 0)
		settled := targeted
		settled.Target, settled.TargetSince = "", 0
		r.store.SetAssignments(settled)
		startTestMover(t, newTestSystem(t), r.runnerDeps(r.store))
		owner := func() string {
			a, _ := r.store.Assignment(r.key.Incarnation, 0)
			return a.Owner
		}

		time.Sleep(3*r.d.Tick + r.d.Tick/10) // just past a tick
		synctest.Wait()
		if got := owner(); got != "n1" {
			t.Fatalf("owner with no target: got %q, want n1", got)
		}
		// The target is written between two ticks; AssignmentsVersion moves.
		r.store.SetAssignments(targeted)
		time.Sleep(r.d.Tick) // the next tick is due within this
		synctest.Wait()
		if got := owner(); got != "n2" {
			t.Fatalf("owner one tick after the target was written: got %q, want n2 (its worker ran)", got)
		}
	})
}

// runnerDeps are the rig's Deps for a runner over store: the worker it
// starts moves the rig's partition from the rig's source.
func (r *workerRig) runnerDeps(store Store) Deps {
	d := r.d
	d.Logger, d.Metrics, d.Store, d.Source = testnet.Logger(r.t), newTestMetrics(), store, r.source
	d.Dirs = rigDirs{dataDir: d.DataDir, guards: d.Guards, topics: store}
	return d
}

// startTestMover spawns the runner of d in system, inside a synctest
// bubble, and stops the runner and the system when the test ends. Timers
// that fire after the stop are dead letters, whose throttle holds a
// goroutine for its period: the cleanup waits that out on the bubble's
// clock.
func startTestMover(t *testing.T, system *actor.ActorSystem, d Deps) {
	t.Helper()
	mover, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return New(d) }), Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = system.Root.StopFuture(mover).Wait()
		system.Shutdown()
		time.Sleep(time.Minute)
	})
}

// rule V4 across worker instances: the runner keeps each move's count as
// its workers tell it, answers it to the next instance, and forgets it
// with the move.
func TestTheRunnerKeepsTheVerifyCountOfItsMoves(t *testing.T) {
	k := messages.PartitionKey{Topic: "t", Incarnation: 4, Partition: 1}
	other := messages.PartitionKey{Topic: "t", Incarnation: 4, Partition: 2}
	m := &Runner{carries: map[messages.PartitionKey]workerCarry{k: {since: 9, source: "n1"}}}
	m.carryUpdated(carryUpdate{key: k, verifyFailures: 1})
	m.carryUpdated(carryUpdate{key: other, verifyFailures: 2})
	if got := m.carries[k]; got != (workerCarry{since: 9, source: "n1", verifyFailures: 1}) {
		t.Fatalf("kept for its move: got %+v, want 1 failure since 9 from n1", got)
	}
	if _, ok := m.carries[other]; ok {
		t.Fatalf("a move the runner does not keep: got a count, want none")
	}
}
