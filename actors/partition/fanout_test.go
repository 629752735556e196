package partition

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// fanoutRig is one node's partitions supervisor over a fake replica, with a
// parent topic and children whose partitions it all serves.
type fanoutRig struct {
	*supervisorRig
	parent messages.Topic
}

func newFanoutRig(t testing.TB, tweak ...func(*Deps)) *fanoutRig {
	t.Helper()
	tweak = append([]func(*Deps){func(d *Deps) {
		d.Fanout.Config.RetryMin, d.Fanout.Config.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	}}, tweak...)
	r := &fanoutRig{supervisorRig: newSupervisorRig(t, tweak...)}
	r.parent = messages.Topic{Name: "orders", Incarnation: 10, Partitions: 3}
	r.replica.Put(r.parent, "n1", "n1", "n1")
	for p := range r.parent.Partitions {
		r.waitServing(r.parent, p, true)
	}
	return r
}

func (r *fanoutRig) key(t messages.Topic, p int) messages.PartitionKey {
	return messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p}
}

// addChild creates child (owned by owners, n1 for every partition when
// none are given) and attaches it to the parent at epoch.
func (r *fanoutRig) addChild(name string, inc, epoch uint64, delay time.Duration, owners ...string) messages.Topic {
	r.t.Helper()
	c := messages.Topic{Name: name, Incarnation: inc, Partitions: 4, Parent: r.parent.Name, AttachEpoch: epoch, FanoutDelayMs: delay.Milliseconds()}
	if len(owners) == 0 {
		owners = []string{"n1", "n1", "n1", "n1"}
	}
	r.replica.Put(c, owners...)
	r.parent.Children = append(r.parent.Children, messages.ChildLink{Name: name, Incarnation: inc, AttachEpoch: epoch, DelayMs: delay.Milliseconds()})
	r.replica.Put(r.parent, "n1", "n1", "n1")
	r.waitAnchored(name)
	return c
}

func (r *fanoutRig) detach(name string) {
	var kept []messages.ChildLink
	for _, l := range r.parent.Children {
		if l.Name != name {
			kept = append(kept, l)
		}
	}
	r.parent.Children = kept
	r.replica.Put(r.parent, "n1", "n1", "n1")
}

func (r *fanoutRig) stats(k messages.PartitionKey) *messages.PartitionStats {
	r.t.Helper()
	res, err := Request(context.Background(), r.system.Root, PID(r.system, k), &messages.GetStats{}, time.Second)
	if err != nil {
		r.t.Fatalf("stats of %v: %v", k, err)
	}
	return res.(*messages.PartitionStats)
}

// waitAnchored waits until every parent partition reports a cursor for
// child (the attach's signal).
func (r *fanoutRig) waitAnchored(child string) {
	r.t.Helper()
	r.eventually(fmt.Sprintf("every partition anchored %s", child), func() bool {
		for p := range r.parent.Partitions {
			if _, ok := r.stats(r.key(r.parent, p)).Cursors[child]; !ok {
				return false
			}
		}
		return true
	})
}

func (r *fanoutRig) eventually(what string, ok func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produce commits n records to parent partition p, keys k<i%5>, bodies
// naming the batch and the record.
func (r *fanoutRig) produce(p int, batch string, n int) {
	r.t.Helper()
	var recs []messages.CommitRecord
	for i := range n {
		recs = append(recs, messages.CommitRecord{Seq: uint64(i), Key: fmt.Appendf(nil, "k%d", i%5), Body: fmt.Appendf(nil, "%s-%d", batch, i)})
	}
	k := r.key(r.parent, p)
	res, err := Request(context.Background(), r.system.Root, PID(r.system, k), &messages.Commit{Key: k, Records: recs}, 5*time.Second)
	if err != nil || res.(*messages.CommitResult).Status != messages.StatusOK {
		r.t.Fatalf("commit to the parent: %v %+v", err, res)
	}
}

// records reads every record of child, by body.
func (r *fanoutRig) records(child messages.Topic) map[string]storage.Record {
	r.t.Helper()
	out := map[string]storage.Record{}
	for p := range child.Partitions {
		k := r.key(child, p)
		hwm := r.stats(k).HighWatermark
		for off := int64(0); off < hwm; off++ {
			res, err := Request(context.Background(), r.system.Root, PID(r.system, k), &messages.ReadAt{Offset: off}, time.Second)
			if err != nil {
				r.t.Fatalf("read %v@%d: %v", k, off, err)
			}
			d := res.(*messages.Reserved).Delivery
			if got := partitionForKey(string(d.Key), child.Partitions); got != p {
				r.t.Fatalf("record %q with key %q on child partition %d, want %d", d.Body, d.Key, p, got)
			}
			out[string(d.Body)] = storage.Record{Offset: off, Key: d.Key, Body: d.Body, Time: d.Time}
		}
	}
	return out
}

// childHolds is the records child's partitions hold; a partition not
// served yet counts none.
func (r *fanoutRig) childHolds(child messages.Topic) int64 {
	var n int64
	for p := range child.Partitions {
		res, err := Request(context.Background(), r.system.Root, PID(r.system, r.key(child, p)), &messages.GetStats{}, time.Second)
		if err == nil {
			n += res.(*messages.PartitionStats).HighWatermark
		}
	}
	return n
}

func TestFanoutCopiesRecordsCommittedAfterTheAttachKeepingTheirKeys(t *testing.T) {
	r := newFanoutRig(t)
	r.produce(0, "before", 10)
	child := r.addChild("audit", 20, 21, 0)
	r.produce(0, "after", 30)
	r.produce(2, "after2", 12)
	r.eventually("the child holds 42 records", func() bool { return r.childHolds(child) >= 42 })
	got := r.records(child)
	for i := range 30 {
		rec, ok := got[fmt.Sprintf("after-%d", i)]
		if !ok {
			t.Fatalf("after-%d missing from the child", i)
		}
		if want := fmt.Sprintf("k%d", i%5); string(rec.Key) != want {
			t.Fatalf("after-%d: key %q, want %q", i, rec.Key, want)
		}
	}
	for i := range 10 {
		if _, ok := got[fmt.Sprintf("before-%d", i)]; ok {
			t.Fatalf("before-%d, committed before the attach, reached the child", i)
		}
	}
	if len(got) != 42 {
		t.Fatalf("child records: got %d, want 42", len(got))
	}
	// The cursor moved on only as far as the child committed: to the HWM.
	r.eventually("cursors at the HWM", func() bool {
		st := r.stats(r.key(r.parent, 0))
		return st.Cursors["audit"] == st.HighWatermark
	})
}

func TestADelayChildGetsEachRecordOnlyOnceItsDelayHasPassed(t *testing.T) {
	r := newFanoutRig(t)
	const delay = 300 * time.Millisecond
	child := r.addChild("later", 20, 21, delay)
	r.produce(1, "d", 20)
	pk := r.key(r.parent, 1)
	parentTime := map[string]int64{}
	for off := range int64(20) {
		res, err := Request(context.Background(), r.system.Root, PID(r.system, pk), &messages.ReadAt{Offset: off}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		d := res.(*messages.Reserved).Delivery
		parentTime[string(d.Body)] = d.Time
	}
	r.eventually("the delay child holds 20", func() bool { return r.childHolds(child) >= 20 })
	for body, rec := range r.records(child) {
		// Both are commit stamps of this node's wall clock: the child's
		// commit may not come before the parent's plus the delay.
		if early := time.Duration(parentTime[body] + delay.Nanoseconds() - rec.Time); early > 0 {
			t.Fatalf("%s committed to the delay child %v before its delay had passed", body, early)
		}
	}
}

func TestAFanoutCopyWaitsForAChildPartitionWithoutAnOwnerAndThenArrives(t *testing.T) {
	r := newFanoutRig(t)
	child := r.addChild("audit", 20, 21, 0, "", "", "", "") // no owner anywhere yet
	r.produce(0, "x", 15)
	time.Sleep(50 * time.Millisecond) // several back-offs
	if got := r.stats(r.key(r.parent, 0)).Cursors["audit"]; got != 0 {
		t.Fatalf("cursor moved to %d while the child could commit nothing, want 0", got)
	}
	r.replica.Put(child, "n1", "n1", "n1", "n1")
	r.eventually("the child holds 15", func() bool { return r.childHolds(child) >= 15 })
	if got := len(r.records(child)); got != 15 {
		t.Fatalf("child records: got %d distinct, want 15", got)
	}
}

func TestADetachStopsTheLinkAndRemovesItsCursorFiles(t *testing.T) {
	r := newFanoutRig(t)
	child := r.addChild("audit", 20, 21, 0)
	dir := storage.PartitionPath(r.dataDir, r.parent.Name, 0)
	if _, err := storage.ReadCursor(dir, "audit", 3); err != nil {
		t.Fatalf("cursor file after the attach: %v", err)
	}
	r.detach("audit")
	r.eventually("the cursor file removed", func() bool {
		_, err := storage.ReadCursor(dir, "audit", 3)
		return errors.Is(err, storage.ErrNotFound)
	})
	if _, ok := r.stats(r.key(r.parent, 0)).Cursors["audit"]; ok {
		t.Fatal("stats still report a cursor for the detached child")
	}
	r.produce(0, "late", 5)
	time.Sleep(50 * time.Millisecond)
	if got := r.childHolds(child); got != 0 {
		t.Fatalf("the detached child got %d records, want 0", got)
	}
	// A re-attach is a new link: no backfill of what came while detached.
	r.parent.Children = nil
	child = r.addChild("audit", 20, 40, 0)
	r.produce(0, "again", 3)
	r.eventually("the child holds 3", func() bool { return r.childHolds(child) >= 3 })
	for body := range r.records(child) {
		if body[:4] == "late" {
			t.Fatalf("%s, committed while detached, reached the re-attached child", body)
		}
	}
}

// rule K9
func TestRuleK9ACursorMissingForALinkTheMarkerNamesResumesFromTheOldestOffset(t *testing.T) {
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("marker names the link: %v", named), func(t *testing.T) {
			r := newFanoutRig(t)
			r.produce(0, "old", 8)
			// As a move's install leaves it: the partition's copy, a marker,
			// and (here) no cursor file. Stop the partition, write the
			// marker, serve it again.
			r.replica.Put(r.parent, "n2", "n1", "n1")
			r.waitServing(r.parent, 0, false)
			dir := storage.PartitionPath(r.dataDir, r.parent.Name, 0)
			m := storage.Marker{PromotedHWM: 8, SourceNode: "n2"}
			if named {
				m.Children = []storage.ChildLink{{Child: "audit", AttachEpoch: 21}}
			}
			if err := storage.WriteMarker(dir, m, true); err != nil {
				t.Fatal(err)
			}
			child := messages.Topic{Name: "audit", Incarnation: 20, Partitions: 4, Parent: r.parent.Name, AttachEpoch: 21}
			r.replica.Put(child, "n1", "n1", "n1", "n1")
			r.parent.Children = []messages.ChildLink{{Name: "audit", Incarnation: 20, AttachEpoch: 21}}
			r.replica.Put(r.parent, "n1", "n1", "n1")
			r.waitServing(r.parent, 0, true)
			r.waitAnchored("audit")
			if !named {
				if got := r.stats(r.key(r.parent, 0)).Cursors["audit"]; got != 8 {
					t.Fatalf("a link the marker does not name: cursor %d, want the tail 8 (no backfill)", got)
				}
				return
			}
			r.eventually("the child holds the 8 old records", func() bool { return r.childHolds(child) >= 8 })
			if got := len(r.records(child)); got != 8 {
				t.Fatalf("child records: got %d, want 8", got)
			}
		})
	}
}

func TestAStaleCursorFileOfADetachedLinkIsRemovedWhenThePartitionOpens(t *testing.T) {
	r := newFanoutRig(t)
	r.replica.Put(r.parent, "n2", "n1", "n1")
	r.waitServing(r.parent, 0, false)
	dir := storage.PartitionPath(r.dataDir, r.parent.Name, 0)
	if err := storage.WriteCursor(dir, storage.Cursor{Child: "gone", Epoch: 3, Offset: 0}, true, nil); err != nil {
		t.Fatal(err)
	}
	r.replica.Put(r.parent, "n1", "n1", "n1")
	r.waitServing(r.parent, 0, true)
	// Any link makes the partition look at its cursor files.
	r.addChild("audit", 20, 21, 0)
	r.eventually("the stale cursor removed", func() bool {
		_, err := os.Stat(filepath.Join(dir, "fanout-gone.offset"))
		return errors.Is(err, os.ErrNotExist)
	})
}

// BenchmarkFanoutDrain measures the engine's own pace on one node: a
// backlog of b.N records committed to the parent while the child has no
// owner (so the copies back off), then the time the fan-out takes to copy
// it all once the child is served, reported against the parent's commit
// rate of the same run (batches of 64 records of 1 KiB to 3 partitions).
func BenchmarkFanoutDrain(b *testing.B) {
	r := newFanoutRig(b)
	child := messages.Topic{Name: "audit", Incarnation: 20, Partitions: 3, Parent: r.parent.Name, AttachEpoch: 21}
	r.replica.Put(child, "", "", "")
	r.parent.Children = []messages.ChildLink{{Name: "audit", Incarnation: 20, AttachEpoch: 21}}
	r.replica.Put(r.parent, "n1", "n1", "n1")
	r.waitAnchored("audit")
	body := make([]byte, 1024)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(64, b.N-done)
		recs := make([]messages.CommitRecord, n)
		for i := range recs {
			recs[i] = messages.CommitRecord{Key: fmt.Appendf(nil, "k%d", done+i), Body: body}
		}
		k := r.key(r.parent, done/64%3)
		if res, err := Request(context.Background(), r.system.Root, PID(r.system, k), &messages.Commit{Key: k, Records: recs}, 10*time.Second); err != nil || res.(*messages.CommitResult).Status != messages.StatusOK {
			b.Fatalf("commit: %v %+v", err, res)
		}
		done += n
	}
	commit := time.Since(start)
	start = time.Now()
	r.replica.Put(child, "n1", "n1", "n1")
	r.eventually("the child holds the backlog", func() bool { return r.childHolds(child) >= int64(b.N) })
	drain := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/commit.Seconds(), "commit-rec/s")
	b.ReportMetric(float64(b.N)/drain.Seconds(), "fanout-rec/s")
	b.ReportMetric(commit.Seconds()/drain.Seconds(), "fanout/commit")
}

func TestAFanoutActorThatPanicsIsRestartedAndResumesFromTheLastAdvance(t *testing.T) {
	var panics atomic.Int32
	r := newFanoutRig(t, func(d *Deps) {
		d.Fanout.Knobs = fanout.Knobs{OnRecords: func(k messages.PartitionKey) {
			if k.Partition == 0 && panics.Add(1) == 2 {
				panic("injected: a bug in the copy loop")
			}
		}}
	})
	child := r.addChild("audit", 20, 21, 0)
	r.produce(0, "a", 10)
	r.eventually("the first batch copied", func() bool { return r.childHolds(child) >= 10 })
	r.produce(0, "b", 10) // its read's answer panics the fan-out actor
	r.eventually("the second batch copied after the restart", func() bool { return r.childHolds(child) >= 20 })
	if got := panics.Load(); got < 3 {
		t.Fatalf("reads answered: got %d, want at least 3 (one panicked, the restarted actor read again)", got)
	}
	if got := len(r.records(child)); got != 20 {
		t.Fatalf("child records: got %d distinct, want 20", got)
	}
	if got := r.fanoutPanics.Get(); got != 1 {
		t.Fatalf("narad_fanout_actor_panics_total: got %d, want 1", got)
	}
}
