package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
)

// resvScript drives a reservationTable step by step with a fake clock, so a
// test reads as the sequence of consumer actions it describes. Every helper
// fails with "got X, want Y" naming the step.
type resvScript struct {
	t   *testing.T
	tab *reservationTable
	now time.Time
	lim reserveLimits
}

// resvEpoch is an arbitrary fixed start for the fake clock.
var resvEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const resvVis = 30 * time.Second

func resvStart(t *testing.T, hwm int64) *resvScript {
	return resvRestore(t, hwm, -1, nil)
}

func resvRestore(t *testing.T, hwm, frontier int64, ackedAhead []int64) *resvScript {
	return &resvScript{
		t:   t,
		tab: newReservationTable(frontier, ackedAhead),
		now: resvEpoch,
		lim: reserveLimits{HWM: hwm, MaxInFlight: 100, MaxAckedAhead: 100, Visibility: resvVis},
	}
}

func (s *resvScript) after(d time.Duration) { s.now = s.now.Add(d) }

// reserve expects offset want under nonce.
func (s *resvScript) reserve(nonce uint64, want int64) {
	s.t.Helper()
	got, ok := s.tab.reserve(s.now, s.lim, nonce)
	if !ok {
		s.t.Fatalf("reserve(nonce %d): got nothing, want offset %d", nonce, want)
	}
	if got != want {
		s.t.Fatalf("reserve(nonce %d): got offset %d, want %d", nonce, got, want)
	}
}

// reserveNothing expects no deliverable offset.
func (s *resvScript) reserveNothing() {
	s.t.Helper()
	if got, ok := s.tab.reserve(s.now, s.lim, 999_999); ok {
		s.t.Fatalf("reserve: got offset %d, want nothing", got)
	}
}

func (s *resvScript) ack(offset int64, nonce uint64, want ackOutcome) {
	s.t.Helper()
	if got := s.tab.ack(s.now, offset, nonce, s.lim.MaxAckedAhead); got != want {
		s.t.Fatalf("ack(%d, nonce %d): got %v, want %v", offset, nonce, got, want)
	}
}

func (s *resvScript) extend(offset int64, nonce uint64, want ackOutcome) {
	s.t.Helper()
	if got := s.tab.extend(s.now, offset, nonce, s.lim.Visibility); got != want {
		s.t.Fatalf("extend(%d, nonce %d): got %v, want %v", offset, nonce, got, want)
	}
}

func (s *resvScript) nack(offset int64, nonce uint64, want ackOutcome) {
	s.t.Helper()
	if got := s.tab.nack(s.now, offset, nonce); got != want {
		s.t.Fatalf("nack(%d, nonce %d): got %v, want %v", offset, nonce, got, want)
	}
}

// position expects the persisted consumer position.
func (s *resvScript) position(frontier int64, ackedAhead ...int64) {
	s.t.Helper()
	gotF, gotA := s.tab.state()
	if gotF != frontier || !slices.Equal(gotA, ackedAhead) {
		s.t.Fatalf("state: got frontier %d acked-ahead %v, want frontier %d acked-ahead %v",
			gotF, gotA, frontier, ackedAhead)
	}
}

func (s *resvScript) inFlight(want int) {
	s.t.Helper()
	if got := s.tab.inFlight(); got != want {
		s.t.Fatalf("inFlight: got %d, want %d", got, want)
	}
}

func TestReservationServesLowestUndeliveredOffsetFirst(t *testing.T) {
	s := resvStart(t, 3)
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserve(3, 2)
	s.reserveNothing()
	s.inFlight(3)
}

func TestReservationLeaseHidesRecordFromOtherConsumers(t *testing.T) {
	s := resvStart(t, 1)
	s.reserve(1, 0)
	s.reserveNothing()
	s.after(resvVis - time.Nanosecond) // one tick before the deadline
	s.reserveNothing()
	s.ack(0, 1, ackDone)
	s.reserveNothing()
}

func TestReservationExpiredLeaseIsRedeliveredWithANewNonce(t *testing.T) {
	s := resvStart(t, 2)
	s.reserve(1, 0)
	s.after(resvVis) // deadline <= now: expired
	s.reserve(2, 0)  // redelivered, before the new offset 1
	s.ack(0, 1, ackGone)
	s.extend(0, 1, ackGone)
	s.nack(0, 1, ackGone)
	s.ack(0, 2, ackDone)
	s.position(0)
}

func TestReservationAckOfExpiredLeaseIsGone(t *testing.T) {
	s := resvStart(t, 1)
	s.reserve(1, 0)
	s.after(resvVis) // exactly at the deadline
	s.ack(0, 1, ackGone)
	s.position(-1)
	s.inFlight(0)
	s.reserve(2, 0)
}

func TestReservationExtendRestartsTheFullTimeout(t *testing.T) {
	s := resvStart(t, 1)
	s.reserve(1, 0)
	s.after(20 * time.Second)
	s.extend(0, 1, ackDone) // deadline now 50 s after the reserve
	s.after(20 * time.Second)
	s.reserveNothing() // past the first deadline, still hidden
	s.after(10*time.Second - time.Nanosecond)
	s.reserveNothing()
	s.extend(0, 1, ackDone) // the same handle keeps working
	s.after(resvVis - time.Nanosecond)
	s.ack(0, 1, ackDone)
	s.position(0)
}

func TestReservationExtendOfExpiredLeaseIsGone(t *testing.T) {
	s := resvStart(t, 1)
	s.reserve(1, 0)
	s.after(resvVis)
	s.extend(0, 1, ackGone)
	s.reserve(2, 0)
}

func TestReservationNackMakesRecordRedeliverableAtOnceAndKillsTheHandle(t *testing.T) {
	s := resvStart(t, 3)
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.nack(0, 1, ackDone)
	s.inFlight(1)
	s.ack(0, 1, ackGone)
	s.extend(0, 1, ackGone)
	s.nack(0, 1, ackGone)
	s.reserve(3, 0) // same instant, lower than the new offset 2
	s.ack(0, 3, ackDone)
}

func TestReservationAckWithStaleNonceIsGone(t *testing.T) {
	s := resvStart(t, 2)
	s.reserve(1, 0)
	s.ack(0, 2, ackGone) // nonce of no reservation of 0
	s.ack(1, 1, ackGone) // offset never leased
	s.ack(0, 1, ackDone)
	s.ack(0, 1, ackGone) // already acked
	s.position(0)
}

func TestReservationOutOfOrderAcksMoveFrontierOverContiguousRun(t *testing.T) {
	s := resvStart(t, 5)
	for off := range int64(5) {
		s.reserve(uint64(off)+1, off)
	}
	s.ack(2, 3, ackDone)
	s.position(-1, 2)
	s.ack(4, 5, ackDone)
	s.position(-1, 2, 4)
	s.ack(0, 1, ackDone)
	s.position(0, 2, 4)
	s.ack(1, 2, ackDone) // closes the gap: 1 and 2 join the frontier
	s.position(2, 4)
	s.ack(3, 4, ackDone)
	s.position(4)
}

func TestReservationInFlightCapSkipsPartition(t *testing.T) {
	s := resvStart(t, 10)
	s.lim.MaxInFlight = 2
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserveNothing()
	s.inFlight(2)
	s.ack(1, 2, ackDone)
	s.reserve(3, 2)
	s.reserveNothing()
	s.lim.MaxInFlight = 3 // an alter applies at once
	s.reserve(4, 3)
}

func TestReservationAckedAheadFullServesOnlyTheHead(t *testing.T) {
	s := resvStart(t, 10)
	s.lim.MaxAckedAhead = 2
	for off := range int64(4) {
		s.reserve(uint64(off)+1, off)
	}
	s.ack(1, 2, ackDone)
	s.ack(2, 3, ackDone)
	s.position(-1, 1, 2) // full
	s.reserveNothing()   // head 0 is leased; 4..9 are not served
	s.nack(3, 4, ackDone)
	s.reserveNothing() // 3 waits: it is not the head
	s.nack(0, 1, ackDone)
	s.reserve(5, 0) // the head is
	s.reserveNothing()
	s.ack(0, 5, ackDone)
	s.position(2)
	s.reserve(6, 3)
	s.reserve(7, 4)
}

func TestReservationAckedAheadFullServesNewHead(t *testing.T) {
	// A restored state can be full with a head that was never delivered.
	s := resvRestore(t, 10, -1, []int64{2, 3})
	s.lim.MaxAckedAhead = 2
	s.reserve(1, 0)
	s.reserveNothing()
	s.ack(0, 1, ackDone)
	s.reserve(2, 1)
	s.ack(1, 2, ackDone)
	s.position(3)
}

func TestReservationAckedAheadFullRefusesOtherAcks(t *testing.T) {
	s := resvStart(t, 3)
	s.lim.MaxAckedAhead = 1
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserve(3, 2)
	s.ack(1, 2, ackDone)
	s.ack(2, 3, ackFull)
	s.ack(2, 3, ackFull) // the lease stays: the client retries
	s.inFlight(2)
	s.ack(0, 1, ackDone) // the head is always accepted
	s.position(1)
	s.ack(2, 3, ackDone)
	s.position(2)
}

func TestReservationRestoredStateNeverRedeliversAckedOffsets(t *testing.T) {
	s := resvRestore(t, 8, 2, []int64{4, 6})
	s.position(2, 4, 6)
	s.reserve(1, 3)
	s.reserve(2, 5)
	s.reserve(3, 7)
	s.reserveNothing()
}

func TestReservationRestoreNormalisesTheState(t *testing.T) {
	// An entry at frontier+1 joins the frontier; entries at or below it go.
	s := resvRestore(t, 8, 1, []int64{0, 1, 2, 3, 5})
	s.position(3, 5)
	s.reserve(1, 4)
	s.reserve(2, 6)
}

// A restart that kept the leases out: the holder of one acks it with the
// handle the last life gave, and nobody else gets its record meanwhile.
func TestReservationRestoredLeaseHoldsItsRecordForItsHolder(t *testing.T) {
	s := resvRestore(t, 8, 1, []int64{4})
	held := []storage.Lease{{Offset: 3, Nonce: 7, Visibility: 5 * time.Second}, {Offset: 5, Nonce: 8, Visibility: time.Minute}}
	if got := s.tab.restoreLeases(s.now, held, 100); got != 2 {
		t.Fatalf("restoreLeases: got %d restored, want 2", got)
	}
	s.inFlight(2)
	// 2 may have been delivered by the last life: it is served first,
	// then the records past the highest lease.
	s.reserve(1, 2)
	s.reserve(2, 6)
	s.reserve(10, 7)
	s.ack(3, 7, ackDone)
	s.ack(5, 9, ackGone)
	s.after(time.Minute)
	// The lease of 5 ran a full minute from the restart: only now is its
	// record served again.
	s.reserve(3, 2)
	s.reserve(4, 5)
	s.reserve(11, 6)
}

// What restoreLeases must not bring back: leases on acked offsets, beyond
// the span, with nonce 0, no visibility or a repeated offset.
func TestReservationRestoreLeasesSkipsWhatCannotBeALease(t *testing.T) {
	s := resvRestore(t, 20, 1, []int64{4})
	held := []storage.Lease{
		{Offset: 1, Nonce: 1, Visibility: time.Second},  // acked (frontier)
		{Offset: 4, Nonce: 2, Visibility: time.Second},  // acked ahead
		{Offset: 3, Nonce: 0, Visibility: time.Second},  // nonce 0
		{Offset: 5, Nonce: 3},                           // no visibility
		{Offset: 6, Nonce: 4, Visibility: time.Second},  // kept
		{Offset: 6, Nonce: 5, Visibility: time.Second},  // repeated
		{Offset: 12, Nonce: 6, Visibility: time.Second}, // 11 past the frontier
	}
	if got := s.tab.restoreLeases(s.now, held, 10); got != 1 {
		t.Fatalf("restoreLeases: got %d restored, want 1", got)
	}
	s.ack(6, 4, ackDone)
	for _, want := range []int64{2, 3, 5, 7, 8} {
		s.reserve(uint64(100+want), want)
	}
}

// leasesOut lists the live leases lowest first, at most the limit, with
// the length each was granted or extended to.
func TestReservationLeasesOutAreLiveAndLowestFirst(t *testing.T) {
	s := resvStart(t, 10)
	for i := range int64(4) {
		s.reserve(uint64(i+1), i)
	}
	s.lim.Visibility = time.Minute
	s.extend(1, 2, ackDone)
	s.lim.Visibility = time.Second
	s.reserve(5, 4)
	s.after(2 * time.Second) // 4's lease has expired, not yet reaped
	got := s.tab.leasesOut(nil, s.now, 3)
	want := []storage.Lease{{Offset: 0, Nonce: 1, Visibility: resvVis}, {Offset: 1, Nonce: 2, Visibility: time.Minute}, {Offset: 2, Nonce: 3, Visibility: resvVis}}
	if !slices.Equal(got, want) {
		t.Errorf("leasesOut(limit 3): got %v, want %v", got, want)
	}
	if got := s.tab.leasesOut(nil, s.now, 10); len(got) != 4 {
		t.Errorf("leasesOut(limit 10): got %v, want the 4 leases not expired", got)
	}
}

func TestReservationRetentionSkipsOffsetsBelowOldest(t *testing.T) {
	s := resvStart(t, 10)
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserve(3, 2)
	s.ack(2, 3, ackDone)
	s.position(-1, 2)
	s.lim.Oldest = 2 // retention removed 0 and 1 while they were leased
	s.reserve(4, 3)
	s.position(2) // 0 and 1 count as acked; the frontier runs on over 2
	s.inFlight(1) // the leases of 0 and 1 no longer hold slots
	s.ack(0, 1, ackGone)
	s.lim.Oldest = 6 // never-delivered 4 and 5 are skipped too
	s.reserve(5, 6)
	s.position(5)
}

func TestReservationSkipOfCorruptRecordAdvancesTheHead(t *testing.T) {
	s := resvStart(t, 3)
	s.lim.MaxAckedAhead = 1
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.ack(1, 2, ackDone) // full: only the head may be served
	s.after(resvVis)
	s.reserve(3, 0) // the head, redelivered; the actor cannot read it
	s.tab.skip(0)
	s.position(1)
	s.inFlight(0)
	s.ack(0, 3, ackGone)
	s.reserve(4, 2)
}

func TestReservationSkipOfNewRecordIsNeverServed(t *testing.T) {
	s := resvStart(t, 3)
	s.reserve(1, 0)
	s.tab.skip(1)
	s.tab.skip(1) // already acked: no-op
	s.position(-1, 1)
	s.reserve(2, 2)
	s.reserveNothing()
}

func TestReservationClampDropsEverythingAtOrPastHWM(t *testing.T) {
	s := resvStart(t, 10)
	for off := range int64(6) {
		s.reserve(uint64(off)+1, off)
	}
	s.ack(1, 2, ackDone)
	s.ack(4, 5, ackDone)
	s.nack(5, 6, ackDone) // pending redelivery at 5
	if s.tab.clamp(3) {
		t.Fatalf("clamp(3): got clamped, want not (the frontier -1 fits)")
	}
	s.position(-1, 1) // acked-ahead 4 dropped
	s.inFlight(2)     // 0 and 2 kept; 3 dropped
	s.ack(3, 4, ackGone)
	s.lim.HWM = 3
	s.reserveNothing() // the redelivery of 5 is gone too
	s.lim.HWM = 6      // new records at 3..5
	s.reserve(7, 3)
	s.reserve(8, 4)
	s.reserve(9, 5)
	s.reserveNothing()

	r := resvRestore(t, 20, 9, []int64{11, 15})
	if !r.tab.clamp(5) {
		t.Fatalf("clamp(5) of frontier 9: got not clamped, want clamped")
	}
	r.position(4)
	r.lim.HWM = 7
	r.reserve(1, 5)
	r.reserve(2, 6)
	r.reserveNothing()
}

func TestReservationDropLeasesMakesEveryLeaseRedeliverable(t *testing.T) {
	s := resvStart(t, 4)
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserve(3, 2)
	s.ack(1, 2, ackDone)
	s.tab.dropLeases()
	s.inFlight(0)
	s.ack(0, 1, ackGone)
	s.ack(2, 3, ackGone)
	s.reserve(4, 0)
	s.reserve(5, 2)
	s.reserve(6, 3)
	s.reserveNothing()
}

func TestReservationRedeliveriesComeBeforeNewRecords(t *testing.T) {
	s := resvStart(t, 10)
	for off := range int64(4) {
		s.reserve(uint64(off)+1, off)
	}
	s.after(10 * time.Second)
	s.reserve(5, 4) // a new lease at +10 s
	s.nack(2, 3, ackDone)
	s.reserve(6, 2) // the nacked record before the new 5
	s.nack(2, 6, ackDone)
	s.after(resvVis - 10*time.Second)
	// 0, 1 and 3 expired, 2 is nacked; 4 is still leased. Redeliveries
	// lowest first, then new records.
	s.reserve(7, 0)
	s.reserve(8, 1)
	s.reserve(9, 2)
	s.reserve(10, 3)
	s.reserve(11, 5)
}

func TestReservationNeverServesAtOrPastHWM(t *testing.T) {
	s := resvStart(t, 0)
	s.reserveNothing()
	s.lim.HWM = 2
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.reserveNothing()
	s.nack(1, 2, ackDone)
	s.lim.HWM = 1 // lowered without clamp: 1 is pending but not served
	s.reserveNothing()
	s.lim.HWM = 3
	s.reserve(3, 1)
	s.reserve(4, 2)
	s.reserveNothing()
}

func TestReservationInFlightCountsExpiredLeasesUntilTheNextCall(t *testing.T) {
	s := resvStart(t, 3)
	s.reserve(1, 0)
	s.reserve(2, 1)
	s.after(resvVis)
	s.inFlight(2) // expired, not reaped yet
	s.ack(1, 2, ackGone)
	s.inFlight(0) // the ack reaped both
}

func TestReservationHeapsStayBounded(t *testing.T) {
	// One lease extended many times leaves a stale expiry entry per
	// extend; the heap is compacted instead of growing.
	s := resvStart(t, 1)
	s.reserve(1, 0)
	for range 10_000 {
		s.after(time.Second)
		s.extend(0, 1, ackDone)
	}
	if got, limit := s.tab.expiry.len(), 2*1+resvHeapSlack; got > limit {
		t.Fatalf("expiry heap: got %d entries, want at most %d", got, limit)
	}
	// Many leases acked: their entries are stale and must not linger.
	b := resvStart(t, 5000)
	b.lim.MaxInFlight = 5000
	for off := range int64(5000) {
		b.reserve(uint64(off)+1, off)
	}
	for off := range int64(5000) {
		b.ack(off, uint64(off)+1, ackDone)
	}
	if got := b.tab.expiry.len(); got > resvHeapSlack {
		t.Fatalf("expiry heap after acking all: got %d entries, want at most %d", got, resvHeapSlack)
	}
	if got, limit := cap(b.tab.expiry.items), 4*resvHeapSlack; got > limit {
		t.Fatalf("expiry heap capacity after acking all: got %d, want at most %d", got, limit)
	}
	// Many nacked records skipped before their redelivery: their redeliver
	// entries are stale.
	b.lim.HWM = 10_000
	for off := range int64(5000) {
		b.reserve(uint64(off)+10_001, 5000+off)
	}
	for off := range int64(5000) {
		b.nack(5000+off, uint64(off)+10_001, ackDone)
	}
	for off := range int64(5000) {
		b.tab.skip(9999 - off)
	}
	if got := b.tab.redeliver.len(); got > resvHeapSlack {
		t.Fatalf("redeliver heap after skipping all: got %d entries, want at most %d", got, resvHeapSlack)
	}
	b.position(9999)
	b.reserveNothing()
}

// ---- Randomized model test and fuzz target ----

// resvModel is the reference: the same rules written as plainly as possible,
// with sets and linear scans from offset 0, sharing no code with the table.
type resvModel struct {
	acked     map[int64]bool
	delivered map[int64]bool
	leases    map[int64]resvLease
}

func newResvModel(frontier int64, ackedAhead []int64) *resvModel {
	m := &resvModel{acked: map[int64]bool{}, delivered: map[int64]bool{}, leases: map[int64]resvLease{}}
	for o := int64(0); o <= frontier; o++ {
		m.acked[o] = true
	}
	for _, o := range ackedAhead {
		m.acked[o] = true
	}
	return m
}

func (m *resvModel) frontier() int64 {
	f := int64(-1)
	for m.acked[f+1] {
		f++
	}
	return f
}

func (m *resvModel) ackedAhead() []int64 {
	f := m.frontier()
	var out []int64
	for o := range m.acked {
		if o > f {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

func (m *resvModel) reap(now time.Time) {
	for o, l := range m.leases {
		if !l.deadline.After(now) {
			delete(m.leases, o)
		}
	}
}

func (m *resvModel) reserve(now time.Time, lim reserveLimits, nonce uint64) (int64, bool) {
	m.reap(now)
	for o := int64(0); o < min(lim.Oldest, lim.HWM); o++ {
		m.acked[o] = true
		delete(m.leases, o)
	}
	if int64(len(m.leases)) >= lim.MaxInFlight {
		return -1, false
	}
	pick := int64(-1)
	if int64(len(m.ackedAhead())) >= lim.MaxAckedAhead {
		head := m.frontier() + 1
		if _, leased := m.leases[head]; head < lim.HWM && !leased {
			pick = head
		}
	} else {
		for o := int64(0); o < lim.HWM && pick < 0; o++ {
			if _, leased := m.leases[o]; m.delivered[o] && !m.acked[o] && !leased {
				pick = o
			}
		}
		for o := int64(0); o < lim.HWM && pick < 0; o++ {
			if !m.delivered[o] && !m.acked[o] {
				pick = o
			}
		}
	}
	if pick < 0 {
		return -1, false
	}
	m.delivered[pick] = true
	m.leases[pick] = resvLease{nonce: nonce, deadline: now.Add(lim.Visibility), visibility: lim.Visibility}
	return pick, true
}

func (m *resvModel) holds(now time.Time, off int64, nonce uint64) bool {
	m.reap(now)
	l, ok := m.leases[off]
	return ok && l.nonce == nonce
}

func (m *resvModel) ack(now time.Time, off int64, nonce uint64, maxAhead int64) ackOutcome {
	if !m.holds(now, off, nonce) {
		return ackGone
	}
	if off != m.frontier()+1 && int64(len(m.ackedAhead())) >= maxAhead {
		return ackFull
	}
	delete(m.leases, off)
	m.acked[off] = true
	return ackDone
}

func (m *resvModel) extend(now time.Time, off int64, nonce uint64, vis time.Duration) ackOutcome {
	if !m.holds(now, off, nonce) {
		return ackGone
	}
	m.leases[off] = resvLease{nonce: nonce, deadline: now.Add(vis), visibility: vis}
	return ackDone
}

func (m *resvModel) nack(now time.Time, off int64, nonce uint64) ackOutcome {
	if !m.holds(now, off, nonce) {
		return ackGone
	}
	delete(m.leases, off)
	return ackDone
}

func (m *resvModel) skip(off int64) {
	if off < 0 || m.acked[off] {
		return
	}
	delete(m.leases, off)
	m.acked[off] = true
}

func (m *resvModel) clamp(hwm int64) bool {
	before := m.frontier()
	for _, set := range []map[int64]bool{m.acked, m.delivered} {
		for o := range set {
			if o >= hwm {
				delete(set, o)
			}
		}
	}
	for o := range m.leases {
		if o >= hwm {
			delete(m.leases, o)
		}
	}
	return m.frontier() < before
}

// resvChooser is where the harness gets its decisions: a seeded PRNG for the
// model test, the fuzzer's bytes for the fuzz target.
type resvChooser interface {
	// pick returns a value in [0, n).
	pick(n int) int
	// more reports whether the source can drive another step.
	more() bool
}

type resvRandChooser struct{ r *rand.Rand }

func (c resvRandChooser) pick(n int) int { return c.r.IntN(n) }
func (c resvRandChooser) more() bool     { return true }

type resvByteChooser struct{ data []byte }

func (c *resvByteChooser) pick(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

func (c *resvByteChooser) more() bool { return len(c.data) > 0 }

type resvHandle struct {
	offset int64
	nonce  uint64
}

// resvHarness runs one op at a time on a table and the model, comparing
// every outcome and checking the invariants after each op.
type resvHarness struct {
	tb       testing.TB
	tab      *reservationTable
	m        *resvModel
	now      time.Time
	lim      reserveLimits
	maxHWM   int64
	nonce    uint64
	issued   []resvHandle // recent handles, live or not, for stale acks
	frontier int64        // the last frontier seen, to check it never moves back
	// The largest caps ever in force (or restored), which bound the table.
	maxInFlightEver, maxAckedAheadEver int64
	// trace keeps the recent ops unformatted: formatting every op would
	// cost more than the ops themselves, and it is only read on failure.
	trace []resvTraceEntry
}

type resvTraceEntry struct {
	format string
	args   []any
}

func newResvHarness(tb testing.TB, maxHWM int64) *resvHarness {
	return &resvHarness{
		tb:                tb,
		tab:               newReservationTable(-1, nil),
		m:                 newResvModel(-1, nil),
		now:               resvEpoch,
		lim:               reserveLimits{MaxInFlight: 4, MaxAckedAhead: 3, Visibility: 5 * time.Second},
		maxHWM:            maxHWM,
		frontier:          -1,
		maxInFlightEver:   4,
		maxAckedAheadEver: 3,
	}
}

func (h *resvHarness) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...) + "\nlast ops:"
	for _, e := range h.trace[max(0, len(h.trace)-30):] {
		msg += "\n  " + fmt.Sprintf(e.format, e.args...)
	}
	h.tb.Fatal(msg)
}

func (h *resvHarness) log(format string, args ...any) {
	h.trace = append(h.trace, resvTraceEntry{format, args})
	if len(h.trace) > 200 {
		h.trace = slices.Delete(h.trace, 0, 100)
	}
}

func (h *resvHarness) remember(off int64, nonce uint64) {
	h.issued = append(h.issued, resvHandle{off, nonce})
	if len(h.issued) > 64 {
		h.issued = slices.Delete(h.issued, 0, 32)
	}
}

// reserve runs one reserve on both and returns the served offset, if any.
func (h *resvHarness) reserve() (int64, bool) {
	h.nonce++
	wantOff, wantOK := h.m.reserve(h.now, h.lim, h.nonce)
	gotOff, gotOK := h.tab.reserve(h.now, h.lim, h.nonce)
	h.log("reserve(nonce %d, %+v) = %d %v", h.nonce, h.lim, gotOff, gotOK)
	if gotOK != wantOK || (gotOK && gotOff != wantOff) {
		h.fail("reserve: got (%d, %v), want (%d, %v)", gotOff, gotOK, wantOff, wantOK)
	}
	if !gotOK {
		return -1, false
	}
	if gotOff >= h.lim.HWM || gotOff < min(h.lim.Oldest, h.lim.HWM) {
		h.fail("reserve: got offset %d, want within [%d, %d)", gotOff, h.lim.Oldest, h.lim.HWM)
	}
	// The model marked only offsets below Oldest acked during this call,
	// so this is "an acked offset is never served again".
	if h.m.acked[gotOff] || gotOff <= h.frontier {
		h.fail("reserve: got offset %d, which is acked (frontier %d)", gotOff, h.frontier)
	}
	h.remember(gotOff, h.nonce)
	return gotOff, true
}

func (h *resvHarness) ack(hd resvHandle) ackOutcome {
	want := h.m.ack(h.now, hd.offset, hd.nonce, h.lim.MaxAckedAhead)
	got := h.tab.ack(h.now, hd.offset, hd.nonce, h.lim.MaxAckedAhead)
	h.log("ack(%d, nonce %d, max %d) = %v", hd.offset, hd.nonce, h.lim.MaxAckedAhead, got)
	if got != want {
		h.fail("ack(%d, nonce %d): got %v, want %v", hd.offset, hd.nonce, got, want)
	}
	return got
}

// pickHandle mostly returns a live lease (so acks mostly succeed), sometimes
// any recent handle (stale, acked, nacked or expired).
func (h *resvHarness) pickHandle(c resvChooser) (resvHandle, bool) {
	if len(h.m.leases) > 0 && c.pick(4) != 0 {
		offs := make([]int64, 0, len(h.m.leases))
		for o := range h.m.leases {
			offs = append(offs, o)
		}
		slices.Sort(offs)
		o := offs[c.pick(len(offs))]
		return resvHandle{o, h.m.leases[o].nonce}, true
	}
	if len(h.issued) == 0 {
		return resvHandle{}, false
	}
	return h.issued[c.pick(len(h.issued))], true
}

// step runs one op chosen by c.
func (h *resvHarness) step(c resvChooser) {
	switch op := c.pick(100); {
	case op < 28:
		h.reserve()
	case op < 48:
		if hd, ok := h.pickHandle(c); ok {
			h.ack(hd)
		}
	case op < 54:
		if hd, ok := h.pickHandle(c); ok {
			vis := time.Duration(c.pick(8)) * time.Second
			want := h.m.extend(h.now, hd.offset, hd.nonce, vis)
			got := h.tab.extend(h.now, hd.offset, hd.nonce, vis)
			h.log("extend(%d, nonce %d, %v) = %v", hd.offset, hd.nonce, vis, got)
			if got != want {
				h.fail("extend(%d, nonce %d): got %v, want %v", hd.offset, hd.nonce, got, want)
			}
		}
	case op < 60:
		if hd, ok := h.pickHandle(c); ok {
			want := h.m.nack(h.now, hd.offset, hd.nonce)
			got := h.tab.nack(h.now, hd.offset, hd.nonce)
			h.log("nack(%d, nonce %d) = %v", hd.offset, hd.nonce, got)
			if got != want {
				h.fail("nack(%d, nonce %d): got %v, want %v", hd.offset, hd.nonce, got, want)
			}
		}
	case op < 70:
		d := time.Duration(c.pick(4000)) * time.Millisecond
		h.now = h.now.Add(d)
		h.log("clock +%v", d)
	case op < 78:
		h.lim.HWM = min(h.maxHWM, h.lim.HWM+int64(1+c.pick(4)))
		h.log("hwm = %d", h.lim.HWM)
	case op < 80:
		h.lim.Oldest = min(h.lim.HWM, h.lim.Oldest+int64(c.pick(4)))
		h.log("oldest = %d", h.lim.Oldest)
	case op < 84:
		// The actor served a record it cannot read: it skips what it was
		// just given, the only way it calls skip.
		if off, ok := h.reserve(); ok {
			h.m.skip(off)
			h.tab.skip(off)
			h.log("skip(%d)", off)
		}
	case op < 85:
		// skip of any record that exists (leased, pending, new or acked),
		// as long as the caller's rule holds: with the set full, the head
		// only.
		off := int64(c.pick(int(h.lim.HWM+1))) - 1
		if f := h.m.frontier(); off == f+1 || h.m.acked[off] || int64(len(h.m.ackedAhead())) < h.lim.MaxAckedAhead {
			h.m.skip(off)
			h.tab.skip(off)
			h.log("skip(%d) of any", off)
		}
	case op < 86:
		hd := resvHandle{int64(c.pick(int(h.maxHWM+2))) - 1, uint64(c.pick(int(h.nonce + 2)))}
		h.ack(hd)
	case op < 88:
		hwm := max(0, h.lim.HWM-int64(c.pick(6)))
		want := h.m.clamp(hwm)
		got := h.tab.clamp(hwm)
		h.log("clamp(%d) = %v", hwm, got)
		if got != want {
			h.fail("clamp(%d): got clamped %v, want %v", hwm, got, want)
		}
		// The log lost its tail: new records reuse those offsets, and
		// the frontier may legitimately have moved back.
		h.lim.HWM = hwm
		h.lim.Oldest = min(h.lim.Oldest, hwm)
		h.frontier = h.m.frontier()
	case op < 90:
		h.m.leases = map[int64]resvLease{}
		h.tab.dropLeases()
		h.log("dropLeases")
	case op < 92 && c.pick(2) == 0:
		h.restartKeepingLeases(int(1+c.pick(4)), int64(1+c.pick(8)))
	case op < 92:
		// A restart or a move: only the persisted position survives.
		f, ahead := h.tab.state()
		h.tab = newReservationTable(f, ahead)
		h.m.leases = map[int64]resvLease{}
		h.m.delivered = map[int64]bool{}
		h.log("restart(%d, %v)", f, ahead)
		if gf, ga := h.tab.state(); gf != f || !slices.Equal(ga, ahead) {
			h.fail("restored state: got (%d, %v), want (%d, %v)", gf, ga, f, ahead)
		}
	case op < 94:
		h.lim.MaxInFlight = int64(1 + c.pick(6))
		h.lim.MaxAckedAhead = int64(1 + c.pick(6))
		// Mostly short leases, which expire in the run; sometimes an hour,
		// so acked and extended leases leave stale expiry entries that
		// only compaction removes.
		h.lim.Visibility = time.Duration(c.pick(10)) * time.Second
		if c.pick(4) == 0 {
			h.lim.Visibility = time.Hour
		}
		h.maxInFlightEver = max(h.maxInFlightEver, h.lim.MaxInFlight)
		h.maxAckedAheadEver = max(h.maxAckedAheadEver, h.lim.MaxAckedAhead)
		h.log("limits %+v", h.lim)
	default:
		h.reserve()
	}
	h.check()
}

// restartKeepingLeases is a restart whose state carried the leases out
// (at most limit, lowest first) and restores those within span of the
// frontier: the model keeps exactly those, each with its visibility again
// from now, and counts every offset up to the highest as delivered.
func (h *resvHarness) restartKeepingLeases(limit int, span int64) {
	f, ahead := h.tab.state()
	held := h.tab.leasesOut(nil, h.now, limit)
	h.tab = newReservationTable(f, ahead)
	got := h.tab.restoreLeases(h.now, held, span)
	h.log("restart(%d, %v) keeping %d of the leases within %d: restored %d", f, ahead, limit, span, got)

	var live []int64
	for off, l := range h.m.leases {
		if l.deadline.After(h.now) {
			live = append(live, off)
		}
	}
	slices.Sort(live)
	kept := map[int64]resvLease{}
	top := int64(-1)
	for _, off := range live[:min(limit, len(live))] {
		if off-f > span {
			continue
		}
		l := h.m.leases[off]
		kept[off] = resvLease{nonce: l.nonce, deadline: h.now.Add(l.visibility), visibility: l.visibility}
		top = max(top, off)
	}
	h.m.leases = kept
	h.m.delivered = map[int64]bool{}
	for off := f + 1; off <= top; off++ {
		h.m.delivered[off] = true
	}
	if got != len(kept) {
		h.fail("restoreLeases: got %d restored, want %d", got, len(kept))
	}
}

// check compares the visible state with the model and the table's internals
// with the invariants the file comment states.
func (h *resvHarness) check() {
	t := h.tab
	gotF, gotA := t.state()
	wantF, wantA := h.m.frontier(), h.m.ackedAhead()
	if gotF != wantF || !slices.Equal(gotA, wantA) {
		h.fail("state: got (%d, %v), want (%d, %v)", gotF, gotA, wantF, wantA)
	}
	if gotF < h.frontier {
		h.fail("frontier moved back: got %d, want >= %d", gotF, h.frontier)
	}
	h.frontier = gotF
	if got, want := t.inFlight(), len(h.m.leases); got != want {
		h.fail("inFlight: got %d, want %d", got, want)
	}
	for off, l := range h.m.leases {
		if got, ok := t.leases[off]; !ok || got.nonce != l.nonce || !got.deadline.Equal(l.deadline) {
			h.fail("lease of %d: got %+v (present %v), want %+v", off, got, ok, l)
		}
	}
	// Pending is exactly "delivered, not acked, not leased".
	for off := range h.m.delivered {
		_, leased := h.m.leases[off]
		_, pending := t.pending[off]
		if want := !h.m.acked[off] && !leased; pending != want {
			h.fail("pending(%d): got %v, want %v", off, pending, want)
		}
	}
	for off := range t.pending {
		if !h.m.delivered[off] {
			h.fail("pending(%d): got pending, want never delivered", off)
		}
		if !slices.Contains(t.redeliver.items, off) {
			h.fail("pending(%d): got no redeliver entry, want one", off)
		}
	}
	// next is the lowest offset neither delivered nor acked.
	wantNext := int64(0)
	for h.m.delivered[wantNext] || h.m.acked[wantNext] {
		wantNext++
	}
	if t.next != wantNext {
		h.fail("next: got %d, want %d", t.next, wantNext)
	}
	// Every lease has a live expiry entry.
	live := map[resvExpiry]bool{}
	for _, e := range t.expiry.items {
		live[e] = true
	}
	for off, l := range t.leases {
		if !live[resvExpiry{deadline: l.deadline, offset: off, nonce: l.nonce}] {
			h.fail("lease of %d: got no expiry entry, want one", off)
		}
	}
	resvCheckHeap(h, "expiry", t.expiry)
	resvCheckHeap(h, "redeliver", t.redeliver)
	// Bounds.
	if got, limit := t.expiry.len(), 2*len(t.leases)+resvHeapSlack; got > limit {
		h.fail("expiry heap: got %d entries, want at most %d", got, limit)
	}
	if got, limit := t.redeliver.len(), 2*len(t.pending)+resvHeapSlack; got > limit {
		h.fail("redeliver heap: got %d entries, want at most %d", got, limit)
	}
	if got := int64(len(t.leases) + len(t.pending)); got > h.maxInFlightEver {
		h.fail("leases+pending: got %d, want at most %d", got, h.maxInFlightEver)
	}
	if got := int64(len(t.ackedAhead)); got > h.maxAckedAheadEver {
		h.fail("acked-ahead: got %d, want at most %d", got, h.maxAckedAheadEver)
	}
}

func resvCheckHeap[T any](h *resvHarness, name string, hp resvHeap[T]) {
	for i := 1; i < len(hp.items); i++ {
		if hp.less(hp.items[i], hp.items[(i-1)/2]) {
			h.fail("%s heap: got item %d below its parent, want heap order", name, i)
		}
	}
}

// drain plays consumers that keep acking: every lease expires, everything
// deliverable is reserved and acked lowest first, until nothing is left. At
// least once, never a gap: it must end with every offset below HWM acked.
func (h *resvHarness) drain() {
	h.lim.Visibility = max(h.lim.Visibility, time.Second)
	h.log("drain, limits %+v", h.lim)
	for round := int64(0); h.m.frontier() < h.lim.HWM-1; round++ {
		if round > 2*h.lim.HWM+10 {
			h.fail("drain: got frontier %d after %d rounds, want %d (offsets stuck)",
				h.m.frontier(), round, h.lim.HWM-1)
		}
		// Consumers that died with leases out: wait them all out.
		for _, l := range h.m.leases {
			if l.deadline.After(h.now) {
				h.now = l.deadline
			}
		}
		h.now = h.now.Add(time.Second)
		var got []resvHandle
		for {
			off, ok := h.reserve()
			if !ok {
				break
			}
			got = append(got, resvHandle{off, h.nonce})
			h.check()
		}
		for _, hd := range got {
			if out := h.ack(hd); out != ackDone {
				h.fail("drain: ack(%d): got %v, want done", hd.offset, out)
			}
			h.check()
		}
	}
	if f, _ := h.tab.state(); f != h.lim.HWM-1 {
		h.fail("drain: got frontier %d, want %d", f, h.lim.HWM-1)
	}
}

func TestReservationMatchesModel(t *testing.T) {
	seeds, steps := 64, 3000
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		h := newResvHarness(t, 120)
		c := resvRandChooser{rand.New(rand.NewPCG(seed, 0x5eed))}
		for range steps {
			h.step(c)
		}
		h.drain()
	}
}

func FuzzReservationTable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 75, 3, 0, 0, 0, 50, 1, 1, 0})
	f.Add([]byte("reserve ack extend nack expire produce retain skip clamp drop restart"))
	seed := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		b := make([]byte, 400)
		for i := range b {
			b[i] = byte(seed.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			data = data[:4096] // bound one input's run time
		}
		h := newResvHarness(t, 48)
		c := &resvByteChooser{data: data}
		for c.more() {
			h.step(c)
		}
		h.drain()
	})
}

func TestReservationTableDeliverable(t *testing.T) {
	now := time.Unix(3000, 0)
	lim := reserveLimits{HWM: 3, Oldest: 0, MaxInFlight: 2, MaxAckedAhead: 8, Visibility: time.Second}
	tb := newReservationTable(-1, nil)
	if !tb.deliverable(lim) {
		t.Fatal("three records, none leased: got not deliverable")
	}
	if _, ok := tb.nextExpiry(); ok {
		t.Fatal("no lease out: got an expiry")
	}
	off, _ := tb.reserve(now, lim, 1)
	if at, ok := tb.nextExpiry(); !ok || !at.Equal(now.Add(time.Second)) {
		t.Fatalf("one lease out: got expiry %v %v, want %v", at, ok, now.Add(time.Second))
	}
	tb.reserve(now, lim, 2)
	if tb.deliverable(lim) {
		t.Fatal("max_in_flight leases out: got deliverable")
	}
	tb.ack(now, off, 1, lim.MaxAckedAhead)
	if !tb.deliverable(lim) {
		t.Fatal("a slot freed and record 2 unleased: got not deliverable")
	}
	tb.reserve(now, lim, 3)
	if tb.deliverable(lim) {
		t.Fatal("every record leased or acked: got deliverable")
	}
}
