package partition

import (
	"cmp"
	"slices"
	"time"

	"github.com/naradmq/narad/storage"
)

// This file is the pure core of a partition's consume path (API contract
// sections 9 and 10): which offset a consume gets, which lease a receipt
// handle names, and how acks move the consumer position. It has no clock
// (every call that cares about time is handed now), no randomness, no I/O and
// no goroutines, so the partition actor owns all of that and the rules here
// can be tested as plain scripts and against a reference model.
//
// Vocabulary:
//   - frontier: every offset <= frontier is acked (-1 when none is).
//   - acked-ahead: offsets acked out of order, all > frontier+1. The head of
//     the queue is frontier+1, the lowest unacked offset.
//   - lease: offset -> (nonce, deadline). A lease with deadline <= now is
//     expired: its handle is gone and its record is redeliverable.
//   - pending: offsets delivered before, neither acked nor leased now
//     (expired or nacked); they are served before any new record.
//   - next: the lowest offset never delivered and not acked; it only moves
//     forward (clamp aside), so every offset below it is acked, leased or
//     pending.
//
// Every offset in (frontier, next) is therefore in exactly one of
// acked-ahead, leases and pending, which is what makes "never a gap" hold:
// nothing is forgotten without being acked.
//
// Bounds: len(leases) <= MaxInFlight; len(leases)+len(pending) <= MaxInFlight
// too, because a never-delivered record is only served when nothing is
// pending (in the head-only mode pending is necessarily empty when the head
// is new); len(acked-ahead) <= MaxAckedAhead because a non-head ack is
// refused when the set is full. All three hold for the largest caps ever
// passed in (a lowered cap does not evict), plus whatever a restored state
// brought. The two lazy heaps are compacted when stale entries exceed the
// live ones plus resvHeapSlack, so they stay within 2*live+resvHeapSlack.

// resvHeapSlack is how many stale heap entries are tolerated beyond the live
// count before a rebuild. Without it a table with one lease that is extended
// in a loop would rebuild on every extend; with it a rebuild costs O(live) and
// happens at most once per live+resvHeapSlack stale entries, O(1) amortised.
const resvHeapSlack = 64

// reserveLimits are the inputs of one reserve: the log's bounds and the
// topic's consume settings, read by the actor on every request so an alter
// applies at once.
type reserveLimits struct {
	// HWM is the high watermark: records exist at offsets < HWM. It may only
	// decrease through clamp; reserve never serves an offset >= HWM.
	HWM int64
	// Oldest is the lowest offset retention kept. Offsets below it count as
	// acked: nobody can read them any more.
	Oldest int64
	// MaxInFlight caps the leases out at once; at the cap reserve serves
	// nothing so the consume moves on to another partition.
	MaxInFlight int64
	// MaxAckedAhead caps the acked-ahead set; when it is full only the head
	// is served, because serving anything else could only produce an ack
	// that has to be refused.
	MaxAckedAhead int64
	// Visibility is the lease length.
	Visibility time.Duration
}

// ackOutcome is the result of ack, extend and nack; the actor maps it to
// StatusOK (204), StatusGone (410) and StatusFull (503).
type ackOutcome int

const (
	// ackDone: the action took effect.
	ackDone ackOutcome = iota
	// ackGone: the handle names no live lease: wrong or replaced nonce,
	// expired lease, offset not leased (already acked, nacked, never served).
	ackGone
	// ackFull: an ack of a non-head offset while the acked-ahead set is full.
	// Nothing changed; the lease stays and the client retries.
	ackFull
)

func (o ackOutcome) String() string {
	switch o {
	case ackDone:
		return "done"
	case ackGone:
		return "gone"
	case ackFull:
		return "full"
	}
	return "ackOutcome(?)"
}

// resvLease is one reservation. The nonce tells this reservation apart from
// earlier and later ones of the same offset, so a handle from before a
// redelivery cannot act on the new lease.
type resvLease struct {
	nonce    uint64
	deadline time.Time
	// visibility is the lease's length as granted or last extended; a
	// restarted owner grants it again (restoreLeases).
	visibility time.Duration
}

// resvExpiry is an expiry heap entry. It is live only while the lease of
// offset still has this nonce and this deadline: an ack, nack or skip deletes
// the lease and an extend moves its deadline, and rather than searching the
// heap for the old entry (O(n)) those calls leave it to be discarded when it
// surfaces or at the next compaction.
type resvExpiry struct {
	deadline time.Time
	offset   int64
	nonce    uint64
}

// reservationTable is one partition's consumer position and leases. It is
// not safe for concurrent use: the partition actor is its only user.
type reservationTable struct {
	frontier   int64
	ackedAhead map[int64]struct{}
	// next is the never-delivered cursor: the lowest offset that was never
	// delivered and is not acked.
	next   int64
	leases map[int64]resvLease
	// expiry orders leases by deadline (lazy deletion, see resvExpiry).
	expiry resvHeap[resvExpiry]
	// pending is the set of offsets waiting for redelivery; redeliver orders
	// it lowest first. A redeliver entry is live only while its offset is in
	// pending; only skip and retention remove from pending other than by
	// popping, so stale entries are rare.
	pending   map[int64]struct{}
	redeliver resvHeap[int64]
}

// newReservationTable restores persisted consumer state: offsets <= frontier
// or in ackedAhead are never delivered again. Everything else from frontier+1
// on counts as never delivered, which is right after a move: leases do not
// travel (rule K5), so their records are served again. After a restart,
// restoreLeases then brings back the leases the last life wrote.
// The input is normalised rather than trusted: a frontier below -1 is -1,
// acked-ahead entries <= frontier are dropped and an entry at frontier+1
// advances the frontier. ackedAhead is not retained.
func newReservationTable(frontier int64, ackedAhead []int64) *reservationTable {
	t := &reservationTable{
		frontier:   max(frontier, -1),
		ackedAhead: make(map[int64]struct{}, len(ackedAhead)),
		leases:     make(map[int64]resvLease),
		pending:    make(map[int64]struct{}),
		expiry:     resvHeap[resvExpiry]{less: resvExpiryLess},
		redeliver:  resvHeap[int64]{less: resvOffsetLess},
	}
	for _, off := range ackedAhead {
		if off > t.frontier {
			t.ackedAhead[off] = struct{}{}
		}
	}
	t.resvAdvance()
	t.next = t.frontier + 1
	t.resvFixNext()
	return t
}

// restoreLeases brings back the leases a previous life of the partition had
// out when it last wrote its state (offset, nonce and length: a deadline of
// another life's clock would mean nothing to this one), on a table just made by
// newReservationTable. Each is granted its own visibility again from now:
// its holder could not ack while no owner was up, and the ack it retries
// against this life must find the lease, not a redelivery to another
// consumer. The handles stay the same, so that retry is an ordinary ack.
//
// Every other unacked offset up to the highest restored lease becomes
// pending: the previous life may have delivered it (its lease was not
// written, expired or was nacked), and the invariant "everything below next
// is acked, leased or pending" must hold. So a lease further than spanMax
// past the frontier is not restored (its record is served again, as it was
// before leases were kept), which bounds the pending set this makes. Leases
// on acked offsets, with nonce 0 or no visibility, or repeating an offset
// are skipped: the input is normalised, not trusted, as in
// newReservationTable. The caller has already dropped leases at or past the
// HWM (storage.ClampConsumerState). It returns how many it restored. O(n +
// span log span).
func (t *reservationTable) restoreLeases(now time.Time, held []storage.Lease, spanMax int64) (restored int) {
	top := int64(-1)
	for _, l := range held {
		if l.Offset <= t.frontier || l.Offset-t.frontier > spanMax || l.Nonce == 0 || l.Visibility <= 0 {
			continue
		}
		if _, acked := t.ackedAhead[l.Offset]; acked {
			continue
		}
		if _, dup := t.leases[l.Offset]; dup {
			continue
		}
		deadline := now.Add(l.Visibility)
		t.leases[l.Offset] = resvLease{nonce: l.Nonce, deadline: deadline, visibility: l.Visibility}
		t.expiry.push(resvExpiry{deadline: deadline, offset: l.Offset, nonce: l.Nonce})
		top = max(top, l.Offset)
		restored++
	}
	for off := t.next; off < top; off++ {
		if _, acked := t.ackedAhead[off]; acked {
			continue
		}
		if _, leased := t.leases[off]; leased {
			continue
		}
		t.resvAddPending(off)
	}
	if top >= t.next {
		t.next = top + 1
		t.resvFixNext()
	}
	return restored
}

// leasesOut appends to dst the leases out at now, lowest offsets first, at
// most limit of them, for the consumer state (restoreLeases reads them
// back). A lease past its deadline is left out even if not reaped yet: its
// record is redeliverable. O(n log n) in the leases out.
func (t *reservationTable) leasesOut(dst []storage.Lease, now time.Time, limit int) []storage.Lease {
	start := len(dst)
	for off, l := range t.leases {
		if l.deadline.After(now) {
			dst = append(dst, storage.Lease{Offset: off, Nonce: l.nonce, Visibility: l.visibility})
		}
	}
	out := dst[start:]
	slices.SortFunc(out, func(a, b storage.Lease) int { return cmp.Compare(a.Offset, b.Offset) })
	if len(out) > limit {
		dst = dst[:start+max(limit, 0)]
	}
	return dst
}

// reserve leases the lowest deliverable offset until now+lim.Visibility
// under nonce, or reports !ok when there is none. In order:
//  1. leases with deadline <= now expire and their offsets become pending;
//  2. offsets below min(Oldest, HWM) count as acked (retention removed them);
//     leases and redeliveries among them are dropped;
//  3. at MaxInFlight leases nothing is served;
//  4. with the acked-ahead set full only the head (frontier+1) may be served,
//     if it is not leased;
//  5. otherwise the lowest pending offset, else next, if below HWM.
//
// The pinned consume (?partition=N without offset) is the same call. The
// caller passes a fresh nonce each time (the actor owns the counter), so a
// redelivery gets a new handle. O(log n) amortised; step 2 scans the leases
// and acked-ahead set, but only when retention passed the frontier, which
// happens at most once per retention step.
func (t *reservationTable) reserve(now time.Time, lim reserveLimits, nonce uint64) (offset int64, ok bool) {
	t.resvReap(now)
	t.resvRetain(min(lim.Oldest, lim.HWM))
	defer t.resvCompact()
	if int64(len(t.leases)) >= lim.MaxInFlight {
		return -1, false
	}
	offset, ok = t.resvPick(lim)
	if !ok {
		return -1, false
	}
	deadline := now.Add(lim.Visibility)
	t.leases[offset] = resvLease{nonce: nonce, deadline: deadline, visibility: lim.Visibility}
	t.expiry.push(resvExpiry{deadline: deadline, offset: offset, nonce: nonce})
	return offset, true
}

// deliverable reports whether reserve would lease a record now, changing
// nothing: the hint a partition gives a routing node (Reserved.More). It
// may say yes for a redelivery that turns out stale, and no for a lease
// that expired but was not reaped yet (nextExpiry tells when that is).
func (t *reservationTable) deliverable(lim reserveLimits) bool {
	if int64(len(t.leases)) >= lim.MaxInFlight {
		return false
	}
	if int64(len(t.ackedAhead)) >= lim.MaxAckedAhead {
		head := t.frontier + 1
		_, leased := t.leases[head]
		return head < lim.HWM && !leased
	}
	if t.redeliver.len() > 0 && t.redeliver.peek() < lim.HWM {
		return true
	}
	return t.next < lim.HWM
}

// nextExpiry is the earliest deadline of a lease out, when its record may
// become deliverable again; false when no lease is out. An entry made
// stale by an ack or extend may answer early: a hint.
func (t *reservationTable) nextExpiry() (time.Time, bool) {
	if len(t.leases) == 0 || t.expiry.len() == 0 {
		return time.Time{}, false
	}
	return t.expiry.peek().deadline, true
}

// resvPick chooses and removes the offset to serve (steps 4 and 5 of
// reserve), without leasing it.
func (t *reservationTable) resvPick(lim reserveLimits) (int64, bool) {
	t.resvDropStaleRedeliveries()
	if int64(len(t.ackedAhead)) >= lim.MaxAckedAhead {
		// Any ack but the head's would be refused, so serve only the head:
		// its ack shrinks the set. The head is unacked, so it is leased
		// (nothing to serve), pending (then it is the lowest pending
		// offset) or never delivered (then it is next).
		head := t.frontier + 1
		if head >= lim.HWM {
			return -1, false
		}
		if t.redeliver.len() > 0 && t.redeliver.peek() == head {
			t.redeliver.pop()
			delete(t.pending, head)
			return head, true
		}
		if t.next == head {
			t.next++
			t.resvFixNext()
			return head, true
		}
		return -1, false
	}
	if t.redeliver.len() > 0 {
		// Every pending offset is below next, so the lowest pending offset
		// is also the lowest deliverable one. It is >= HWM only when the
		// caller lowered HWM without clamp; then nothing below is either.
		off := t.redeliver.peek()
		if off >= lim.HWM {
			return -1, false
		}
		t.redeliver.pop()
		delete(t.pending, off)
		return off, true
	}
	if t.next < lim.HWM {
		off := t.next
		t.next++
		t.resvFixNext()
		return off, true
	}
	return -1, false
}

// ack marks offset done for good if (offset, nonce) names a live lease. An ack
// other than of the head (frontier+1) is refused with ackFull while the
// acked-ahead set holds maxAckedAhead or more; the lease stays. O(log n)
// amortised (the frontier may advance over a run of acked-ahead offsets, each
// paid for by the ack that put it there).
func (t *reservationTable) ack(now time.Time, offset int64, nonce uint64, maxAckedAhead int64) ackOutcome {
	t.resvReap(now)
	defer t.resvCompact()
	if !t.resvHolds(now, offset, nonce) {
		return ackGone
	}
	if offset != t.frontier+1 && int64(len(t.ackedAhead)) >= maxAckedAhead {
		return ackFull
	}
	delete(t.leases, offset)
	t.resvMarkAcked(offset)
	return ackDone
}

// extend restarts the lease of (offset, nonce) with a full visibility from
// now; the same handle keeps working. A visibility <= 0 makes the lease expire
// at the next call. The old expiry entry goes stale (see resvExpiry).
func (t *reservationTable) extend(now time.Time, offset int64, nonce uint64, visibility time.Duration) ackOutcome {
	t.resvReap(now)
	defer t.resvCompact()
	if !t.resvHolds(now, offset, nonce) {
		return ackGone
	}
	deadline := now.Add(visibility)
	t.leases[offset] = resvLease{nonce: nonce, deadline: deadline, visibility: visibility}
	t.expiry.push(resvExpiry{deadline: deadline, offset: offset, nonce: nonce})
	return ackDone
}

// nack releases the lease of (offset, nonce) at once: the record is
// redeliverable right away and the handle is dead.
func (t *reservationTable) nack(now time.Time, offset int64, nonce uint64) ackOutcome {
	t.resvReap(now)
	defer t.resvCompact()
	if !t.resvHolds(now, offset, nonce) {
		return ackGone
	}
	delete(t.leases, offset)
	t.resvAddPending(offset)
	return ackDone
}

// skip acks offset without a delivery: the record cannot be read (corrupt
// frame), and leaving it unacked would stick the head on it forever. Any lease
// or pending redelivery of it is dropped. An offset already acked is left
// alone. skip does not check the acked-ahead cap, so the actor calls it only
// on an offset reserve just served: while the set is full that is the head,
// which shrinks the set, and otherwise the set had room for one more.
func (t *reservationTable) skip(offset int64) {
	if offset <= t.frontier {
		return
	}
	if _, ok := t.ackedAhead[offset]; ok {
		return
	}
	delete(t.leases, offset)
	delete(t.pending, offset)
	t.resvMarkAcked(offset)
	t.resvCompact()
}

// state returns the consumer position for persistence: the frontier and the
// acked-ahead offsets, ascending, in a fresh slice (nil when empty) the caller
// owns. O(k log k) in the acked-ahead size; meant for the periodic flush, not
// for every request.
func (t *reservationTable) state() (frontier int64, ackedAhead []int64) {
	if len(t.ackedAhead) > 0 {
		ackedAhead = make([]int64, 0, len(t.ackedAhead))
		for off := range t.ackedAhead {
			ackedAhead = append(ackedAhead, off)
		}
		slices.Sort(ackedAhead)
	}
	return t.frontier, ackedAhead
}

// inFlight is the number of leases held. Expiry is applied lazily: reserve,
// ack, extend and nack first reap every lease with deadline <= their now, so
// the count is exact as of the latest of those calls, and a lease that
// expired since still counts until the next one.
func (t *reservationTable) inFlight() int {
	return len(t.leases)
}

// unacked is how many records below hwm no consumer has acked yet.
func (t *reservationTable) unacked(hwm int64) int64 {
	return max(hwm-(t.frontier+1)-int64(len(t.ackedAhead)), 0)
}

// clamp fits the table to a log whose high watermark is hwm, after a move or
// a recovery that lost the tail: nothing at or past hwm may count as acked,
// leased or pending, or records later appended at those offsets would be
// skipped or mixed up with old handles. The frontier drops to at most hwm-1,
// acked-ahead offsets, leases and redeliveries at or past hwm are forgotten
// and next drops to at most hwm. It reports whether the frontier was lowered,
// which the caller logs as a warning (the same rule as
// storage.ClampConsumerState: dropped acked-ahead entries are expected and
// not reported). O(n); a negative hwm counts as 0.
func (t *reservationTable) clamp(hwm int64) (clamped bool) {
	hwm = max(hwm, 0)
	if t.frontier > hwm-1 {
		t.frontier = hwm - 1
		clamped = true
	}
	for off := range t.ackedAhead {
		if off >= hwm {
			delete(t.ackedAhead, off)
		}
	}
	for off := range t.leases {
		if off >= hwm {
			delete(t.leases, off)
		}
	}
	for off := range t.pending {
		if off >= hwm {
			delete(t.pending, off)
		}
	}
	t.next = min(t.next, hwm)
	t.resvFixNext()
	t.resvRebuildExpiry()
	t.resvRebuildRedeliver()
	return clamped
}

// dropLeases forgets every lease and makes its offset redeliverable at once:
// the partition is being frozen or handed over, and a lease cannot travel
// (rule K5), so whoever serves the partition next redelivers. The old handles
// are gone. O(n).
func (t *reservationTable) dropLeases() {
	for off := range t.leases {
		t.pending[off] = struct{}{}
	}
	clear(t.leases)
	t.resvRebuildExpiry()
	t.resvRebuildRedeliver()
}

// resvHolds reports whether (offset, nonce) names a lease live at now.
func (t *reservationTable) resvHolds(now time.Time, offset int64, nonce uint64) bool {
	l, ok := t.leases[offset]
	return ok && l.nonce == nonce && l.deadline.After(now)
}

// resvReap expires every lease with deadline <= now, making its offset
// pending. Stale entries met on the way are discarded.
func (t *reservationTable) resvReap(now time.Time) {
	for t.expiry.len() > 0 && !t.expiry.peek().deadline.After(now) {
		e := t.expiry.pop()
		l, ok := t.leases[e.offset]
		if !ok || l.nonce != e.nonce || !l.deadline.Equal(e.deadline) {
			continue
		}
		delete(t.leases, e.offset)
		t.resvAddPending(e.offset)
	}
}

// resvRetain makes every offset below oldest count as acked. Nothing to do
// unless retention passed the frontier; then the leases and redeliveries the
// frontier passed are dropped (their records no longer exist, and a lease on
// one must not hold an in-flight slot).
func (t *reservationTable) resvRetain(oldest int64) {
	// Compared as oldest <= frontier+1, not oldest-1 <= frontier, so a
	// nonsense Oldest near MinInt64 cannot wrap around.
	if oldest <= t.frontier+1 {
		return
	}
	t.frontier = oldest - 1
	for off := range t.ackedAhead {
		if off <= t.frontier {
			delete(t.ackedAhead, off)
		}
	}
	t.resvAdvance()
	for off := range t.leases {
		if off <= t.frontier {
			delete(t.leases, off)
		}
	}
	// Pending offsets at or below the frontier are the lowest entries, so
	// they surface first.
	for t.redeliver.len() > 0 && t.redeliver.peek() <= t.frontier {
		delete(t.pending, t.redeliver.pop())
	}
	t.resvFixNext()
}

// resvMarkAcked records an ack of offset, which must be > frontier and
// neither leased nor pending any more.
func (t *reservationTable) resvMarkAcked(offset int64) {
	if offset == t.frontier+1 {
		t.frontier = offset
		t.resvAdvance()
	} else {
		t.ackedAhead[offset] = struct{}{}
	}
	t.resvFixNext()
}

// resvAdvance moves the frontier over the contiguous run of acked-ahead
// offsets that follows it.
func (t *reservationTable) resvAdvance() {
	for {
		if _, ok := t.ackedAhead[t.frontier+1]; !ok {
			return
		}
		delete(t.ackedAhead, t.frontier+1)
		t.frontier++
	}
}

// resvFixNext restores "next is above the frontier and not acked". Acked
// offsets at or past next come only from a restored state or skip, and next
// passes each at most once.
func (t *reservationTable) resvFixNext() {
	if t.next <= t.frontier {
		t.next = t.frontier + 1
	}
	for {
		if _, ok := t.ackedAhead[t.next]; !ok {
			return
		}
		t.next++
	}
}

// resvAddPending queues offset for redelivery. The guard keeps one heap
// entry per pending offset.
func (t *reservationTable) resvAddPending(offset int64) {
	if _, ok := t.pending[offset]; ok {
		return
	}
	t.pending[offset] = struct{}{}
	t.redeliver.push(offset)
}

// resvDropStaleRedeliveries pops redeliver entries whose offset is no longer
// pending, so that peek shows the lowest pending offset.
func (t *reservationTable) resvDropStaleRedeliveries() {
	for t.redeliver.len() > 0 {
		if _, ok := t.pending[t.redeliver.peek()]; ok {
			return
		}
		t.redeliver.pop()
	}
}

// resvCompact rebuilds a lazy heap once its stale entries outnumber the live
// ones by more than resvHeapSlack (see resvHeapSlack for the amortisation).
func (t *reservationTable) resvCompact() {
	if t.expiry.len() > 2*len(t.leases)+resvHeapSlack {
		t.resvRebuildExpiry()
	}
	if t.redeliver.len() > 2*len(t.pending)+resvHeapSlack {
		t.resvRebuildRedeliver()
	}
}

func (t *reservationTable) resvRebuildExpiry() {
	items := resvReuse(t.expiry.items, len(t.leases))
	for off, l := range t.leases {
		items = append(items, resvExpiry{deadline: l.deadline, offset: off, nonce: l.nonce})
	}
	t.expiry.init(items)
}

func (t *reservationTable) resvRebuildRedeliver() {
	items := resvReuse(t.redeliver.items, len(t.pending))
	for off := range t.pending {
		items = append(items, off)
	}
	t.redeliver.init(items)
}

// resvReuse empties s for n entries, keeping its array unless that is far
// larger than needed: after a burst the heaps give the memory back instead of
// holding their peak forever. The margin covers the slack, or a table with
// few leases would free and regrow its array on every compaction.
func resvReuse[T any](s []T, n int) []T {
	if cap(s) > 4*(n+resvHeapSlack) {
		return make([]T, 0, n)
	}
	return s[:0]
}

func resvExpiryLess(a, b resvExpiry) bool {
	if !a.deadline.Equal(b.deadline) {
		return a.deadline.Before(b.deadline)
	}
	// Ties broken by offset only to keep the heap's shape independent of
	// insertion order; no outcome depends on it.
	return a.offset < b.offset
}

func resvOffsetLess(a, b int64) bool { return a < b }

// resvHeap is a binary min-heap on a slice. It is written out rather than
// using container/heap, whose interface boxes every pushed value.
type resvHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *resvHeap[T]) len() int { return len(h.items) }

func (h *resvHeap[T]) peek() T { return h.items[0] }

func (h *resvHeap[T]) push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

func (h *resvHeap[T]) pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

// init takes items as the heap's contents and orders them in O(n).
func (h *resvHeap[T]) init(items []T) {
	h.items = items
	for i := len(items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *resvHeap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *resvHeap[T]) down(i int) {
	n := len(h.items)
	for {
		smallest := i
		if l := 2*i + 1; l < n && h.less(h.items[l], h.items[smallest]) {
			smallest = l
		}
		if r := 2*i + 2; r < n && h.less(h.items[r], h.items[smallest]) {
			smallest = r
		}
		if smallest == i {
			return
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
}
