package mover

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The copies a move leaves when it ends without its flip (rules X6, X9),
// the staging copy of an earlier move (T2), the state of an earlier
// ownership (K7) and the topic directory's preparation (V10), on the
// worker rig of worker_test.go.

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// runToEnd starts the rig and waits, in the bubble, for the worker's end.
func runToEnd(t *testing.T, r *workerRig) moveEnded {
	t.Helper()
	r.start()
	synctest.Wait()
	select {
	case e := <-r.ended:
		return e
	default:
		t.Fatal("the move: got no end")
	}
	return moveEnded{}
}

func (r *workerRig) stagingPath() string {
	return storage.StagingPath(r.d.DataDir, r.key.Topic, r.key.Partition)
}

func (r *workerRig) partitionPath() string {
	return storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition)
}

// rule X6: a flip the leader refuses ends the move; with the owner alive
// and the partition not this node's, the install goes back off the path
// and the staging copy is removed: nothing of the move is left.
func TestRuleX6ARefusedFlipRemovesTheCopyWhenThisNodeDoesNotOwnThePartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.store.refuse = true
		e := runToEnd(t, r)
		defer r.stop()
		if e.flipped {
			t.Fatal("the move: got flipped, want ended without a flip")
		}
		if exists(t, r.stagingPath()) || exists(t, r.partitionPath()) || exists(t, r.stagingPath()+".quarantine") {
			t.Fatalf("after a refused flip: staging %v, partition path %v, quarantine %v; want nothing left",
				exists(t, r.stagingPath()), exists(t, r.partitionPath()), exists(t, r.stagingPath()+".quarantine"))
		}
	})
}

// rule X6: a refused flip while this node owns the partition by then (an
// earlier attempt's flip committed) keeps the copy the move took off the
// path: set aside, logged at error, never removed.
func TestRuleX6ARefusedFlipKeepsTheCopyWhenThisNodeOwnsThePartitionByThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.store.refuse, r.store.ownedBy = true, "n2"
		e := runToEnd(t, r)
		defer r.stop()
		if e.flipped {
			t.Fatal("the move: got flipped, want ended without a flip")
		}
		q := r.stagingPath() + ".quarantine"
		if !exists(t, q) || exists(t, r.stagingPath()) {
			t.Fatalf("after a refused flip on a partition this node owns: quarantine %v, staging %v; want the copy set aside", exists(t, q), exists(t, r.stagingPath()))
		}
		if ls, err := storage.ListClosed(q, r.d.LogConfig, time.Now()); err != nil || ls.HWM != 5 {
			t.Fatalf("the copy set aside: got HWM %d (%v), want the move's 5 records", ls.HWM, err)
		}
		if n := r.logs.count(slog.LevelError, "move ended without its flip, and its staging copy may hold the only copy of its records; set aside for an operator"); n != 1 {
			t.Fatalf("error logs of the copy set aside: got %d, want 1", n)
		}
	})
}

// stopGone stops the rig once the move is gone from the replica: its
// target cleared, its source alive or dead.
func stopGone(t *testing.T, r *workerRig, sourceDead bool) {
	t.Helper()
	f := r.store.fakeReplica
	// The source dies before the target is cleared, so the worker never
	// sees the move gone with its source still alive.
	if sourceDead {
		f.SetMember(messages.Member{ID: "n1", Status: messages.MemberDead})
	}
	f.SetTarget(messages.Topic{Name: r.key.Topic, Incarnation: r.key.Incarnation}, r.key.Partition, "")
	r.stop()
}

// rule X9: a move that ends without a flip (its target cleared while it
// copied) removes its staging copy, unless the owner reads dead and the
// copy holds records: then it may be the only copy left, and it is set
// aside and logged at error.
func TestRuleX9AMoveGoneWhileItsSourceIsDeadSetsItsCopyAside(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sourceDead bool
		setAside   bool
	}{{"source alive", false, false}, {"source dead", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWorkerRig(t, 5, true) // held in Finalize, the copy staged
				r.start()
				synctest.Wait()
				// issue 46: staged, the copy went to the path before the
				// freeze; no flip was proposed on it.
				if !exists(t, r.partitionPath()) || exists(t, r.stagingPath()) {
					t.Fatalf("before the stop: copy at the path %v, staging %v; want the copy placed at the path", exists(t, r.partitionPath()), exists(t, r.stagingPath()))
				}
				stopGone(t, r, tc.sourceDead)
				r.releaseFinal()
				q := r.stagingPath() + ".quarantine"
				if exists(t, q) != tc.setAside || exists(t, r.stagingPath()) || exists(t, r.partitionPath()) {
					t.Fatalf("after the stop: quarantine %v, staging %v, path %v; want quarantine %v, no staging and nothing at the path",
						exists(t, q), exists(t, r.stagingPath()), exists(t, r.partitionPath()), tc.setAside)
				}
			})
		})
	}
}

// rule T2: a staging copy left by an earlier move of the partition (its
// target cleared while this node was away) is cleared by the next move,
// never resumed: its sealed segments, which no verify proves, would be
// installed as they are.
func TestRuleT2ALaterMoveClearsAnEarlierMovesStagingCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 0, false)
		small := r.d.LogConfig
		small.SegmentMaxBytes = 4 << 10
		r.d.LogConfig = small
		l, err := storage.OpenLog(t.TempDir(), small)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range 200 {
			if _, err := l.Append(time.Now(), []storage.Entry{{Body: fmt.Appendf(nil, `"record %03d with some padding to fill segments"`, i)}}); err != nil {
				t.Fatal(err)
			}
		}
		r.source.log = l
		ls, err := l.List(time.Now())
		if err != nil || len(ls.Segments) < 2 {
			t.Fatalf("source: got %d segments (%v), want at least 2", len(ls.Segments), err)
		}
		sealed := ls.Segments[0]
		// The earlier move's copy: the first sealed segment at its full
		// size, every byte wrong.
		old, _, err := storage.OpenStaging(r.stagingPath(), small, "7/0 n3>n2 since 12")
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Reconcile(storage.Listing{HWM: ls.HWM, Segments: ls.Segments[:1]}); err != nil {
			t.Fatal(err)
		}
		if err := old.WriteChunk(sealed.Name, 0, bytes.Repeat([]byte{0xee}, int(sealed.Size))); err != nil {
			t.Fatal(err)
		}
		old.Close()

		got := runInstall(t, r)
		_ = got
		want := make([]byte, sealed.Size)
		n, err := l.ReadChunk(sealed.Name, 0, want)
		if err != nil || int64(n) != sealed.Size {
			t.Fatalf("read the source's segment: %d bytes, %v", n, err)
		}
		installed, err := os.ReadFile(filepath.Join(r.partitionPath(), sealed.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(installed, want) {
			t.Fatalf("installed sealed segment %s: got the earlier move's bytes, want the source's", sealed.Name)
		}
		if n := r.logs.count(slog.LevelInfo, "move: cleared the staging copy an earlier move left"); n != 1 {
			t.Fatalf("logs of the cleared copy: got %d, want 1", n)
		}
	})
}

// rule K7: the destination asks the partitions supervisor to drop any
// state of an earlier ownership of the partition before its install and
// again after it.
func TestRuleK7TheDestinationDropsEarlierStateBeforeAndAfterTheInstall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		var asks atomic.Int32
		var installedAtFirst, installedAtSecond atomic.Bool
		r.partitions = func(sys *actor.ActorSystem) *actor.PID {
			return sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				if m, ok := ctx.Message().(messages.DropEarlier); ok {
					n := asks.Add(1)
					on := exists(t, storage.PartitionPath(r.d.DataDir, m.Key.Topic, m.Key.Partition))
					if n == 1 {
						installedAtFirst.Store(on)
					} else {
						installedAtSecond.Store(on)
					}
					ctx.Respond(messages.DroppedEarlier{})
				}
			}))
		}
		runInstall(t, r)
		// issue 46: one before the install (at the stage), one after the
		// install before the freeze, one after the seal under it.
		if got := asks.Load(); got != 3 || installedAtFirst.Load() || !installedAtSecond.Load() {
			t.Fatalf("drops asked: got %d (installed at the first: %v, at the last: %v), want 3: one before the install, two after",
				got, installedAtFirst.Load(), installedAtSecond.Load())
		}
	})
}

// runningSet answers Has with one value: whether the partitions
// supervisor runs an actor for the partition.
type runningSet bool

func (r runningSet) Has(messages.PartitionKey) bool { return bool(r) }

// rule K7: a worker asks the supervisor to drop an earlier ownership's
// state only of a partition it runs an actor for; of one nothing runs
// for, there is nothing to drop, and the move flips without asking.
func TestRuleK7NoDropIsAskedOfAPartitionNothingRunsFor(t *testing.T) {
	for _, tc := range []struct {
		running bool
		want    int32
	}{{true, 3}, {false, 0}} {
		synctest.Test(t, func(t *testing.T) {
			r := newWorkerRig(t, 5, false)
			r.d.Running = runningSet(tc.running)
			var asks atomic.Int32
			r.partitions = func(sys *actor.ActorSystem) *actor.PID {
				return sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
					if _, ok := ctx.Message().(messages.DropEarlier); ok {
						asks.Add(1)
						ctx.Respond(messages.DroppedEarlier{})
					}
				}))
			}
			runInstall(t, r)
			if got := asks.Load(); got != tc.want {
				t.Fatalf("drops asked with an actor running %v: got %d, want %d", tc.running, got, tc.want)
			}
		})
	}
}

// rule V10: the install's preparation re-reads the topic record; while it
// names another incarnation (deleted and recreated since the move read
// it) the preparation refuses, the attempt fails and is retried, and the
// warning is logged once per move, not once per attempt.
func TestRuleV10ARefusedPreparationFailsTheAttemptAndWarnsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		f := r.store.fakeReplica
		r.start()
		defer r.stop()
		t8, _ := f.Topic("w")
		t8.Incarnation = 8
		f.Put(t8)
		time.Sleep(10 * r.d.Move.RetryAfter)
		synctest.Wait()
		if exists(t, r.partitionPath()) {
			t.Fatal("with the record naming incarnation 8: got an install of incarnation 7, want none")
		}
		if inc, found, _ := storage.TopicIncarnation(r.d.DataDir, "w"); found {
			t.Fatalf("with the record naming incarnation 8: got the topic directory stamped %d, want it left alone", inc)
		}
		if n := r.logs.count(slog.LevelWarn, "move: the topic directory's preparation was refused; retrying until the replica catches up or the move is re-planned"); n != 1 {
			t.Fatalf("warnings of the refused preparation after several attempts: got %d, want 1", n)
		}
		r.store.mu.Lock()
		flips := len(r.store.flips)
		r.store.mu.Unlock()
		if flips != 0 {
			t.Fatalf("flips: got %d, want none", flips)
		}
	})
}

// The copy an install meets at the partition's path: this node's own from
// an earlier ownership, which the sweep has not judged yet (the partition
// was planned back first, as every partition a node takes back after a
// hand-off is). The install asks what the sweep would (rules S1-S3, P6):
// removed when the move's source, the owner, vouches for it; set aside on
// every other verdict.
func TestTheInstallRemovesAnOldCopyOnlyWhenTheOwnerVouchesForIt(t *testing.T) {
	for _, tc := range []struct {
		name        string
		oldRecords  int
		marker      *messages.MoveMarker
		quarantined bool
		// oldFrom is the source the old copy's own marker names, if any;
		// reclaimedEarly: the stage took it off the path, before the
		// freeze.
		oldFrom        string
		reclaimedEarly bool
	}{
		// rule S1, rule S3: the owner got the partition from this node at
		// 3, and holds everything the old copy has.
		{"vouched for", 3, &messages.MoveMarker{PromotedHWM: 3, SourceNode: "n2", Durable: true}, false, "", true},
		// rule S2: the owner's copy came from another node.
		{"the owner's marker names another node", 3, &messages.MoveMarker{PromotedHWM: 3, SourceNode: "n3", Durable: true}, true, "", false},
		// rule S2: the owner has no marker.
		{"the owner has no marker", 3, nil, true, "", false},
		// rule P6: the old copy runs past the HWM the owner was promoted at.
		{"past the promoted HWM", 4, &messages.MoveMarker{PromotedHWM: 3, ForcePromoted: true, SourceNode: "n2", Durable: true}, true, "", false},
		// rule X5: a copy installed by a move from this same source may be
		// this move's own install, whose flip may still commit: the stage
		// leaves it, and the install judges it under the freeze.
		{"vouched for, installed from the source", 3, &messages.MoveMarker{PromotedHWM: 3, SourceNode: "n2", Durable: true}, false, "n1", false},
		// A copy installed from a node that owns the partition no more
		// cannot be an install whose flip is pending.
		{"vouched for, installed from another node", 3, &messages.MoveMarker{PromotedHWM: 3, SourceNode: "n2", Durable: true}, false, "n3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWorkerRig(t, 5, false)
				r.source.marker = tc.marker
				if _, err := storage.PrepareTopicDir(r.d.DataDir, "w", 7); err != nil {
					t.Fatal(err)
				}
				old, err := storage.OpenLog(r.partitionPath(), r.d.LogConfig)
				if err != nil {
					t.Fatal(err)
				}
				for i := range tc.oldRecords {
					if _, err := old.Append(time.Now(), []storage.Entry{{Body: fmt.Appendf(nil, `"old %d"`, i)}}); err != nil {
						t.Fatal(err)
					}
				}
				old.Close()
				if tc.oldFrom != "" {
					if err := storage.WriteMarker(r.partitionPath(), storage.Marker{PromotedHWM: int64(tc.oldRecords), SourceNode: tc.oldFrom, DurableAt: time.Now().Add(-time.Hour)}, true); err != nil {
						t.Fatal(err)
					}
				}
				var atFreeze atomic.Int32 // 0 not seen, 1 the old copy on the path, 2 the new one placed
				pass := r.d.Knobs.Pass
				r.d.Knobs.Pass = func(ctx context.Context, k messages.PartitionKey, final bool) error {
					if final && atFreeze.Load() == 0 {
						on := int32(1)
						if ls, err := storage.ListClosed(r.partitionPath(), r.d.LogConfig, time.Now()); err == nil && ls.HWM == 5 {
							on = 2
						}
						atFreeze.Store(on)
					}
					return pass(ctx, k, final)
				}
				runInstall(t, r)
				// issue 46: whatever the verdict, the copy is placed at the
				// path before the freeze, and the old one is off it.
				if got := atFreeze.Load(); got != 2 {
					t.Fatalf("at the freeze: got %d, want 2 (the new copy placed at the path)", got)
				}
				reclaimed := r.logs.count(slog.LevelInfo, "move: removed an earlier copy at the partition's path, which the source vouches for, before the freeze") == 1
				if reclaimed != tc.reclaimedEarly {
					t.Fatalf("the old copy reclaimed by the stage: got %v, want %v", reclaimed, tc.reclaimedEarly)
				}
				q := r.partitionPath() + ".quarantine"
				if exists(t, q) != tc.quarantined {
					t.Fatalf("the old copy: got quarantined %v, want %v", exists(t, q), tc.quarantined)
				}
				if ls, err := storage.ListClosed(r.partitionPath(), r.d.LogConfig, time.Now()); err != nil || ls.HWM != 5 {
					t.Fatalf("the installed copy: got HWM %d (%v), want the source's 5", ls.HWM, err)
				}
			})
		})
	}
}

// rule V4 across workers: a worker started for a move whose earlier
// workers failed verification twice (the runner's carry) neither copies
// nor freezes the source.
func TestRuleV4AWorkerStartedWithTwoFailedVerifiesCarriedNeverFreezes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.carry = workerCarry{since: 41, source: "n1", verifyFailures: 2}
		r.start()
		defer r.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, _, renewals := r.source.counts(); len(renewals) != 0 {
			t.Fatalf("freezes of the source: got %d, want none", len(renewals))
		}
		if exists(t, r.stagingPath()) {
			t.Fatal("staging: got a copy, want none")
		}
		if got := r.carried(); got != 2 {
			t.Fatalf("the carried count: got %d, want 2 kept", got)
		}
	})
}

// Issue 46: a copy placed at the partition's path before its freeze gets
// the tail written since its stage in place, and the install under the
// freeze seals it there: the flip hands over a copy at the final HWM, its
// marker saying so. An untouched placed copy is not installed again; one
// with a tail must be.
func TestAPlacedCopyGetsItsTailInPlaceAndIsSealedBeforeTheFlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		// The prepare takes a second to arm the freeze: the records
		// committed meanwhile are the tail its listing reports.
		r.source.prepareDelay = time.Second
		r.start()
		defer r.stop()
		synctest.Wait()
		if ls, err := storage.ListClosed(r.partitionPath(), r.d.LogConfig, time.Now()); err != nil || ls.HWM != 5 {
			t.Fatalf("placed before the freeze: got HWM %d (%v), want 5", ls.HWM, err)
		}
		for i := range 3 {
			if _, err := r.source.log.Append(time.Now(), []storage.Entry{{Body: fmt.Appendf(nil, `"tail %d"`, i)}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		r.wantFlipped(8)
		ls, err := storage.ListClosed(r.partitionPath(), r.d.LogConfig, time.Now())
		if err != nil || ls.HWM != 8 {
			t.Fatalf("the installed copy: got HWM %d (%v), want 8 with the tail", ls.HWM, err)
		}
		m, err := storage.ReadMarker(r.partitionPath())
		if err != nil || m.PromotedHWM != 8 {
			t.Fatalf("the installed copy's marker: got %+v (%v), want promoted at 8", m, err)
		}
	})
}

// Issue 46, rule X5: a worker that finds its own move's install at the
// partition's path (an earlier worker of the move crashed after placing
// it, so a flip of it may be pending) asks the leader, and once a read
// that settled past UnknownSettle shows the move still pending, takes the
// copy back to staging and resumes from it. Nothing is quarantined, and
// the move flips. Without it, the placing met the copy at the path and
// set it aside, since the owner seldom vouches for it (S5).
func TestAWorkerResumesFromItsMovesInstallLeftAtThePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		if _, err := storage.PrepareTopicDir(r.d.DataDir, "w", 7); err != nil {
			t.Fatal(err)
		}
		// The earlier worker's install: the source's bytes, its marker
		// and the move's staging name (moveName's).
		path := r.partitionPath()
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		ls, err := r.source.log.List(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range ls.Segments {
			b, err := os.ReadFile(filepath.Join(r.source.log.Dir(), seg.Name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, seg.Name), b[:seg.Size], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := storage.WriteMarker(path, storage.Marker{PromotedHWM: 5, SourceNode: "n1", DurableAt: time.Now()}, true); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "staging.move"), []byte("7/0 n1>n2 since 41"), 0o644); err != nil {
			t.Fatal(err)
		}
		r.start()
		defer r.stop()
		synctest.Wait()
		if n := r.logs.count(slog.LevelInfo, "move: an earlier worker of this move left its copy installed at the partition's path; asking the leader whether its flip may be pending"); n != 1 {
			t.Fatalf("the found install logged %d times, want once", n)
		}
		time.Sleep(20 * time.Second) // past UnknownSettle (15 s)
		synctest.Wait()
		r.wantFlipped(5)
		if exists(t, path+".quarantine") {
			t.Fatal("the earlier worker's install: got quarantined, want resumed from")
		}
		if got, err := storage.ListClosed(path, r.d.LogConfig, time.Now()); err != nil || got.HWM != 5 {
			t.Fatalf("the installed copy: got HWM %d (%v), want 5", got.HWM, err)
		}
	})
}
