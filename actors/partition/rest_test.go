package partition

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// restRig is the supervisor rig with partitions that rest after restAfter
// on steady (nil: the wall clock), their doors in running, and the rests
// counted.
func restRig(t *testing.T, restAfter time.Duration, steady clock.Clock) (*supervisorRig, *Running, *metrics.Counter) {
	running, rests := &Running{}, metrics.NewSet().NewCounter("rests")
	r := newSupervisorRig(t, func(d *Deps) {
		d.Running, d.Metrics.Rests, d.Config.RestAfter = running, rests, restAfter
		if steady != nil {
			d.Steady = steady
		}
	})
	return r, running, rests
}

// ordersWithRecords serves topic orders' one partition on the rig's node
// and commits n records to it, with seqs 1..n.
func ordersWithRecords(r *supervisorRig, n uint64) (messages.Topic, messages.PartitionKey) {
	r.t.Helper()
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	for seq := uint64(1); seq <= n; seq++ {
		if got := r.commit(k, seq); got != messages.StatusOK {
			r.t.Fatalf("commit %d: got status %d, want OK", seq, got)
		}
	}
	return orders, k
}

// askThrough sends msg to k as the node's router does: through its door,
// waking it when it rests.
func (r *supervisorRig) askThrough(running *Running, k messages.PartitionKey, msg any) any {
	r.t.Helper()
	res, err := Ask(context.Background(), r.system.Root, running, SupervisorPID(r.system), k, msg, 5*time.Second)
	if err != nil {
		r.t.Fatalf("ask %T through the door: %v", msg, err)
	}
	return res
}

// A partition rests only once nothing is in flight: a lease out keeps it
// open past RestAfter. At rest it has no actor, yet the node still counts
// it served; the next request wakes it with its consumer state as the
// rest left it: a retried ack of a handle acked before still answers OK,
// delivery resumes past the acked records, and a commit lands after them.
func TestAPartitionRestsOnlyWhenIdleAndWakesWithItsState(t *testing.T) {
	steady := newFakeClock()
	r, running, rests := restRig(t, time.Second, steady)
	orders, k := ordersWithRecords(r, 3)
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	d0, d1 := r.leaseWith(k, lim), r.leaseWith(k, lim)
	ack := func(d messages.Delivery) messages.Status {
		return r.askThrough(running, k, &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce}).(*messages.LeaseResult).Status
	}
	if got := ack(d0); got != messages.StatusOK {
		t.Fatalf("ack of offset %d: got status %d, want OK", d0.Offset, got)
	}

	steady.Advance(2 * time.Second)
	r.ask(k, &messages.GetStats{}) // after the rest check in its mailbox
	if got := rests.Get(); got != 0 || !running.Has(k) {
		t.Fatalf("idle past RestAfter with offset %d leased: got %d rests, open %v; want 0, true", d1.Offset, got, running.Has(k))
	}

	if got := ack(d1); got != messages.StatusOK {
		t.Fatalf("ack of offset %d: got status %d, want OK", d1.Offset, got)
	}
	steady.Advance(2 * time.Second)
	testnet.Eventually(t, 10*time.Second, "the idle partition at rest", func() bool { return rests.Get() == 1 })
	testnet.Eventually(t, 10*time.Second, "its actor stopped", func() bool { return !r.serving(orders, 0) })
	if running.Has(k) || r.owned.Load() != 1 {
		t.Fatalf("at rest: got open %v, %d partitions served; want false, 1", running.Has(k), r.owned.Load())
	}

	if got := ack(d0); got != messages.StatusOK {
		t.Fatalf("retried ack of offset %d after the rest: got status %d, want OK (the recent acks restored)", d0.Offset, got)
	}
	if !running.Has(k) {
		t.Fatal("after a request through its door: got closed, want the partition woken")
	}
	res := r.askThrough(running, k, &messages.Reserve{Limits: lim}).(*messages.Reserved)
	if res.Status != messages.StatusOK || res.Delivery.Offset != 2 {
		t.Fatalf("reserve after the wake: got status %d, offset %d; want OK, 2 (0 and 1 acked before the rest)", res.Status, res.Delivery.Offset)
	}
	c := r.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 4, Body: []byte(`"x"`)}}}).(*messages.CommitResult)
	if c.Status != messages.StatusOK || c.FirstOffset != 3 {
		t.Fatalf("commit after the wake: got status %d at offset %d, want OK at 3", c.Status, c.FirstOffset)
	}
}

// A wake neither loses nor reorders a request sent while it happens: one
// sender commits records one after another, pausing now and then past
// RestAfter so the partition rests and wakes under it, while another asks
// for its stats at random; every record is stored once, in the order
// sent.
func TestWakesLoseAndReorderNothing(t *testing.T) {
	r, running, rests := restRig(t, 100*time.Millisecond, nil)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	rng := rand.New(rand.NewPCG(50, 1))
	const records = 120
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
			}
			r.askThrough(running, k, &messages.GetStats{})
		}
	})
	var want []string
	for seq := uint64(1); seq <= records; seq++ {
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(110+rng.IntN(60)) * time.Millisecond)
		}
		body := fmt.Sprintf(`"seq %d"`, seq)
		want = append(want, body)
		c := r.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: []byte(body)}}}).(*messages.CommitResult)
		if c.Status != messages.StatusOK || c.FirstOffset != int64(seq-1) {
			t.Fatalf("commit %d: got status %d (%s) at offset %d, want OK at %d", seq, c.Status, c.Err, c.FirstOffset, seq-1)
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d rests", rests.Get())
	if got := rests.Get(); got < 3 {
		t.Fatalf("rests during the run: got %d, want at least 3 (the test must exercise wakes)", got)
	}
	r.askThrough(running, k, &messages.GetStats{})
	if got := r.bodies(k); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records after %d rests: got %v, want %v", rests.Get(), got, want)
	}
}

// A door closes only while no request is on its way through it: one that
// entered before the rest check keeps the actor up until it is answered,
// and one that comes after finds the door closed and wakes the partition.
func TestADoorClosesOnlyWithNoRequestInFlight(t *testing.T) {
	var running Running
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	if running.rest(k, nil, false) || running.enter(k) != nil {
		t.Fatal("no door: got a rest or an entry, want neither")
	}
	running.add(k)
	d := running.enter(k)
	if d == nil {
		t.Fatal("open door: got no entry, want one")
	}
	if running.rest(k, nil, false) {
		t.Fatal("rest with a request in flight: got closed, want refused")
	}
	running.leave(d)
	if !running.rest(k, nil, false) || !running.resting(k) {
		t.Fatalf("rest with none in flight: got resting %v; want closed", running.resting(k))
	}
	if !running.Has(k) {
		t.Fatal("closed door, actor not yet ended: got Has false, want true (rule K7: its close may still write)")
	}
	running.stopEnded(k)
	if running.Has(k) {
		t.Fatal("closed door, actor ended: got Has true, want false")
	}
	if running.enter(k) != nil {
		t.Fatal("closed door: got an entry, want the request to wake the partition")
	}
	running.add(k)
	if !running.Has(k) {
		t.Fatal("door after a wake: got closed, want open")
	}
}

// A resting partition is woken for retention once its oldest sealed
// segment is past its topic's retention, and not before; and one whose
// topic is deleted while it rests is forgotten and its data removed, as a
// running one would be.
func TestARestingPartitionIsWokenForRetentionAndPurgedWithItsTopic(t *testing.T) {
	steady, records := newFakeClock(), newFakeClock()
	running, rests := &Running{}, metrics.NewSet().NewCounter("rests")
	r := newSupervisorRig(t, func(d *Deps) {
		d.Running, d.Metrics.Rests, d.Config.RestAfter, d.Steady = running, rests, time.Second, steady
		d.LogConfig.SegmentMaxBytes, d.LogConfig.Clock = 4<<10, records
	})
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1, RetentionMs: 60_000}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	body := make([]byte, 1<<10)
	for i := range body {
		body[i] = 'x'
	}
	for seq := uint64(1); seq <= 12; seq++ {
		c := r.ask(k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: fmt.Appendf(nil, `"%s"`, body)}}}).(*messages.CommitResult)
		if c.Status != messages.StatusOK {
			t.Fatalf("commit %d: got status %d (%s), want OK", seq, c.Status, c.Err)
		}
	}
	stats := func() *messages.PartitionStats {
		return r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats)
	}
	if st := stats(); st.Segments < 2 || st.OldestOffset != 0 {
		t.Fatalf("before retention: got %d segments from offset %d, want several from 0", st.Segments, st.OldestOffset)
	}
	rest := func(n uint64) {
		t.Helper()
		steady.Advance(2 * time.Second)
		testnet.Eventually(t, 10*time.Second, "the partition at rest", func() bool { return rests.Get() == n && !running.Has(k) })
	}
	rest(1)

	r.system.Root.Send(SupervisorPID(r.system), RetentionTick{})
	if _, err := Request(context.Background(), r.system.Root, SupervisorPID(r.system), Reconcile{}, 5*time.Second); err != nil {
		t.Fatal(err) // answered after the tick before it
	}
	if running.Has(k) {
		t.Fatal("retention pass with every segment young: got the partition woken, want it left at rest")
	}
	records.Advance(2 * time.Minute)
	r.system.Root.Send(SupervisorPID(r.system), RetentionTick{})
	testnet.Eventually(t, 10*time.Second, "retention to remove the old segments", func() bool {
		return running.Has(k) && stats().OldestOffset > 0
	})

	rest(2)
	r.replica.Drop("orders")
	dir := storage.PartitionPath(r.dataDir, k.Topic, k.Partition)
	testnet.Eventually(t, 10*time.Second, "the resting partition of a deleted topic purged", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err) && r.owned.Load() == 0
	})
}

// A partition woken from rest whose log cannot open (a passing disk fault)
// goes back to rest once its supervisor stops retrying it, instead of being
// given up on: the next request wakes it again, and once the disk is back
// it is served. A partition that opened and fails later is given up on as
// before (TestASupervisorGivesUpOnAPartitionThatKeepsFailing's rule).
func TestAWokenPartitionThatCannotOpenRestsAgain(t *testing.T) {
	steady := newFakeClock()
	running, rests := &Running{}, metrics.NewSet().NewCounter("rests")
	var failOpens atomic.Bool
	r := newSupervisorRig(t, func(d *Deps) {
		d.Running, d.Metrics.Rests, d.Config.RestAfter, d.Steady = running, rests, time.Second, steady
		d.Knobs.OpenPartition = func(messages.PartitionKey) error {
			if failOpens.Load() {
				return errors.New("injected: the disk is gone for a moment")
			}
			return nil
		}
	})
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	steady.Advance(2 * time.Second)
	testnet.Eventually(t, 10*time.Second, "the partition at rest", func() bool { return rests.Get() == 1 && running.Resting(k) })

	failOpens.Store(true)
	// A read by offset wakes it (stats, and a lease of a drained
	// partition, are answered at the door).
	wakes := &messages.ReadAt{Offset: 0}
	_, err := Ask(context.Background(), r.system.Root, running, SupervisorPID(r.system), k, wakes, 2*time.Second)
	if err == nil {
		t.Fatal("a request while the log cannot open: got an answer, want an error")
	}
	testnet.Eventually(t, 30*time.Second, "the partition back at rest after its failed opens", func() bool { return running.Resting(k) })
	failOpens.Store(false)
	st := r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats)
	if st.HighWatermark != 0 || !running.Has(k) {
		t.Fatalf("once the disk is back: got HWM %d, open %v; want the partition served", st.HighWatermark, running.Has(k))
	}
}

// heldCloseRig is a supervisor rig whose partitions rest after a second
// of its steady clock, and whose partition hold closes on its disk: its
// close tells held, then waits for release to be closed.
type heldCloseRig struct {
	rig           *supervisorRig
	running       *Running
	rests         *metrics.Counter
	steady        *fakeClock
	held, release chan struct{}
}

func newHeldCloseRig(t *testing.T, hold int) heldCloseRig {
	h := heldCloseRig{running: &Running{}, rests: metrics.NewSet().NewCounter("rests"), steady: newFakeClock(),
		held: make(chan struct{}, 1), release: make(chan struct{})}
	h.rig = newSupervisorRig(t, func(d *Deps) {
		d.Running, d.Metrics.Rests, d.Config.RestAfter, d.Steady = h.running, h.rests, time.Second, h.steady
		d.Knobs.Closing = func(k messages.PartitionKey) {
			if k.Partition == hold {
				h.held <- struct{}{}
				<-h.release
			}
		}
	})
	return h
}

// A rest's stop is not awaited by the supervisor: while one partition's
// close waits for its disk, another partition is woken at once; and a
// request to the partition whose close is held waits for the close to end
// and is then served, rather than finding its actor's name still taken
// (issue 50's chaos run: "name exists", 73,852 times, for a stop that
// outlasted the supervisor's 10 s wait for it).
func TestARestWhoseCloseIsSlowHoldsNeitherTheSupervisorNorItsWake(t *testing.T) {
	h := newHeldCloseRig(t, 0)
	r, running, rests, steady, held, release := h.rig, h.running, h.rests, h.steady, h.held, h.release
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 2}
	r.replica.Put(orders, "n1", "n1")
	r.waitServing(orders, 0, true)
	r.waitServing(orders, 1, true)
	k0 := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	k1 := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 1}
	steady.Advance(2 * time.Second)
	<-held
	testnet.Eventually(t, 10*time.Second, "both partitions at rest", func() bool {
		return rests.Get() == 2 && running.Resting(k0) && running.Resting(k1)
	})
	if !running.Has(k0) {
		t.Fatal("partition 0 closing: got Has false, want true until its actor ended (rule K7)")
	}

	// Partition 1 wakes while partition 0's close is held: a read by
	// offset wakes it (stats, and a lease of a drained partition, are
	// answered at the door).
	wakes := &messages.ReadAt{Offset: 0}
	if res := r.askThrough(running, k1, wakes).(*messages.Reserved); res.Status != messages.StatusEmpty || !running.Has(k1) {
		t.Fatalf("partition 1 beside a held close: got status %d, open %v; want empty, served", res.Status, running.Has(k1))
	}

	// Partition 0's request waits for its close, then is served.
	type answer struct {
		res any
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := Ask(context.Background(), r.system.Root, running, SupervisorPID(r.system), k0, wakes, 10*time.Second)
		got <- answer{res, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("a request to a partition whose close is held: got %v, %v before the close ended; want it to wait", a.res, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	a := <-got
	if a.err != nil {
		t.Fatalf("a request to partition 0 once its close ended: got %v, want it served", a.err)
	}
	if res := a.res.(*messages.Reserved); res.Status != messages.StatusEmpty || !running.Has(k0) {
		t.Fatalf("partition 0 woken: got status %d, open %v; want empty, served", res.Status, running.Has(k0))
	}
}

// rule K7: a partition that left this node while its rest's close is held
// still counts as running (Running.Has), and the supervisor answers a
// move's DropEarlier only once that close ended: an install must not
// begin while an earlier ownership's actor may still write its files.
func TestRuleK7DropEarlierWaitsForARestsClose(t *testing.T) {
	h := newHeldCloseRig(t, 0)
	r, running, steady, held, release := h.rig, h.running, h.steady, h.held, h.release
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	steady.Advance(2 * time.Second)
	<-held
	r.replica.Put(orders, "n2") // moved away while its close is held
	testnet.Eventually(t, 10*time.Second, "the resting partition forgotten", func() bool { return r.owned.Load() == 0 })
	if !running.Has(k) {
		t.Fatal("closing after it left: got Has false, want true until its actor ended")
	}
	got := make(chan error, 1)
	go func() {
		_, err := Request(context.Background(), r.system.Root, SupervisorPID(r.system), messages.DropEarlier{Key: k}, 10*time.Second)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("DropEarlier while the close is held: answered (%v); want it to wait for the close", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("DropEarlier once the close ended: got %v, want an answer", err)
	}
	if running.Has(k) {
		t.Fatal("after its end: got Has true, want false")
	}
}

// A resting partition's stats are answered at its door, as they were when
// it rested, without waking it: a console or a client polling a topic's
// stats does not keep its idle partitions open. A commit wakes it, and
// the stats then move with it.
func TestARestingPartitionsStatsAreAnsweredWithoutAWake(t *testing.T) {
	steady := newFakeClock()
	r, running, rests := restRig(t, time.Second, steady)
	orders, k := ordersWithRecords(r, 3)
	open := r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats)
	steady.Advance(2 * time.Second)
	testnet.Eventually(t, 10*time.Second, "the partition at rest, its actor stopped", func() bool {
		return rests.Get() == 1 && !r.serving(orders, 0)
	})

	st := r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats)
	if st.HighWatermark != 3 || st.Segments != open.Segments || st.SizeBytes != open.SizeBytes || st.OldestSegmentAt != open.OldestSegmentAt {
		t.Fatalf("stats at rest: got %+v, want those it had open, %+v", *st, *open)
	}
	if !running.Resting(k) || r.serving(orders, 0) {
		t.Fatal("after a stats read: got the partition woken, want it still at rest")
	}

	c := r.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 4, Body: []byte(`"x"`)}}}).(*messages.CommitResult)
	if c.Status != messages.StatusOK || c.FirstOffset != 3 {
		t.Fatalf("commit at rest: got status %d at offset %d, want OK at 3", c.Status, c.FirstOffset)
	}
	if st := r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats); st.HighWatermark != 4 {
		t.Fatalf("stats after a commit woke it: got HWM %d, want 4", st.HighWatermark)
	}
}

// A partition that rested with every record acked answers a lease at its
// door, empty, without a wake: a consumer polling its topic does not keep
// it open. One that rested with a record unacked is woken by the lease and
// delivers it; and a commit wakes a drained one, whose next lease then
// delivers the new record.
func TestADrainedRestingPartitionAnswersALeaseEmptyWithoutAWake(t *testing.T) {
	steady := newFakeClock()
	r, running, rests := restRig(t, time.Second, steady)
	_, k := ordersWithRecords(r, 2)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	lease := &messages.Reserve{Limits: lim}
	restNow := func(n uint64) {
		t.Helper()
		steady.Advance(2 * time.Second)
		testnet.Eventually(t, 10*time.Second, "the partition at rest, its actor stopped", func() bool {
			return rests.Get() == n && !r.serving(orders, 0)
		})
	}
	ack := func(d messages.Delivery) {
		t.Helper()
		res := r.askThrough(running, k, &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce}).(*messages.LeaseResult)
		if res.Status != messages.StatusOK {
			t.Fatalf("ack of offset %d: got status %d, want OK", d.Offset, res.Status)
		}
	}

	// Offset 0 acked, offset 1 never leased: not drained.
	ack(r.leaseWith(k, lim))
	restNow(1)
	res := r.askThrough(running, k, lease).(*messages.Reserved)
	if res.Status != messages.StatusOK || res.Delivery.Offset != 1 {
		t.Fatalf("lease at rest with offset 1 unacked: got status %d, offset %d; want OK, 1", res.Status, res.Delivery.Offset)
	}
	ack(res.Delivery)

	// Every record acked: drained.
	restNow(2)
	if res := r.askThrough(running, k, lease).(*messages.Reserved); res.Status != messages.StatusEmpty {
		t.Fatalf("lease at rest, drained: got status %d, want empty", res.Status)
	}
	if !running.Resting(k) || r.serving(orders, 0) {
		t.Fatal("after a lease of a drained partition: got it woken, want it still at rest")
	}

	c := r.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 3, Body: []byte(`"x"`)}}}).(*messages.CommitResult)
	if c.Status != messages.StatusOK || c.FirstOffset != 2 {
		t.Fatalf("commit at rest: got status %d at offset %d, want OK at 2", c.Status, c.FirstOffset)
	}
	if res := r.askThrough(running, k, lease).(*messages.Reserved); res.Status != messages.StatusOK || res.Delivery.Offset != 2 {
		t.Fatalf("lease after the commit woke it: got status %d, offset %d; want OK, 2", res.Status, res.Delivery.Offset)
	}
}

// coldLife is the next life of first's partitions after a kill, its
// topics already placed here when its supervisor starts (a node's start):
// a rig over a copy of first's data dir, with rests on, no survey unless
// tweak asks for one, and the doors in the running set it returns.
func (first *supervisorRig) coldLife(replica *fakeReplica, tweak ...func(*Deps)) (*supervisorRig, *Running) {
	first.t.Helper()
	killed := first.t.TempDir()
	if err := os.CopyFS(killed, os.DirFS(first.dataDir)); err != nil {
		first.t.Fatal(err)
	}
	running := &Running{}
	next := newSupervisorRigOver(first.t, replica, append([]func(*Deps){func(d *Deps) {
		d.DataDir, d.Running, d.Config.RestAfter, d.Config.SurveyOpensMax = killed, running, time.Minute, 0
	}}, tweak...)...)
	return next, running
}

// Issue 50: a partition this node owns when it starts rests until its
// first request: no actor and no log open, yet counted served. The request
// that wakes it finds the state the last life left: the lease out then is
// out still (the next consumer gets the record after it, and its holder's
// ack answers OK), a retried ack of a record acked then answers OK, and a
// commit lands after the last record. A partition a move targets opens at
// the start, frozen, as after any restart.
func TestAPartitionOwnedAtTheStartRestsUntilItsFirstRequest(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	first := newSupervisorRig(t)
	orders, k := ordersWithRecords(first, 3)
	d0, d1 := first.leaseWith(k, lim), first.leaseWith(k, lim)
	ack := func(d messages.Delivery) *messages.Lease {
		return &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce, Limits: lim}
	}
	if got := first.ask(k, ack(d0)).(*messages.LeaseResult).Status; got != messages.StatusOK {
		t.Fatalf("ack of offset %d: got status %d, want OK", d0.Offset, got)
	}
	moving := messages.Topic{Name: "moving", Incarnation: 9, Partitions: 1}
	first.replica.Put(moving, "n1")
	first.waitServing(moving, 0, true)
	mk := messages.PartitionKey{Topic: "moving", Incarnation: 9, Partition: 0}
	if got := first.commit(mk, 1); got != messages.StatusOK {
		t.Fatalf("commit to moving: got status %d, want OK", got)
	}

	replica := newFakeReplica()
	replica.Put(orders, "n1")
	replica.Put(moving, "n1")
	replica.SetTarget(moving, 0, "n2")
	var opens atomic.Int32
	next, running := first.coldLife(replica, func(d *Deps) {
		d.Knobs.OpenPartition = func(o messages.PartitionKey) error {
			if o == k {
				opens.Add(1)
			}
			return nil
		}
	})
	if !running.Resting(k) || opens.Load() != 0 || next.serving(orders, 0) || next.owned.Load() != 2 || running.Closed() != 1 {
		t.Fatalf("after the start: got resting %v, %d opens, an actor %v, %d served, %d resting; want true, 0, false, 2, 1",
			running.Resting(k), opens.Load(), next.serving(orders, 0), next.owned.Load(), running.Closed())
	}
	if got := next.commit(mk, 2); got != messages.StatusFrozen {
		t.Fatalf("commit to the partition a move targets: got status %d, want StatusFrozen (%d): opened at the start, frozen", got, messages.StatusFrozen)
	}

	res := next.askThrough(running, k, &messages.Reserve{Limits: lim}).(*messages.Reserved)
	if res.Status != messages.StatusOK || res.Delivery.Offset != 2 || opens.Load() != 1 {
		t.Fatalf("first request, a reserve: got status %d, offset %d, %d opens; want OK, 2 (0 acked, 1 leased), 1", res.Status, res.Delivery.Offset, opens.Load())
	}
	if got := running.Closed(); got != 0 {
		t.Fatalf("after the first request: got %d partitions resting, want 0", got)
	}
	for _, d := range []messages.Delivery{d1, d0} {
		if got := next.askThrough(running, k, ack(d)).(*messages.LeaseResult).Status; got != messages.StatusOK {
			t.Fatalf("ack of offset %d from the last life: got status %d, want OK", d.Offset, got)
		}
	}
	c := next.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 4, Body: []byte(`"x"`)}}}).(*messages.CommitResult)
	if c.Status != messages.StatusOK || c.FirstOffset != 3 {
		t.Fatalf("commit after the wake: got status %d at offset %d, want OK at 3", c.Status, c.FirstOffset)
	}
}

// Issue 50: a partition resting since the node started is woken for
// retention once its oldest sealed segment, read from its directory, is
// past its topic's retention, and not before; a pass reads at most
// ColdProbesPerPassMax directories, the rest the next pass.
func TestAPartitionRestingSinceTheStartIsWokenForRetentionWhenOld(t *testing.T) {
	records := newFakeClock()
	segments := func(d *Deps) { d.LogConfig.SegmentMaxBytes, d.LogConfig.Clock = 4<<10, records }
	first := newSupervisorRig(t, segments)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 3, RetentionMs: 60_000}
	first.replica.Put(orders, "n1", "n1", "n1")
	body := fmt.Appendf(nil, `"%s"`, make([]byte, 1<<10))
	var keys []messages.PartitionKey
	for p := range orders.Partitions {
		first.waitServing(orders, p, true)
		k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: p}
		keys = append(keys, k)
		for seq := uint64(1); seq <= 12; seq++ {
			if c := first.ask(k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: body}}}).(*messages.CommitResult); c.Status != messages.StatusOK {
				t.Fatalf("commit %d to %d: got status %d (%s), want OK", seq, p, c.Status, c.Err)
			}
		}
	}
	replica := newFakeReplica()
	replica.Put(orders, "n1", "n1", "n1")
	next, running := first.coldLife(replica, segments, func(d *Deps) { d.Config.ColdProbesPerPassMax = 1 })
	pass := func() (woken int) {
		t.Helper()
		next.system.Root.Send(SupervisorPID(next.system), RetentionTick{})
		if _, err := Request(context.Background(), next.system.Root, SupervisorPID(next.system), Reconcile{}, 5*time.Second); err != nil {
			t.Fatal(err) // answered after the tick before it
		}
		for _, k := range keys {
			if running.Has(k) {
				woken++
			}
		}
		return woken
	}
	if got := pass(); got != 0 {
		t.Fatalf("retention pass, every segment young: got %d woken, want 0", got)
	}
	records.Advance(2 * time.Minute)
	if got := pass(); got != 2 {
		t.Fatalf("retention pass, every segment old, one read the pass before: got %d woken, want 2 (it, and the one this pass read)", got)
	}
	if got := pass(); got != 3 {
		t.Fatalf("the next pass: got %d woken, want 3", got)
	}
	for _, k := range keys {
		testnet.Eventually(t, 10*time.Second, "retention to remove the old segments", func() bool {
			return next.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats).OldestOffset > 0
		})
	}
}

// Issue 50: after the start, the supervisor surveys the partitions it
// started at rest, SurveyOpensMax at a time: each opens and rests again at
// once, leaving its stats and whether it is drained at its door, and one
// with records to deliver is announced as any open announces it. A lease
// asked of a drained one is then answered at its door, with no open.
func TestThePartitionsStartedAtRestAreSurveyed(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	first := newSupervisorRig(t)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 3}
	first.replica.Put(orders, "n1", "n1", "n1")
	keys := make([]messages.PartitionKey, 3)
	for p := range keys {
		first.waitServing(orders, p, true)
		keys[p] = messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: p}
	}
	for p := range 2 { // 0: two records, both acked; 1: two, none acked; 2: none
		for seq := uint64(1); seq <= 2; seq++ {
			if got := first.commit(keys[p], seq); got != messages.StatusOK {
				t.Fatalf("commit %d to %d: got status %d, want OK", seq, p, got)
			}
		}
	}
	for range 2 {
		d := first.leaseWith(keys[0], lim)
		if got := first.ask(keys[0], &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce, Limits: lim}).(*messages.LeaseResult).Status; got != messages.StatusOK {
			t.Fatalf("ack of offset %d: got status %d, want OK", d.Offset, got)
		}
	}

	replica := newFakeReplica()
	replica.Put(orders, "n1", "n1", "n1")
	var mu sync.Mutex
	announced := map[int]int{}
	var opens atomic.Int32
	next, running := first.coldLife(replica, func(d *Deps) {
		d.Config.SurveyOpensMax = 1
		d.Notify = func(k messages.PartitionKey) { mu.Lock(); announced[k.Partition]++; mu.Unlock() }
		d.Knobs.OpenPartition = func(messages.PartitionKey) error { opens.Add(1); return nil }
	})
	testnet.Eventually(t, 10*time.Second, "every partition surveyed and at rest again", func() bool {
		for _, k := range keys {
			if st, _, resting := running.closedDoor(k); !resting || st == nil {
				return false
			}
		}
		return true
	})
	if got := running.Closed(); got != 3 {
		t.Fatalf("surveyed: got %d partitions resting, want 3", got)
	}
	for p, want := range []struct {
		hwm     int64
		drained bool
	}{{2, true}, {2, false}, {0, true}} {
		st, drained, _ := running.closedDoor(keys[p])
		if st.HighWatermark != want.hwm || drained != want.drained {
			t.Fatalf("partition %d at its door: got HWM %d, drained %v; want %d, %v", p, st.HighWatermark, drained, want.hwm, want.drained)
		}
	}
	mu.Lock()
	if announced[0] != 0 || announced[1] == 0 || announced[2] != 0 {
		t.Fatalf("announced by the survey: got %v, want partition 1 only (records to deliver)", announced)
	}
	mu.Unlock()
	before := opens.Load()
	if got := next.askThrough(running, keys[0], &messages.Reserve{Limits: lim}).(*messages.Reserved).Status; got != messages.StatusEmpty || opens.Load() != before {
		t.Fatalf("lease asked of the drained partition: got status %d, %d opens; want Empty, none", got, opens.Load()-before)
	}
	res := next.askThrough(running, keys[1], &messages.Reserve{Limits: lim}).(*messages.Reserved)
	if res.Status != messages.StatusOK || res.Delivery.Offset != 0 || opens.Load() != before+1 {
		t.Fatalf("lease asked of partition 1: got status %d, offset %d, %d opens; want OK, 0, one", res.Status, res.Delivery.Offset, opens.Load()-before)
	}
}

// Issue 50: at a start, a partition whose topic fans out opens, to
// forward what its children lack; its child's partition starts at rest.
func TestAPartitionThatFansOutOpensAtTheStart(t *testing.T) {
	first := newSupervisorRig(t)
	parent := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1,
		Children: []messages.ChildLink{{Name: "audit", Incarnation: 8, AttachEpoch: 1}}}
	child := messages.Topic{Name: "audit", Incarnation: 8, Partitions: 1}
	replica := newFakeReplica()
	replica.Put(parent, "n1")
	replica.Put(child, "n1")
	next, running := first.coldLife(replica)
	pk := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	ck := messages.PartitionKey{Topic: "audit", Incarnation: 8, Partition: 0}
	if running.Resting(pk) || !next.serving(parent, 0) {
		t.Fatalf("the partition that fans out: got resting %v, an actor %v; want false, true", running.Resting(pk), next.serving(parent, 0))
	}
	if !running.Resting(ck) || next.serving(child, 0) {
		t.Fatalf("its child's partition: got resting %v, an actor %v; want true, false", running.Resting(ck), next.serving(child, 0))
	}
}

// Issue 50: a partition created on this node rests from its create, its
// log never opened: no actor, no directory, served and resting. A stats
// read and a lease are answered at its door as an empty partition's, with
// no open; its first commit opens it and lands at offset 0, and a lease
// then delivers it. A partition whose directory holds something, or whose
// topic fans out, opens at its create as before.
func TestAPartitionCreatedHereRestsUntilItsFirstCommit(t *testing.T) {
	running := &Running{}
	var opens atomic.Int32
	r := newSupervisorRig(t, func(d *Deps) {
		d.Running, d.Config.RestAfter, d.Config.CreatedAtRest = running, time.Minute, true
		d.Knobs.OpenPartition = func(messages.PartitionKey) error { opens.Add(1); return nil }
	})
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	k1 := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 1}
	dir1 := storage.PartitionPath(r.dataDir, "orders", 1)
	if err := os.MkdirAll(dir1, 0o755); err != nil {
		t.Fatal(err)
	}
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 2}
	r.replica.Put(orders, "n1", "n1")
	r.waitServing(orders, 1, true) // its directory was there: opened
	dir0 := storage.PartitionPath(r.dataDir, "orders", 0)
	if _, err := os.Stat(dir0); !errors.Is(err, fs.ErrNotExist) || !running.Resting(k) || r.serving(orders, 0) || r.owned.Load() != 2 || opens.Load() != 1 {
		t.Fatalf("after the create: got dir err %v, resting %v, an actor %v, %d served, %d opens; want no dir, true, false, 2, 1 (partition 1's)",
			err, running.Resting(k), r.serving(orders, 0), r.owned.Load(), opens.Load())
	}
	st := r.askThrough(running, k, &messages.GetStats{}).(*messages.PartitionStats)
	if st.Index != 0 || st.Segments != 1 || st.HighWatermark != 0 || st.NextOffset != 0 || st.InFlight != 0 || st.SizeBytes != 0 {
		t.Fatalf("stats at the door: got %+v, want partition 0, one empty segment", st)
	}
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	if res := r.askThrough(running, k, &messages.Reserve{Limits: lim}).(*messages.Reserved); res.Status != messages.StatusEmpty || opens.Load() != 1 {
		t.Fatalf("lease at the door: got status %d, %d opens; want empty, 1", res.Status, opens.Load())
	}
	c := r.askThrough(running, k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 1, Body: []byte(`"x"`)}}}).(*messages.CommitResult)
	if c.Status != messages.StatusOK || c.FirstOffset != 0 || opens.Load() != 2 {
		t.Fatalf("first commit: got status %d at offset %d, %d opens; want OK at 0, 2", c.Status, c.FirstOffset, opens.Load())
	}
	if res := r.askThrough(running, k, &messages.Reserve{Limits: lim}).(*messages.Reserved); res.Status != messages.StatusOK || res.Delivery.Offset != 0 {
		t.Fatalf("lease after the first commit: got status %d, offset %d; want OK, 0", res.Status, res.Delivery.Offset)
	}
	if running.Resting(k1) {
		t.Fatal("partition 1, whose directory was there: got resting, want open")
	}
}
