package partition

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

func TestTheSupervisorServesWhatTheReplicaSaysThisNodeOwns(t *testing.T) {
	r := newSupervisorRig(t)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 3}
	r.replica.Put(orders, "n1", "n2", "n1")
	r.waitServing(orders, 0, true)
	r.waitServing(orders, 2, true)
	if r.serving(orders, 1) {
		t.Fatal("partition 1 is n2's: got an actor here, want none")
	}
	if got := r.owned.Load(); got != 2 {
		t.Fatalf("partitions owned: got %d, want 2", got)
	}

	// Partition 2 moves to n2: its actor stops, its data stays (the topic
	// lives on, and a later move back may resume from it).
	r.replica.Put(orders, "n1", "n2", "n2")
	r.waitServing(orders, 2, false)
	if _, err := os.Stat(storage.PartitionPath(r.dataDir, "orders", 2)); err != nil {
		t.Fatalf("data of a partition that moved away: got %v, want it kept", err)
	}

	// The topic is deleted: the last actor stops and its data goes.
	r.replica.Drop("orders")
	r.waitServing(orders, 0, false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := os.Stat(storage.PartitionPath(r.dataDir, "orders", 0))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("data of a deleted topic's partition: got %v, want it removed", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The gauge is stored at the end of the reconcile that purged the data.
	for r.owned.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned after the delete: got %d, want 0", r.owned.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Flips move no topic record, so the supervisor follows them from the
// owner journal, not by a whole pass: what moves here is served, what
// moves away stops, and what did not change keeps its actor.
func TestTheSupervisorFollowsFlipsChangeByChange(t *testing.T) {
	r := newSupervisorRig(t)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 4}
	r.replica.Put(orders, "n1", "n2", "n1", "n2")
	r.waitServing(orders, 0, true)
	r.waitServing(orders, 2, true)
	meta := r.replica.TopicsVersion()
	r.replica.SetOwner(orders, 1, "n1")
	r.replica.SetOwner(orders, 2, "n2")
	r.waitServing(orders, 1, true)
	r.waitServing(orders, 2, false)
	r.replica.SetOwner(orders, 3, "n1")
	r.replica.SetOwner(orders, 2, "n1") // back again
	r.waitServing(orders, 3, true)
	r.waitServing(orders, 2, true)
	r.waitServing(orders, 0, true)
	if got := r.replica.TopicsVersion(); got != meta {
		t.Fatalf("topics version: got %d, want %d (no whole pass asked for)", got, meta)
	}
	deadline := time.Now().Add(20 * time.Second)
	for r.owned.Load() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned: got %d, want 4", r.owned.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A recreated topic is a new incarnation: the old one's actor never
// serves it, and its data is not the new topic's.
func TestTheSupervisorNeverServesARecreatedTopicFromTheOldIncarnation(t *testing.T) {
	r := newSupervisorRig(t)
	old := messages.Topic{Name: "jobs", Incarnation: 1, Partitions: 1}
	r.replica.Put(old, "n1")
	r.waitServing(old, 0, true)
	r.replica.Drop("jobs")
	recreated := messages.Topic{Name: "jobs", Incarnation: 2, Partitions: 1}
	r.replica.Put(recreated, "n1")
	r.waitServing(recreated, 0, true)
	r.waitServing(old, 0, false)
}

// The assignments of a deleted incarnation can outlive its topic record
// for a moment (two shards, two proposals): while they do, the name's new
// incarnation is served and the old one is not.
func TestTheSupervisorIgnoresAssignmentsOfAnIncarnationNoLongerListed(t *testing.T) {
	r := newSupervisorRig(t)
	old := messages.Topic{Name: "jobs", Incarnation: 1, Partitions: 1}
	r.replica.Put(old, "n1")
	r.waitServing(old, 0, true)
	recreated := messages.Topic{Name: "jobs", Incarnation: 2, Partitions: 1}
	r.replica.Put(recreated, "n1") // the old assignment stays
	r.waitServing(recreated, 0, true)
	r.waitServing(old, 0, false)
}

// A reported freeze that lapses: until the leader confirms this node still
// owns the partition, commits are refused with nothing appended; while the
// leader names another owner (a flip this replica has not applied, the
// source cut off right after the fence) they stay refused. Found by the
// move simulator (actors/move/sim, break Confirm).
func TestALapsedFreezeCommitsOnlyOnceTheLeaderConfirmsTheOwner(t *testing.T) {
	clk := newFakeClock()
	r := newSupervisorRig(t, func(d *Deps) { d.Clock = clk })
	_, k := r.servedWithOneRecord()
	ask := func(msg any) any { t.Helper(); return r.ask(k, msg) }
	commit := func(seq uint64) messages.Status { t.Helper(); return r.commit(k, seq) }
	if r, ok := ask(&messages.Handoff{Op: messages.HandoffPrepare}).(*messages.HandoffResult); !ok || r.Status != messages.StatusOK {
		t.Fatalf("prepare: got %+v, want OK", r)
	}

	// The leader has flipped the partition away; this replica has not.
	r.replica.SetLeaderOwner("n2")
	clk.Advance(move.DefaultConfig().FreezeTTL)
	for seq := uint64(2); seq < 6; seq++ {
		if got := commit(seq); got != messages.StatusFrozen {
			t.Fatalf("commit %d after the lapse, the leader naming n2: got status %d, want StatusFrozen (%d)", seq, got, messages.StatusFrozen)
		}
		clk.Advance(move.DefaultConfig().RetryAfter) // the confirm's retries
	}

	// The leader names this node after all (the move was aborted).
	r.replica.SetLeaderOwner("n1")
	deadline := time.Now().Add(20 * time.Second)
	for commit(9) != messages.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("commit once the leader confirms n1: still refused after 20s")
		}
		clk.Advance(move.DefaultConfig().RetryAfter)
		time.Sleep(5 * time.Millisecond)
	}
	st := ask(&messages.GetStats{}).(*messages.PartitionStats)
	if st.HighWatermark != 2 {
		t.Fatalf("HWM after the confirm: got %d, want 2 (nothing appended while refused)", st.HighWatermark)
	}
}

// rule F9: the fence's promise (nothing committed past the fenced HWM
// until the flip or the lapse) holds across a restart of the source's
// actor. A partition actor that restarts between the fence and the flip opens
// frozen when a move targets it at the restart, though none did when the
// supervisor first spawned it (as with every move: a partition is planned
// away long after its actor started). Opened unfrozen, it would take
// commits past the fenced HWM that the flip then leaves behind.
func TestAPartitionRestartedBetweenFenceAndFlipOpensFrozen(t *testing.T) {
	var opens atomic.Int32
	var armed atomic.Bool
	r := newSupervisorRig(t, func(d *Deps) {
		d.Knobs.OpenPartition = func(messages.PartitionKey) error { opens.Add(1); return nil }
		d.Knobs.FreezeStep = func(_ messages.PartitionKey, ev any) {
			if _, rearm := ev.(freeze.Rearm); rearm && armed.Load() {
				panic("injected: a bug in the freeze actor")
			}
		}
	})
	orders, k := r.servedWithOneRecord()
	ask := func(msg any) any { t.Helper(); return r.ask(k, msg) }
	commit := func(seq uint64) messages.Status { t.Helper(); return r.commit(k, seq) }

	r.replica.SetTarget(orders, 0, "n2")
	prep, ok := ask(&messages.Handoff{Op: messages.HandoffPrepare, From: "n2"}).(*messages.HandoffResult)
	if !ok || prep.Status != messages.StatusOK {
		t.Fatalf("prepare: got %+v, want OK", prep)
	}
	if f := ask(&messages.Handoff{Op: messages.HandoffFence, Token: prep.Token, HWM: 1}).(*messages.HandoffResult); f.Status != messages.StatusOK {
		t.Fatalf("fence at HWM 1: got %+v, want OK", f)
	}

	armed.Store(true)
	r.system.Root.Send(PID(r.system, k), &messages.Handoff{Op: messages.HandoffRearm, Token: prep.Token})
	deadline := time.Now().Add(20 * time.Second)
	for opens.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("log opens: got %d, want 2 (the partition restarted)", opens.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	armed.Store(false)
	if got := commit(2); got != messages.StatusFrozen {
		t.Fatalf("commit after the restart, the move still targeting it: got status %d, want StatusFrozen (%d)", got, messages.StatusFrozen)
	}
	if st := ask(&messages.GetStats{}).(*messages.PartitionStats); st.HighWatermark != 1 {
		t.Fatalf("HWM after the restart: got %d, want the fenced 1", st.HighWatermark)
	}
}

// rule K7: the set of running partitions that the move workers read
// follows the supervisor's children, from a child's spawn to its stop.
func TestTheRunningSetFollowsTheChildren(t *testing.T) {
	running := &Running{}
	r := newSupervisorRig(t, func(d *Deps) { d.Running = running })
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 2}
	k0 := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	k1 := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 1}
	r.replica.Put(orders, "n1", "n2")
	r.waitServing(orders, 0, true)
	if !running.Has(k0) || running.Has(k1) {
		t.Fatalf("running while n1 owns partition 0 only: got 0 %v, 1 %v, want true, false", running.Has(k0), running.Has(k1))
	}
	r.replica.SetOwner(orders, 0, "n2")
	r.replica.SetOwner(orders, 1, "n1")
	r.waitServing(orders, 1, true)
	testnet.Eventually(t, 20*time.Second, "partition 0 out of the running set once handed over", func() bool { return !running.Has(k0) })
	if !running.Has(k1) {
		t.Fatal("running once n1 owns partition 1: got false, want true")
	}
	if (*Running)(nil).Has(k0) != true {
		t.Fatal("a nil set: got Has false, want true (the worker asks)")
	}
}

// Issue 50: neither a member's heartbeat (it moves the metadata shard, a
// few times a second) nor a topic's create makes a whole pass over the
// node's partitions (3,000 creates onto nodes of 100,000 partitions made
// one pass each); a change to a topic that existed does. A create's
// partitions are served all the same, also when the replica applied their
// assignments before the topic record.
func TestOnlyAChangeToATopicThatExistedMakesAWholePass(t *testing.T) {
	var passes atomic.Int32
	r := newSupervisorRig(t, func(d *Deps) { d.Knobs.WholePass = func() { passes.Add(1) } })
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	reconciled := func() int32 {
		t.Helper()
		if _, err := Request(context.Background(), r.system.Root, SupervisorPID(r.system), Reconcile{}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return passes.Load()
	}
	before := reconciled()
	for i := range 5 {
		r.replica.SetMember(messages.Member{ID: "n1", Heartbeats: uint64(i + 1)})
	}
	if got := reconciled(); got != before {
		t.Fatalf("whole passes after 5 heartbeats: got %d more, want none", got-before)
	}
	audit := messages.Topic{Name: "audit", Incarnation: 8, Partitions: 1}
	r.replica.Put(audit, "n1")
	r.waitServing(audit, 0, true)
	// The assignments first, then the record: a replica may apply them
	// in this order, the shards being apart.
	billing := messages.Topic{Name: "billing", Incarnation: 9, Partitions: 2}
	r.replica.SetAssignments(
		messages.Assignment{Topic: "billing", Incarnation: 9, Partition: 0, Owner: "n1"},
		messages.Assignment{Topic: "billing", Incarnation: 9, Partition: 1, Owner: "n2"})
	reconciled()
	r.replica.Put(billing)
	r.waitServing(billing, 0, true)
	if got := reconciled(); got != before {
		t.Fatalf("whole passes after two creates: got %d more, want none", got-before)
	}
	if r.serving(billing, 1) {
		t.Fatal("billing/1, owned by n2, served here: got true, want false")
	}
	orders.RetentionMs = 60_000
	r.replica.Put(orders)
	if got := reconciled(); got != before+1 {
		t.Fatalf("whole passes after an alter: got %d more, want one", got-before)
	}
}
